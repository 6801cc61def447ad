//! `stale-if-error`: when a fetch fails, serve the expired entry instead.
//!
//! Reference: RFC 5861, "HTTP Cache-Control Extensions for Stale Content",
//! §4: "when an error is encountered, a cached stale response MAY be used to
//! satisfy the request, regardless of other freshness information", for a
//! window counted from the end of freshness.
//!
//! How: `admit` asks the store to keep every entry `window` past its
//! freshness (if its stale window ends earlier); when a fetch fails (a
//! miss's, or a background refresh's with callers waiting on it), `recover`
//! serves the entry the leader found expired, if it is no more than `window`
//! past its freshness. Every waiter gets it, marked as served stale (the
//! gateway says so in the response's `extensions`), and nothing is stored:
//! the error is not kept, and the old value does not become fresh again, so
//! the next call tries the origin again.
//!
//! **At `ttl = 0`** every value is stored already expired and kept `window`:
//! every call still fetches (concurrent ones share one fetch), nothing is
//! served as a hit, and a failed fetch gets the last good value, up to
//! `window` old: "always fresh, the last good answer during an outage".
//!
//! **Trade-off.** Availability for freshness: during an outage callers get
//! answers up to `window` old instead of errors; the store holds expired
//! entries that long (memory, and room a bounded store could give to live
//! keys). Only keys that were cached before the failure are saved; an entry
//! dropped by invalidation is gone (a write made it wrong).
//!
//! **Cost.** Nothing on a hit; on a failure, one comparison. Decisions:
//! `served_stale`, `too_old` (an entry was there, past the window).

use std::time::Duration;

use super::{LifetimeUse, Param, Params, Registered};
use crate::error::FetchError;
use crate::policy::Fetched;
use crate::storage::Stored;
use crate::strategy::{Admission, Lifetime, Recovery, Strategy, StrategyContext};

/// Serves an expired entry when its refetch fails (see the module
/// documentation).
pub struct StaleIfError {
    window: Duration,
}

impl StaleIfError {
    /// Serves entries up to `window` past their freshness.
    pub fn new(window: Duration) -> Self {
        Self { window }
    }
}

impl Registered for StaleIfError {
    const NAME: &'static str = "stale-if-error";
    const SUMMARY: &'static str =
        "when a fetch fails, serve the expired entry, up to a window past its freshness (RFC 5861), and store nothing";
    const PARAMS: &'static [Param] = &[Param {
        name: "window",
        default: "60s",
        help: "how long past its freshness an entry may be served on error",
    }];
    const LIFETIME: LifetimeUse = LifetimeUse::KeepsExpired;

    fn from_params(params: &Params<'_>) -> Result<Self, String> {
        Ok(Self::new(params.duration("window")?))
    }
}

impl<V> Strategy<V> for StaleIfError {
    fn admit(
        &self,
        _context: &StrategyContext<'_>,
        _fetched: &Fetched<V>,
        lifetime: &mut Lifetime,
    ) -> Admission {
        lifetime.retain = lifetime
            .retain
            .max(lifetime.ttl.saturating_add(self.window));
        Admission::Store
    }

    fn recover(
        &self,
        context: &StrategyContext<'_>,
        _error: &FetchError,
        previous: Option<&Stored<V>>,
    ) -> Recovery<V> {
        let Some(previous) = previous else {
            return Recovery::Fail;
        };
        if context.now.saturating_duration_since(previous.fresh_until) <= self.window {
            context.count("served_stale");
            Recovery::ServeStale
        } else {
            context.count("too_old");
            Recovery::Fail
        }
    }
}
