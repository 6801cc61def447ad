//! A miss's leader: it runs the fetch, hands a failure to the strategies' `recover`
//! (which may serve the expired entry or a replacement), gives a value its lifetime
//! (the policy's, then each strategy's `admit`), stores it unless an invalidation
//! logged since the flight began names one of its references (checked under the
//! gate, see the cache's module docs), and hands the result to every follower.

use std::error::Error as StdError;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Inner;
use crate::error::{CacheError, FetchError};
use crate::inflight::{Flight, LeaderGuard};
use crate::key::CacheKey;
use crate::namespace::Namespace;
use crate::policy::Fetched;
use crate::references::Reference;
use crate::stats::Counter;
use crate::storage::{deadline_after, Entry, Stored};
use crate::strategy::{Admission, Lifetime, Recovery};

/// Runs one flight's fetch as its leader: fetch, maybe store, publish.
/// `previous` is the expired entry the leader found, for `recover`.
pub(crate) async fn run_flight<V, F, Fut, T, E>(
    inner: &Inner<V>,
    namespace: &Namespace<V>,
    key: CacheKey,
    flight: &Arc<Flight<V>>,
    fetch: F,
    previous: Option<Stored<V>>,
) -> Result<V, CacheError>
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    T: Into<Fetched<V>>,
    E: Into<Box<dyn StdError + Send + Sync>>,
{
    let guard = LeaderGuard::new(&inner.inflight, key, flight);
    let started = Instant::now();
    let fetched = fetch()
        .await
        .map(Into::into)
        .map_err(|error| -> FetchError { Arc::from(error.into()) });
    let answer = Answer {
        fetched,
        fetched_in: started.elapsed(),
    };
    inner
        .settle(namespace, key, flight, guard, answer, previous.as_ref())
        .await
}

/// A leader's fetch, answered: the value or the error, and how long it took.
pub(crate) struct Answer<V> {
    pub(crate) fetched: Result<Fetched<V>, FetchError>,
    pub(crate) fetched_in: Duration,
}

/// What the strategies made of a failed fetch.
enum Recovered<V> {
    /// The previous entry, marked: handed out, not stored.
    Stale(V),
    /// A value to store like a fetched one.
    Store(Fetched<V>),
}

impl<V: Clone + Send + Sync + 'static> Inner<V> {
    /// A leader's last step, once its fetch answered: a failure goes to the
    /// strategies' `recover` and else to every waiter; a value is stored if
    /// allowed and handed to every waiter (before the store when the
    /// namespace has strategies, so a slow `admit` holds up nobody).
    pub(crate) async fn settle(
        &self,
        namespace: &Namespace<V>,
        key: CacheKey,
        flight: &Arc<Flight<V>>,
        mut guard: LeaderGuard<'_, V>,
        answer: Answer<V>,
        previous: Option<&Stored<V>>,
    ) -> Result<V, CacheError> {
        let strategies = !namespace.policy().strategies.is_empty();
        let fetched = match answer.fetched {
            Ok(fetched) => fetched,
            Err(error) => {
                namespace.counters().incr(Counter::Errors);
                let recovered = if strategies {
                    self.recover(namespace, key, &error, previous)
                } else {
                    None
                };
                match recovered {
                    Some(Recovered::Store(fetched)) => fetched,
                    Some(Recovered::Stale(value)) => {
                        guard.finish(Ok(&value), false);
                        return Ok(value);
                    }
                    None => {
                        guard.finish(Err(&error), false);
                        return Err(CacheError::Fetch(error));
                    }
                }
            }
        };
        if strategies {
            guard.publish(&fetched.value);
            // Let the woken followers run before `admit` does: a hook that
            // blocks this thread would otherwise strand the one tokio keeps
            // in this worker's unstealable LIFO slot.
            tokio::task::yield_now().await;
        }
        let stored = self
            .store(namespace, key, flight, &fetched, answer.fetched_in)
            .await;
        guard.finish(Ok(&fetched.value), stored);
        Ok(fetched.value)
    }

    /// What the namespace's strategies make of a failed fetch; `None` lets
    /// the error through.
    fn recover(
        &self,
        namespace: &Namespace<V>,
        key: CacheKey,
        error: &FetchError,
        previous: Option<&Stored<V>>,
    ) -> Option<Recovered<V>> {
        let now = Instant::now();
        let counters = namespace.counters();
        for strategy in namespace.policy().strategies.iter() {
            let answer = strategy.call(
                namespace.name(),
                key,
                now,
                counters,
                || Recovery::Fail,
                |hooks, context| hooks.recover(context, error, previous),
            );
            let recovered = match (answer, previous) {
                (Recovery::Fail, _) | (Recovery::ServeStale, None) => continue,
                (Recovery::ServeStale, Some(previous)) => {
                    let value = match &self.stale_marker {
                        Some(mark) => mark(
                            &previous.value,
                            now.saturating_duration_since(previous.fresh_until),
                        ),
                        None => previous.value.clone(),
                    };
                    Recovered::Stale(value)
                }
                (Recovery::Replace(fetched), _) => Recovered::Store(fetched),
            };
            counters.decide(strategy.name(), "recovered");
            return Some(recovered);
        }
        None
    }

    /// The lifetime the policy gives `fetched`, then each strategy's `admit`
    /// in turn; `None` when it is not to be stored.
    fn lifetime(
        &self,
        namespace: &Namespace<V>,
        key: CacheKey,
        fetched: &Fetched<V>,
    ) -> Option<Lifetime> {
        let policy = namespace.policy();
        let ttl = fetched
            .ttl
            .unwrap_or_else(|| policy.ttl.resolve(&fetched.value));
        let stale = fetched
            .stale
            .unwrap_or_else(|| policy.stale.resolve(&fetched.value));
        let mut lifetime = Lifetime::new(ttl, stale);
        let zero = |l: &Lifetime| l.ttl.is_zero() && l.stale.is_zero();
        // A fetch that said "keep nothing" is not second-guessed.
        if zero(&lifetime) && (policy.strategies.is_empty() || fetched.ttl.is_some()) {
            return None;
        }
        let now = Instant::now();
        let counters = namespace.counters();
        for strategy in policy.strategies.iter() {
            let before = lifetime;
            let admission = strategy.call(
                namespace.name(),
                key,
                now,
                counters,
                || Admission::Store,
                |hooks, context| {
                    let mut proposed = lifetime;
                    let admission = hooks.admit(context, fetched, &mut proposed);
                    lifetime = proposed;
                    admission
                },
            );
            let decision = match admission {
                Admission::Refuse => "refused",
                Admission::Store if lifetime == before => "admitted",
                Admission::Store => "adjusted",
            };
            counters.decide(strategy.name(), decision);
            if admission == Admission::Refuse {
                return None;
            }
        }
        // Nothing fresh or stale is still worth storing when a strategy asked to
        // keep it for `recover` (stale-if-error at ttl 0).
        if zero(&lifetime) && lifetime.retain.is_zero() {
            return None;
        }
        lifetime.retain = lifetime
            .retain
            .max(lifetime.ttl.saturating_add(lifetime.stale));
        Some(lifetime)
    }

    /// Stores `fetched` if the policy, the strategies and the race check
    /// allow it. Returns whether it stored a value a caller can be served (a
    /// value kept only for `recover`, already expired, is not one: a caller
    /// that looked before it landed has no reason to look again).
    async fn store(
        &self,
        namespace: &Namespace<V>,
        key: CacheKey,
        flight: &Flight<V>,
        fetched: &Fetched<V>,
        fetched_in: Duration,
    ) -> bool {
        if !namespace.policy().may_store() {
            return false;
        }
        let Some(lifetime) = self.lifetime(namespace, key, fetched) else {
            return false;
        };
        let references: Arc<[Reference]> = Arc::from(fetched.references.as_slice());
        let _gate = self.gate.read().await;
        if self.inflight.forbids_store(flight, key, &references) {
            tracing::debug!(%key, "not storing a value fetched before an invalidation");
            return false;
        }
        let now = Instant::now();
        let fresh_until = deadline_after(now, lifetime.ttl);
        let stale_until = deadline_after(fresh_until, lifetime.stale);
        let entry = Entry {
            value: fetched.value.clone(),
            fresh_until,
            stale_until,
            fetched_in,
            references,
            namespace: Arc::clone(namespace.shared_name()),
        };
        let servable = !(lifetime.ttl.is_zero() && lifetime.stale.is_zero());
        match self.storage.set(key, entry, lifetime.retain).await {
            Ok(()) => servable,
            Err(error) => {
                namespace.counters().incr(Counter::StorageErrors);
                tracing::debug!(%error, "cache storage write failed");
                false
            }
        }
    }
}
