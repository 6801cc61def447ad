//! The extension point: cache strategies, and the hooks they implement.
//!
//! A [`Strategy`] hooks into four moments of a call, each on the task of the
//! caller that reaches it, inline (no spawn, no lock held):
//!
//! | hook | when | on whose task | may it be slow? |
//! |---|---|---|---|
//! | [`bypass`](Strategy::bypass) | before the lookup, every call | the caller's | it delays that caller only |
//! | [`refresh_early`](Strategy::refresh_early) | on a fresh hit | the caller's (the hit is served either way) | it delays that caller only |
//! | [`admit`](Strategy::admit) | after a fetch succeeded, before the store | the leader's, *after* its followers were handed the value | it delays the store only |
//! | [`recover`](Strategy::recover) | after a fetch failed | the leader's, *before* its followers hear | it delays the followers: keep it quick |
//!
//! Each hook gets a [`StrategyContext`]: the call's namespace and key, the
//! time the call looked, and [`StrategyContext::count`] to add the
//! strategy's own decision counts to the generic ones (below).
//!
//! A namespace's strategies are part of its [`Policy`](crate::Policy) and
//! run in the order given: the first `bypass` that says yes wins, the first
//! `refresh_early` that says yes starts the refresh, every `admit` sees the
//! [`Lifetime`] the previous one left (a refusal ends the chain), and the
//! first `recover` that does not [`Fail`](Recovery::Fail) wins. With no
//! strategy the hooks cost nothing.
//!
//! What the cache guarantees around the hooks:
//! - **A hook cannot wedge a key.** A panic in a hook is caught, counted
//!   (`panicked`) and read as the hook's default answer; the leader and its
//!   followers are served. Followers get a fetched value before `admit`
//!   runs, so a slow `admit` holds up nobody but its own store.
//! - **Dedupe holds.** An early refresh is one more flight in the dedupe
//!   table: at most one fetch per key is in flight, refresh included.
//! - **Errors are never stored.** `recover` may serve the previous entry
//!   ([`Recovery::ServeStale`]: handed to every waiter, not stored) or a
//!   value of its own ([`Recovery::Replace`]: stored like a fetched one).
//!
//! Every decision is counted per namespace and strategy
//! ([`StatsSnapshot`](crate::StatsSnapshot)'s `decisions`): `bypassed`,
//! `early_refresh` (a refresh started), `early_refresh_in_flight` (wanted,
//! but one was already in flight), `admitted`, `adjusted` (admitted with
//! another lifetime), `refused`, `recovered`, `panicked`, plus whatever the
//! strategy counts itself.
//!
//! The shipped strategies live in [`crate::strategies`], with the registry
//! that builds them by name.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::FetchError;
use crate::key::CacheKey;
use crate::policy::Fetched;
use crate::stats::Counters;
use crate::storage::Stored;

/// What a hook knows about the call it is asked about.
#[derive(Clone, Copy)]
pub struct StrategyContext<'a> {
    /// The call's namespace.
    pub namespace: &'a str,
    /// The call's key.
    pub key: CacheKey,
    /// When the call looked (a hit's freshness was judged at this instant).
    pub now: Instant,
    counters: &'a Counters,
    strategy: &'a str,
}

impl std::fmt::Debug for StrategyContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StrategyContext")
            .field("namespace", &self.namespace)
            .field("key", &self.key)
            .field("strategy", &self.strategy)
            .finish()
    }
}

impl<'a> StrategyContext<'a> {
    pub(crate) fn new(
        namespace: &'a str,
        key: CacheKey,
        now: Instant,
        counters: &'a Counters,
        strategy: &'a str,
    ) -> Self {
        Self {
            namespace,
            key,
            now,
            counters,
            strategy,
        }
    }

    /// Counts one decision of this strategy in this namespace under `label`
    /// (a short snake_case word: `no_store`, `private`). It shows on the
    /// cache's counters next to the generic ones.
    pub fn count(&self, label: &'static str) {
        self.counters.decide(self.strategy, label);
    }

    /// The strategy's name, as counted.
    pub fn strategy(&self) -> &str {
        self.strategy
    }
}

/// How long a value is kept, as [`Strategy::admit`] sees and may change it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetime {
    /// How long the value is fresh (served as a hit).
    pub ttl: Duration,
    /// How long after that it is served stale while one refresh runs.
    pub stale: Duration,
    /// How long the store keeps it, from now. Never less than `ttl + stale`
    /// (the cache raises it); more keeps an expired value around for
    /// [`Strategy::recover`] to serve.
    pub retain: Duration,
}

impl Lifetime {
    /// `ttl` fresh, then `stale`, kept that long.
    pub fn new(ttl: Duration, stale: Duration) -> Self {
        Self {
            ttl,
            stale,
            retain: ttl.saturating_add(stale),
        }
    }
}

/// What [`Strategy::admit`] decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Store it for the [`Lifetime`] as it now stands.
    Store,
    /// Do not store it (the callers still get the value).
    Refuse,
}

/// What [`Strategy::recover`] makes of a failed fetch.
#[derive(Debug)]
pub enum Recovery<V> {
    /// Let the error through (the default).
    Fail,
    /// Hand every waiter the entry the caller found expired (the `previous`
    /// the hook was given), marked as served stale; store nothing. Without a
    /// previous entry this is [`Fail`](Recovery::Fail).
    ServeStale,
    /// Hand every waiter this value and store it like a fetched one.
    Replace(Fetched<V>),
}

/// A cache strategy. Every hook has a default that changes nothing, so a
/// strategy implements only what it needs. See the module documentation for
/// when each hook runs and what it may cost.
pub trait Strategy<V>: Send + Sync + 'static {
    /// Whether this call should skip the cache: no lookup, no dedupe, no
    /// store. Counted as a skip.
    fn bypass(&self, context: &StrategyContext<'_>) -> bool {
        let _ = context;
        false
    }

    /// On a fresh hit of `entry`: whether to fetch a new value now, before
    /// it expires. The hit is served either way; the refresh runs in the
    /// background, and only if no fetch of the key is already in flight.
    fn refresh_early(&self, context: &StrategyContext<'_>, entry: &Stored<V>) -> bool {
        let _ = (context, entry);
        false
    }

    /// Whether to keep a fetched value, and for how long: change `lifetime`
    /// to keep it for other durations. `lifetime` is what the policy (or the
    /// fetch, or an earlier strategy) chose.
    fn admit(
        &self,
        context: &StrategyContext<'_>,
        fetched: &Fetched<V>,
        lifetime: &mut Lifetime,
    ) -> Admission {
        let _ = (context, fetched, lifetime);
        Admission::Store
    }

    /// After a fetch failed with `error`: what every waiter gets instead.
    /// `previous` is the entry the leader found expired in the store, if
    /// any (a store keeps one past its stale window only when a strategy's
    /// `admit` asked for a longer [`Lifetime::retain`]). The error is still
    /// counted.
    fn recover(
        &self,
        context: &StrategyContext<'_>,
        error: &FetchError,
        previous: Option<&Stored<V>>,
    ) -> Recovery<V> {
        let _ = (context, error, previous);
        Recovery::Fail
    }
}

/// A strategy with the name its decisions are counted under.
pub struct NamedStrategy<V> {
    name: Arc<str>,
    strategy: Arc<dyn Strategy<V>>,
}

impl<V> Clone for NamedStrategy<V> {
    fn clone(&self) -> Self {
        Self {
            name: Arc::clone(&self.name),
            strategy: Arc::clone(&self.strategy),
        }
    }
}

impl<V> std::fmt::Debug for NamedStrategy<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl<V> NamedStrategy<V> {
    /// `strategy`, counted as `name`.
    pub fn new(name: impl Into<Arc<str>>, strategy: impl Strategy<V>) -> Self {
        Self::shared(name, Arc::new(strategy))
    }

    /// A strategy already shared elsewhere, counted as `name`.
    pub fn shared(name: impl Into<Arc<str>>, strategy: Arc<dyn Strategy<V>>) -> Self {
        Self {
            name: name.into(),
            strategy,
        }
    }

    /// `strategy`, named after its type (`SecondHitAdmission`).
    pub fn unnamed<S: Strategy<V>>(strategy: S) -> Self {
        let full = std::any::type_name::<S>();
        let base = full.split('<').next().unwrap_or(full);
        let name = base.rsplit("::").next().unwrap_or(base);
        Self::new(name, strategy)
    }

    /// The name decisions are counted under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The hooks.
    pub fn strategy(&self) -> &Arc<dyn Strategy<V>> {
        &self.strategy
    }

    /// Calls `hook` with this strategy's context; a panic is caught, counted
    /// as `panicked`, logged, and answered with `default`.
    pub(crate) fn call<T>(
        &self,
        namespace: &str,
        key: CacheKey,
        now: Instant,
        counters: &Counters,
        default: impl FnOnce() -> T,
        hook: impl FnOnce(&dyn Strategy<V>, &StrategyContext<'_>) -> T,
    ) -> T {
        let context = StrategyContext::new(namespace, key, now, counters, &self.name);
        match catch_unwind(AssertUnwindSafe(|| hook(&*self.strategy, &context))) {
            Ok(answer) => answer,
            Err(_) => {
                context.count("panicked");
                tracing::warn!(
                    strategy = %self.name,
                    namespace,
                    "a cache strategy's hook panicked; its default answer is used"
                );
                default()
            }
        }
    }
}
