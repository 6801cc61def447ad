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

use std::error::Error as StdError;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::RwLock;

use crate::error::{CacheError, FetchError, StorageError};
use crate::inflight::{Claim, Flight, InFlight, LeaderGuard, Outcome};
use crate::key::CacheKey;
use crate::namespace::Namespace;
use crate::policy::{Fetched, Policy};
use crate::references::{IntoPatterns, Invalidation, Reference, ReferencePattern};
use crate::stats::{Counter, Counters, ReportError, ReportTask, StatsRegistry, StatsSnapshot};
use crate::storage::{
    deadline_after, Entry, EvictionCause, MemoryStorage, MemoryStorageBuilder, Removals, Storage,
    Stored,
};
use crate::strategy::{Admission, Lifetime, NamedStrategy, Recovery, Strategy};

/// Marks a value served in place of a failed fetch, with how long it had
/// been stale (see [`CacheBuilder::mark_served_stale`]).
type StaleMarker<V> = Arc<dyn Fn(&V, Duration) -> V + Send + Sync>;

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
type SharedRead<V> = (u64, Option<Stored<V>>);

pub(crate) struct Inner<V> {
    pub(crate) storage: Arc<dyn Storage<V>>,
    pub(crate) inflight: InFlight<V>,
    /// Whether concurrent reads of one key share one storage read.
    shared_reads: bool,
    /// The dedupe table of storage reads (used when `shared_reads`).
    reads: InFlight<SharedRead<V>>,
    pub(crate) registry: Arc<StatsRegistry>,
    defaults: Policy<V>,
    stale_marker: Option<StaleMarker<V>>,
    pub(crate) wait_timeout: Option<Duration>,
    detach: bool,
    /// Serialises stores against invalidations (see the module docs).
    gate: RwLock<()>,
}

enum StorageChoice<V> {
    Memory(MemoryStorageBuilder<V>),
    Given(Arc<dyn Storage<V>>),
}

/// Configures a [`Cache`]. Defaults: `ttl = 0`, `stale = 0`, a memory
/// storage of 10 000 entries, no wait timeout, fetches inline, no strategy.
pub struct CacheBuilder<V> {
    policy: Policy<V>,
    storage: StorageChoice<V>,
    wait_timeout: Option<Duration>,
    detach: bool,
    stale_marker: Option<StaleMarker<V>>,
}

impl<V: Clone + Send + Sync + 'static> CacheBuilder<V> {
    /// The default ttl: how long a value is fresh. `0` keeps nothing.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.policy = self.policy.ttl(ttl);
        self
    }

    /// A default ttl computed from each value.
    pub fn ttl_fn(mut self, f: impl Fn(&V) -> Duration + Send + Sync + 'static) -> Self {
        self.policy = self.policy.ttl_fn(f);
        self
    }

    /// The default stale window: how long after the ttl a value is still
    /// served at once while one refresh runs.
    pub fn stale(mut self, stale: Duration) -> Self {
        self.policy = self.policy.stale(stale);
        self
    }

    /// A default stale window computed from each value.
    pub fn stale_fn(mut self, f: impl Fn(&V) -> Duration + Send + Sync + 'static) -> Self {
        self.policy = self.policy.stale_fn(f);
        self
    }

    /// The whole default policy at once (its strategies included: this
    /// replaces any added with [`strategy`](Self::strategy) before).
    pub fn policy(mut self, policy: Policy<V>) -> Self {
        self.policy = policy;
        self
    }

    /// Use a memory storage bounded to `max` entries. Replaces any storage
    /// given before (the last storage setting wins).
    pub fn max_entries(mut self, max: u64) -> Self {
        self.storage = StorageChoice::Memory(MemoryStorage::builder().max_entries(max));
        self
    }

    /// Use a memory storage bounded to `max` bytes as weighed by `weigher`
    /// (see [`MemoryStorageBuilder::max_bytes`]). Replaces any storage given
    /// before.
    pub fn max_bytes(
        mut self,
        max: u64,
        weigher: impl Fn(&V) -> u32 + Send + Sync + 'static,
    ) -> Self {
        self.storage = StorageChoice::Memory(MemoryStorage::builder().max_bytes(max, weigher));
        self
    }

    /// Use this storage back end. Replaces any bound set before: bound the
    /// back end itself.
    pub fn storage(mut self, storage: impl Storage<V>) -> Self {
        self.storage = StorageChoice::Given(Arc::new(storage));
        self
    }

    /// Use a storage back end already shared elsewhere.
    pub fn shared_storage(mut self, storage: Arc<dyn Storage<V>>) -> Self {
        self.storage = StorageChoice::Given(storage);
        self
    }

    /// Followers give up after waiting this long for a fetch in flight
    /// (they get [`CacheError::Timeout`]; the fetch goes on). Needs a tokio
    /// runtime with its time driver enabled.
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait_timeout = Some(timeout);
        self
    }

    /// Run each fetch in its own task, so that it completes (and fills the
    /// cache) even if every caller is dropped. Off by default: the fetch
    /// runs inline and a follower takes over if its leader goes away.
    pub fn detach_fetches(mut self, detach: bool) -> Self {
        self.detach = detach;
        self
    }

    /// Adds a strategy to the default policy (consulted in the order
    /// added), counted under its type's name.
    pub fn strategy(mut self, strategy: impl Strategy<V>) -> Self {
        self.policy = self.policy.strategy(strategy);
        self
    }

    /// Adds a named strategy to the default policy (consulted in the order
    /// added); its decisions are counted under its name.
    pub fn named_strategy(mut self, strategy: NamedStrategy<V>) -> Self {
        self.policy = self.policy.named_strategy(strategy);
        self
    }

    /// How a value served in place of a failed fetch
    /// ([`Recovery::ServeStale`]) is marked, given how long it had been
    /// stale: a caller that must say so to its own caller (an `extensions`
    /// note, a `Warning` header) marks the value here. Unmarked by default.
    pub fn mark_served_stale(
        mut self,
        mark: impl Fn(&V, Duration) -> V + Send + Sync + 'static,
    ) -> Self {
        self.stale_marker = Some(Arc::new(mark));
        self
    }

    /// The cache.
    pub fn build(self) -> Cache<V> {
        let storage: Arc<dyn Storage<V>> = match self.storage {
            StorageChoice::Memory(builder) => Arc::new(builder.build()),
            StorageChoice::Given(storage) => storage,
        };
        let registry = Arc::new(StatsRegistry::default());
        let observed = Arc::clone(&registry);
        storage.observe_evictions(Arc::new(move |namespace: &str, cause| {
            let counter = match cause {
                EvictionCause::Size => Counter::Evictions,
                EvictionCause::Expired => Counter::Expirations,
            };
            observed.add(namespace, counter, 1);
        }));
        let shared_reads = storage.read_in_flight();
        Cache {
            inner: Arc::new(Inner {
                storage,
                inflight: InFlight::new(),
                shared_reads,
                reads: InFlight::new(),
                registry,
                defaults: self.policy,
                stale_marker: self.stale_marker,
                wait_timeout: self.wait_timeout,
                detach: self.detach,
                gate: RwLock::new(()),
            }),
        }
    }
}

/// What a follower got.
pub(crate) enum Waited<V> {
    Done(Result<V, CacheError>),
    Abandoned,
}

impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// Configures a cache.
    pub fn builder() -> CacheBuilder<V> {
        CacheBuilder {
            policy: Policy::new(),
            storage: StorageChoice::Memory(MemoryStorage::builder()),
            wait_timeout: None,
            detach: false,
            stale_marker: None,
        }
    }

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

/// What the strategies made of a failed fetch.
enum Recovered<V> {
    /// The previous entry, marked: handed out, not stored.
    Stale(V),
    /// A value to store like a fetched one.
    Store(Fetched<V>),
}

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

    /// Reads `key` from the storage, sharing the read with concurrent
    /// callers if the storage asks for it. A failed read is counted and
    /// becomes a miss. Returns the retired count read before the read (see
    /// `InFlight::claim`) and what was found.
    async fn read(&self, key: CacheKey, namespace: &Namespace<V>) -> SharedRead<V> {
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

    async fn read_once(&self, key: CacheKey, namespace: &Namespace<V>) -> Option<Stored<V>> {
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
    fn forget_reads(&self) {
        if self.shared_reads {
            self.reads.invalidate(Invalidation::All);
        }
    }

    fn count_removals(&self, removals: &Removals) -> u64 {
        for (namespace, count) in removals.per_namespace() {
            self.registry.add(namespace, Counter::Invalidations, *count);
        }
        removals.total()
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

/// A leader's fetch, answered: the value or the error, and how long it took.
pub(crate) struct Answer<V> {
    pub(crate) fetched: Result<Fetched<V>, FetchError>,
    pub(crate) fetched_in: Duration,
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
