//! The public [`Cache`]: `get_or_fetch`, `invalidate`, `clear`, `stats`.
//!
//! One call of [`Cache::get_or_fetch`]:
//! 1. If a strategy bypasses the call, fetch directly (a skip).
//! 2. Unless the namespace's policy can store nothing (`ttl = 0`,
//!    `stale = 0`, no strategy), read the storage. A fresh value is returned at once (a
//!    hit); if a strategy asks for an early refresh and no fetch is in
//!    flight for the key, one background refresh starts. A stale value is
//!    returned at once too (a stale serve), and if no fetch is in flight
//!    for the key, one background refresh starts.
//! 3. Otherwise claim the key in the dedupe table: join the fetch in flight
//!    (a dedupe) or lead a new one (a miss). The leader runs `fetch`,
//!    maybe stores the value, then hands the result to every follower. With
//!    strategies, the followers get the value first, then the strategies'
//!    `admit` and the store run (a slow hook cannot hold them up), and a
//!    failed fetch goes to the strategies' `recover`, which may serve the
//!    expired entry the leader found (step 2 keeps it for that).
//!
//! With `ttl = 0`, `stale = 0` and no strategy step 2 is skipped: an
//! uncontended call costs one insert and one remove in the dedupe table, and
//! nothing is kept. With a strategy, step 2 runs at `ttl = 0` too: the
//! strategies' `admit` may keep a value the policy would not (`origin-ttl`
//! stores what the origin allows; `stale-if-error` keeps the last good
//! value, already expired, for `recover`).
//!
//! Over a remote store (one whose [`Storage::read_in_flight`] is `true`:
//! Redis, the layered store) step 2 is shared too: concurrent callers of
//! one key share one storage read through a second dedupe table of reads,
//! so 100 identical calls cost one `GET`, not 100. Each caller then goes on
//! as above with the shared answer (a hit is a hit for every caller, a
//! stale value is served to every caller while one refresh runs, a miss
//! leads to one fetch). The shared answer carries the leader's
//! "retired" count read before its read, so the store/remove window check
//! below still holds. The memory store keeps the direct read.
//!
//! Concurrency choices:
//! - The fetch runs inline in the leader's future by default (no task
//!   spawn). If the leader is dropped, a follower takes over with its own
//!   `fetch` (see the `inflight` module). With
//!   [`CacheBuilder::detach_fetches`] the leader instead spawns the fetch
//!   as a task and waits on it like a follower: the fetch then finishes
//!   (and fills the cache) even if every caller went away.
//! - Background refreshes always run as spawned tasks, so `fetch` must be
//!   `Send + 'static`.
//! - Errors are never stored: every waiter on a failed fetch gets the same
//!   error, and the next call fetches again.
//! - The invalidation race: a fetch that started before an invalidation
//!   may carry pre-invalidation data. Every invalidation (and `delete`,
//!   `clear`) starts a new epoch in the dedupe table and is logged there;
//!   new callers never join a flight of an earlier epoch. A leader checks
//!   the invalidations logged since its flight's epoch against its value's
//!   references just before storing, under the read side of an async
//!   `RwLock` (the *gate*) whose write side the invalidation holds while it
//!   logs itself and clears the storage. So a store either lands before the
//!   invalidation clears the storage (and is cleared) or sees it in the log
//!   (and is skipped).
//! - Per-namespace policies: one cache, one storage and one dedupe table
//!   serve every namespace; each [`Namespace`] handle carries its own
//!   [`Policy`]. Prefer one cache with several namespaces to several caches
//!   over one storage: the race check above only covers the fetches of the
//!   cache that is invalidated.
//!
//! The files follow a call: `builder` makes the cache, `lookup` is what a call
//! finds before it fetches (a bypass, the storage read, a fresh or stale hit and
//! its refresh), `leader` is a miss's fetch, recovery, admission and store; this
//! file holds the public API, the followers' wait and invalidation.

mod builder;
mod leader;
mod lookup;

pub use builder::CacheBuilder;
pub(crate) use leader::{run_flight, Answer};

use std::error::Error as StdError;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::RwLock;

use crate::error::{CacheError, StorageError};
use crate::inflight::{Claim, Flight, InFlight, Outcome};
use crate::key::CacheKey;
use crate::namespace::Namespace;
use crate::policy::{Fetched, Policy};
use crate::references::{IntoPatterns, Invalidation, ReferencePattern};
use crate::stats::{Counter, Counters, ReportError, ReportTask, StatsRegistry, StatsSnapshot};
use crate::storage::{Removals, Storage, Stored};

/// Marks a value served in place of a failed fetch, with how long it had
/// been stale (see [`CacheBuilder::mark_served_stale`]).
pub(super) type StaleMarker<V> = Arc<dyn Fn(&V, Duration) -> V + Send + Sync>;

/// An async, deduplicating cache of `V` values.
///
/// `Send + Sync` and cheap to clone: clones share everything. `V` should be
/// cheap to clone too (an `Arc`, or a small value): a hit returns a clone.
pub struct Cache<V> {
    pub(crate) inner: Arc<Inner<V>>,
}

impl<V> Clone for Cache<V> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// A storage read shared by concurrent callers of one key: the leader's
/// retired count read before the read, and what it found.
pub(super) type SharedRead<V> = (u64, Option<Stored<V>>);

pub(crate) struct Inner<V> {
    pub(crate) storage: Arc<dyn Storage<V>>,
    pub(crate) inflight: InFlight<V>,
    /// Whether concurrent reads of one key share one storage read.
    pub(super) shared_reads: bool,
    /// The dedupe table of storage reads (used when `shared_reads`).
    pub(super) reads: InFlight<SharedRead<V>>,
    pub(crate) registry: Arc<StatsRegistry>,
    pub(super) defaults: Policy<V>,
    pub(super) stale_marker: Option<StaleMarker<V>>,
    pub(crate) wait_timeout: Option<Duration>,
    pub(super) detach: bool,
    /// Serialises stores against invalidations (see the module docs).
    pub(super) gate: RwLock<()>,
}

/// What a follower got.
pub(crate) enum Waited<V> {
    Done(Result<V, CacheError>),
    Abandoned,
}

impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// A handle for namespace `name` under the cache's default policy.
    /// Handles of one name share counters; make them once and keep them.
    pub fn namespace(&self, name: &str) -> Namespace<V> {
        self.namespace_with(name, self.inner.defaults.clone())
    }

    /// The default policy (its strategies included), to derive a
    /// namespace's own from: `cache.default_policy().ttl(...)`.
    pub fn default_policy(&self) -> Policy<V> {
        self.inner.defaults.clone()
    }

    /// A handle for namespace `name` under its own policy, exactly as given
    /// (the default policy's strategies do not apply to it unless `policy`
    /// lists them: start from [`default_policy`](Self::default_policy)).
    pub fn namespace_with(&self, name: &str, policy: Policy<V>) -> Namespace<V> {
        let (name, counters) = self.inner.registry.counters(name);
        Namespace::new(name, counters, policy)
    }

    /// The value for `key`: stored, shared with a fetch in flight, or
    /// fetched by `fetch` (at most once for all concurrent callers).
    ///
    /// `fetch` returns the value (or a [`Fetched`] with references and
    /// duration overrides) or an error. It runs at most once per call, and
    /// not at all if the value is stored or another caller's fetch serves
    /// this one.
    pub async fn get_or_fetch<F, Fut, T, E>(
        &self,
        key: CacheKey,
        namespace: &Namespace<V>,
        mut fetch: F,
    ) -> Result<V, CacheError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Into<Fetched<V>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>> + Send + 'static,
    {
        let inner = &*self.inner;
        let counters = namespace.counters();
        let strategies = !namespace.policy().strategies.is_empty();
        if strategies && inner.bypassed(namespace, key, true) {
            counters.incr(Counter::Skips);
            return fetch_directly(namespace, fetch).await;
        }
        let reads_storage = namespace.policy().may_store();
        loop {
            // An expired entry the store still keeps, for `recover`.
            let mut previous = None;
            let seen = if reads_storage {
                let (seen, found) = inner.read(key, namespace).await;
                if let Some(stored) = found {
                    let now = Instant::now();
                    if now < stored.fresh_until {
                        self.fresh_hit(namespace, key, &stored, now, strategies, || fetch);
                        return Ok(stored.value);
                    }
                    if now < stored.stale_until {
                        // Without a runtime there is nowhere to refresh: `fetch` comes
                        // back, and the call goes on like a miss.
                        match self.stale_hit(namespace, key, &stored, strategies, fetch) {
                            Ok(()) => return Ok(stored.value),
                            Err(unused) => fetch = unused,
                        }
                    }
                    previous = strategies.then_some(stored);
                }
                Some(seen)
            } else {
                None
            };
            match inner.inflight.claim(key, seen) {
                Claim::LookAgain => continue,
                Claim::Follow(flight) => {
                    counters.incr(Counter::Dedupes);
                    match self.wait(&flight, counters).await {
                        Waited::Done(result) => return result,
                        // The leader went away: start over with our own fetch.
                        Waited::Abandoned => continue,
                    }
                }
                Claim::Lead(flight) => {
                    counters.incr(Counter::Misses);
                    return self.lead(namespace, key, flight, fetch, previous).await;
                }
            }
        }
    }

    /// Runs `fetch` without the cache (no lookup, no dedupe, no store),
    /// counting a skip: for calls the caller knows must not be cached.
    pub async fn bypass<F, Fut, T, E>(
        &self,
        namespace: &Namespace<V>,
        fetch: F,
    ) -> Result<V, CacheError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: Into<Fetched<V>>,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        namespace.counters().incr(Counter::Skips);
        fetch_directly(namespace, fetch).await
    }

    /// The fresh value stored under `key`, if any; no fetch, no counting.
    pub async fn peek(&self, key: CacheKey) -> Option<V> {
        let stored = self.inner.storage.get(key).await.ok()??;
        (Instant::now() < stored.fresh_until).then_some(stored.value)
    }

    /// The fresh values stored under `keys`, in order, read with one batched
    /// storage call; no fetch, no counting. A failed read gives all `None`.
    pub async fn peek_many(&self, keys: &[CacheKey]) -> Vec<Option<V>> {
        match self.inner.storage.get_many(keys).await {
            Ok(found) => {
                let now = Instant::now();
                found
                    .into_iter()
                    .map(|slot| slot.filter(|s| now < s.fresh_until).map(|s| s.value))
                    .collect()
            }
            Err(_) => keys.iter().map(|_| None).collect(),
        }
    }

    /// Drops every entry carrying a reference that matches `patterns`
    /// (`["User:u1"]`, `"User:*"`), and keeps any fetch in flight from
    /// storing a value that carries one. Returns how many entries it
    /// dropped.
    pub async fn invalidate(&self, patterns: impl IntoPatterns) -> Result<u64, StorageError> {
        let patterns: Arc<[ReferencePattern]> = patterns.into_patterns().into();
        if patterns.is_empty() {
            return Ok(0);
        }
        let inner = &*self.inner;
        let _gate = inner.gate.write().await;
        inner
            .inflight
            .invalidate(Invalidation::Patterns(Arc::clone(&patterns)));
        inner.forget_reads();
        let removals = inner.storage.invalidate(&patterns).await?;
        Ok(inner.count_removals(&removals))
    }

    /// Drops the entry under `key`, and keeps a fetch in flight for it from
    /// storing.
    pub async fn delete(&self, key: CacheKey) -> Result<u64, StorageError> {
        let inner = &*self.inner;
        let _gate = inner.gate.write().await;
        inner.inflight.invalidate(Invalidation::Key(key));
        inner.forget_reads();
        let removals = inner.storage.delete(key).await?;
        Ok(inner.count_removals(&removals))
    }

    /// Drops every entry, and keeps every fetch in flight from storing.
    pub async fn clear(&self) -> Result<u64, StorageError> {
        let inner = &*self.inner;
        let _gate = inner.gate.write().await;
        inner.inflight.invalidate(Invalidation::All);
        inner.forget_reads();
        let removals = inner.storage.clear().await?;
        Ok(inner.count_removals(&removals))
    }

    /// Every namespace's counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.inner.registry.snapshot()
    }

    /// The storage back end's name (`"memory"`, ...).
    pub fn storage_name(&self) -> &'static str {
        self.inner.storage.name()
    }

    /// Calls `sink` every `interval` with the counts of that interval, from
    /// a task on the current tokio runtime (time driver needed). The report
    /// stops when the returned [`ReportTask`] is dropped or the cache is.
    pub fn report_every(
        &self,
        interval: Duration,
        sink: impl Fn(&StatsSnapshot) + Send + Sync + 'static,
    ) -> Result<ReportTask, ReportError> {
        if interval.is_zero() {
            return Err(ReportError::ZeroInterval);
        }
        let runtime = Handle::try_current().map_err(|_| ReportError::NoRuntime)?;
        // The first interval counts from now, not from when the task starts.
        let mut previous = self.inner.registry.snapshot();
        let registry = Arc::downgrade(&self.inner.registry);
        let handle = runtime.spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // An interval's first tick is immediate.
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let Some(registry) = registry.upgrade() else {
                    return;
                };
                let now = registry.snapshot();
                drop(registry);
                sink(&now.since(&previous));
                previous = now;
            }
        });
        Ok(ReportTask { handle })
    }

    /// Logs the table of each interval's counts through `tracing` (target
    /// `cache_core::stats`, level INFO), like mercurius-cache's
    /// `logInterval`.
    pub fn log_every(&self, interval: Duration) -> Result<ReportTask, ReportError> {
        self.report_every(interval, |delta| {
            tracing::info!(target: "cache_core::stats", "cache report\n{}", delta.table());
        })
    }

    pub(crate) async fn wait(&self, flight: &Flight<V>, counters: &Counters) -> Waited<V> {
        let outcome = match self.inner.wait_timeout {
            None => flight.wait().await,
            Some(limit) => match tokio::time::timeout(limit, flight.wait()).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    counters.incr(Counter::Timeouts);
                    return Waited::Done(Err(CacheError::Timeout(limit)));
                }
            },
        };
        match outcome {
            Outcome::Done(Ok(value)) => Waited::Done(Ok(value.clone())),
            Outcome::Done(Err(error)) => Waited::Done(Err(CacheError::Fetch(Arc::clone(error)))),
            Outcome::Abandoned => Waited::Abandoned,
        }
    }

    async fn lead<F, Fut, T, E>(
        &self,
        namespace: &Namespace<V>,
        key: CacheKey,
        flight: Arc<Flight<V>>,
        fetch: F,
        previous: Option<Stored<V>>,
    ) -> Result<V, CacheError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Into<Fetched<V>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>> + Send + 'static,
    {
        if self.inner.detach {
            if let Ok(runtime) = Handle::try_current() {
                flight.add_waiter();
                let task_inner = Arc::clone(&self.inner);
                let task_namespace = namespace.clone();
                let task_flight = Arc::clone(&flight);
                runtime.spawn(async move {
                    let _ = run_flight(
                        &task_inner,
                        &task_namespace,
                        key,
                        &task_flight,
                        fetch,
                        previous,
                    )
                    .await;
                });
                return match self.wait(&flight, namespace.counters()).await {
                    Waited::Done(result) => result,
                    Waited::Abandoned => Err(CacheError::Aborted),
                };
            }
        }
        run_flight(&self.inner, namespace, key, &flight, fetch, previous).await
    }
}

impl<V: Clone + Send + Sync + 'static> Inner<V> {
    fn count_removals(&self, removals: &Removals) -> u64 {
        for (namespace, count) in removals.per_namespace() {
            self.registry.add(namespace, Counter::Invalidations, *count);
        }
        removals.total()
    }
}

async fn fetch_directly<V, F, Fut, T, E>(
    namespace: &Namespace<V>,
    fetch: F,
) -> Result<V, CacheError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    T: Into<Fetched<V>>,
    E: Into<Box<dyn StdError + Send + Sync>>,
{
    match fetch().await {
        Ok(value) => Ok(value.into().value),
        Err(error) => {
            namespace.counters().incr(Counter::Errors);
            Err(CacheError::Fetch(Arc::from(error.into())))
        }
    }
}
