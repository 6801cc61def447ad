//! The extension point: cache strategies.
//!
//! A [`Strategy`] hooks into three moments of a call:
//! - [`bypass`](Strategy::bypass), before the lookup: skip the cache for
//!   this call (counted as a skip);
//! - [`admit`](Strategy::admit), after a successful fetch: store the value,
//!   store it for other durations, or refuse to store it;
//! - [`recover`](Strategy::recover), after a failed fetch: turn the error
//!   into a value that every waiter gets and that is stored like any other.
//!
//! Strategies are set on the builder ([`CacheBuilder::strategy`](crate::CacheBuilder::strategy))
//! and consulted in the order they were added: the first `bypass` or
//! `recover` that answers wins; every `admit` sees the durations the
//! previous one chose, and a refusal ends the chain. With no strategy the
//! hooks cost nothing.
//!
//! Hooks run on the caller's task, inline: keep them quick and never block.
//!
//! This module ships [`SecondHitAdmission`], a different admission policy.
//! The crate documentation shows negative caching written as a strategy.

use std::time::Duration;

use crate::error::FetchError;
use crate::key::{CacheKey, PrehashedKeys};
use crate::policy::Fetched;

/// Where a hook is called from.
#[derive(Clone, Copy, Debug)]
pub struct StrategyContext<'a> {
    /// The call's namespace.
    pub namespace: &'a str,
    /// The call's key.
    pub key: CacheKey,
}

/// What [`Strategy::admit`] decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Store with the durations as they are.
    Store,
    /// Store with these durations instead.
    StoreFor {
        /// How long the value is fresh.
        ttl: Duration,
        /// How long it may be served stale after that.
        stale: Duration,
    },
    /// Do not store (the callers still get the value).
    Refuse,
}

/// A cache strategy. Every hook has a default that changes nothing, so a
/// strategy implements only what it needs.
pub trait Strategy<V>: Send + Sync + 'static {
    /// Whether this call should skip the cache: no lookup, no dedupe, no
    /// store. Counted as a skip.
    fn bypass(&self, context: &StrategyContext<'_>) -> bool {
        let _ = context;
        false
    }

    /// Whether and how long to keep a fetched value. `ttl` and `stale` are
    /// what the policy (or the fetch, or an earlier strategy) chose; both
    /// are more than zero together, or the value would not be stored and
    /// this hook is not called.
    fn admit(
        &self,
        context: &StrategyContext<'_>,
        fetched: &Fetched<V>,
        ttl: Duration,
        stale: Duration,
    ) -> Admission {
        let _ = (context, fetched, ttl, stale);
        Admission::Store
    }

    /// Turns a fetch error into a value, or returns `None` to let the error
    /// through. The error is still counted.
    fn recover(&self, context: &StrategyContext<'_>, error: &FetchError) -> Option<Fetched<V>> {
        let _ = (context, error);
        None
    }
}

/// Admission on the second sighting: a key is stored only if it already
/// missed once within `window`, so values asked for once ("one-hit
/// wonders") never take room from values asked for again.
///
/// It remembers up to `capacity` recent first sightings (in a moka cache
/// bounded by entries and expiring after `window`).
///
/// ```
/// use std::time::Duration;
/// use cache_core::{Cache, SecondHitAdmission};
///
/// let cache: Cache<String> = Cache::builder()
///     .ttl(Duration::from_secs(60))
///     .strategy(SecondHitAdmission::new(100_000, Duration::from_secs(300)))
///     .build();
/// # drop(cache);
/// ```
pub struct SecondHitAdmission {
    seen: moka::sync::Cache<CacheKey, (), PrehashedKeys>,
}

impl SecondHitAdmission {
    /// Remembers up to `capacity` first sightings for `window` each.
    pub fn new(capacity: u64, window: Duration) -> Self {
        Self {
            seen: moka::sync::Cache::builder()
                .max_capacity(capacity)
                .time_to_live(window.min(Duration::from_secs(365 * 24 * 3600)))
                .build_with_hasher(PrehashedKeys),
        }
    }
}

impl<V> Strategy<V> for SecondHitAdmission {
    fn admit(
        &self,
        context: &StrategyContext<'_>,
        _fetched: &Fetched<V>,
        _ttl: Duration,
        _stale: Duration,
    ) -> Admission {
        if self.seen.remove(&context.key).is_some() {
            Admission::Store
        } else {
            self.seen.insert(context.key, ());
            Admission::Refuse
        }
    }
}
