//! What a call finds before it fetches: whether a strategy bypasses it, the storage
//! read (shared by concurrent callers of one key over a remote store), and what a hit
//! does: a fresh hit counted and maybe refreshed early, a stale entry served while
//! one background refresh runs. Refreshes run as spawned tasks, through the same
//! leader path as a miss ([`super::leader`]).

use std::error::Error as StdError;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use tokio::runtime::Handle;

use super::leader::run_flight;
use super::{Cache, Inner, SharedRead};
use crate::inflight::{Claim, Flight, LeaderGuard, Outcome};
use crate::key::CacheKey;
use crate::namespace::Namespace;
use crate::policy::Fetched;
use crate::references::Invalidation;
use crate::stats::Counter;
use crate::storage::Stored;

impl<V: Clone + Send + Sync + 'static> Inner<V> {
    /// Whether a strategy of the namespace bypasses this call; `count` says
    /// whether to count the decision (a lookup that will be made again, as
    /// `hit_now`'s, does not).
    pub(crate) fn bypassed(&self, namespace: &Namespace<V>, key: CacheKey, count: bool) -> bool {
        let now = Instant::now();
        let counters = namespace.counters();
        namespace.policy().strategies.iter().any(|s| {
            s.call(
                namespace.name(),
                key,
                now,
                counters,
                || false,
                |hooks, context| {
                    let yes = hooks.bypass(context);
                    if yes && count {
                        context.count("bypassed");
                    }
                    yes
                },
            )
        })
    }

    /// On a fresh hit of `stored`: whether a strategy wants it refreshed
    /// now, and if so the refresh flight (none when a fetch of the key is
    /// already in flight: at most one runs) and the runtime to run it on.
    pub(crate) fn refresh_early(
        &self,
        namespace: &Namespace<V>,
        key: CacheKey,
        stored: &Stored<V>,
        now: Instant,
    ) -> Option<(Handle, Arc<Flight<V>>)> {
        let counters = namespace.counters();
        let wanted = namespace.policy().strategies.iter().find(|s| {
            s.call(
                namespace.name(),
                key,
                now,
                counters,
                || false,
                |hooks, context| hooks.refresh_early(context, stored),
            )
        })?;
        let runtime = Handle::try_current().ok()?;
        match self.inflight.claim_refresh(key) {
            Some(flight) => {
                counters.decide(wanted.name(), "early_refresh");
                counters.incr(Counter::Refreshes);
                Some((runtime, flight))
            }
            None => {
                counters.decide(wanted.name(), "early_refresh_in_flight");
                None
            }
        }
    }

    /// Reads `key` from the storage, sharing the read with concurrent
    /// callers if the storage asks for it. A failed read is counted and
    /// becomes a miss. Returns the retired count read before the read (see
    /// `InFlight::claim`) and what was found.
    pub(super) async fn read(&self, key: CacheKey, namespace: &Namespace<V>) -> SharedRead<V> {
        if !self.shared_reads {
            let seen = self.inflight.retired(key);
            return (seen, self.read_once(key, namespace).await);
        }
        loop {
            match self.reads.claim(key, None) {
                Claim::Lead(flight) => {
                    let guard = LeaderGuard::new(&self.reads, key, &flight);
                    let seen = self.inflight.retired(key);
                    let read = (seen, self.read_once(key, namespace).await);
                    guard.finish(Ok(&read), false);
                    return read;
                }
                Claim::Follow(flight) => {
                    let outcome = match self.wait_timeout {
                        None => flight.wait().await,
                        Some(limit) => match tokio::time::timeout(limit, flight.wait()).await {
                            Ok(outcome) => outcome,
                            // Give up on the shared read: a miss.
                            Err(_) => return (self.inflight.retired(key), None),
                        },
                    };
                    match outcome {
                        Outcome::Done(Ok(read)) => return read.clone(),
                        // A read leader never publishes an error.
                        Outcome::Done(Err(_)) => return (self.inflight.retired(key), None),
                        // The leader went away: read again.
                        Outcome::Abandoned => continue,
                    }
                }
                Claim::LookAgain => continue,
            }
        }
    }

    pub(super) async fn read_once(
        &self,
        key: CacheKey,
        namespace: &Namespace<V>,
    ) -> Option<Stored<V>> {
        match self.storage.get(key).await {
            Ok(found) => found,
            Err(error) => {
                namespace.counters().incr(Counter::StorageErrors);
                tracing::debug!(%error, "cache storage read failed; fetching");
                None
            }
        }
    }

    /// Keeps callers from joining a storage read that started before an
    /// invalidation (it may return what the invalidation drops).
    pub(super) fn forget_reads(&self) {
        if self.shared_reads {
            self.reads.invalidate(Invalidation::All);
        }
    }
}

impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// A fresh entry of `key` was found: the hit is counted and, when one of the
    /// namespace's strategies asks for it, an early refresh starts in the background
    /// (at most one in flight per key). `refresher` makes that refresh's fetch, and
    /// only runs when one starts.
    pub(crate) fn fresh_hit<F, Fut, T, E>(
        &self,
        namespace: &Namespace<V>,
        key: CacheKey,
        stored: &Stored<V>,
        now: Instant,
        strategies: bool,
        refresher: impl FnOnce() -> F,
    ) where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Into<Fetched<V>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>> + Send + 'static,
    {
        namespace.counters().incr(Counter::Hits);
        if strategies {
            if let Some((runtime, flight)) = self.inner.refresh_early(namespace, key, stored, now) {
                spawn_refresh(
                    &self.inner,
                    &runtime,
                    namespace,
                    key,
                    flight,
                    refresher(),
                    None,
                );
            }
        }
    }

    /// An expired entry of `key` within its stale window was found: it is served,
    /// counted, and refreshed once in the background by `fetch` (unless a refresh of
    /// the key is already in flight). Without a runtime to refresh on nothing is
    /// served and `fetch` comes back, for the caller to fetch as for a miss.
    pub(crate) fn stale_hit<F, Fut, T, E>(
        &self,
        namespace: &Namespace<V>,
        key: CacheKey,
        stored: &Stored<V>,
        strategies: bool,
        fetch: F,
    ) -> Result<(), F>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Into<Fetched<V>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>> + Send + 'static,
    {
        let Ok(runtime) = Handle::try_current() else {
            return Err(fetch);
        };
        let counters = namespace.counters();
        counters.incr(Counter::Stale);
        if let Some(flight) = self.inner.inflight.claim_refresh(key) {
            counters.incr(Counter::Refreshes);
            let previous = strategies.then(|| stored.clone());
            spawn_refresh(
                &self.inner,
                &runtime,
                namespace,
                key,
                flight,
                fetch,
                previous,
            );
        }
        Ok(())
    }
}

/// Starts a background refresh of `key` on `runtime`: `flight` was claimed
/// for it, `fetch` fetches the key alone.
pub(crate) fn spawn_refresh<V, F, Fut, T, E>(
    inner: &Arc<Inner<V>>,
    runtime: &Handle,
    namespace: &Namespace<V>,
    key: CacheKey,
    flight: Arc<Flight<V>>,
    fetch: F,
    previous: Option<Stored<V>>,
) where
    V: Clone + Send + Sync + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Into<Fetched<V>> + Send + 'static,
    E: Into<Box<dyn StdError + Send + Sync>> + Send + 'static,
{
    let inner = Arc::clone(inner);
    let namespace = namespace.clone();
    runtime.spawn(async move {
        let _ = run_flight(&inner, &namespace, key, &flight, fetch, previous).await;
    });
}
