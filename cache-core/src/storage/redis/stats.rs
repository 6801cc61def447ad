//! What the Redis store counts, and its Prometheus text.
//!
//! The store bumps relaxed atomics ([`Counts`]) on its own path; [`RedisStats`] is a
//! copy of them (and of the breaker's state) taken by [`RedisStorage::stats`], summed
//! across stores with [`RedisStats::merge`].
//!
//! [`RedisStorage::stats`]: super::RedisStorage::stats

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::breaker::{Breaker, BreakerState};

/// The counters a store bumps as it goes.
#[derive(Default)]
pub(super) struct Counts {
    pub commands: AtomicU64,
    pub round_trips: AtomicU64,
    pub keys_read: AtomicU64,
    pub errors: AtomicU64,
    pub timeouts: AtomicU64,
    pub rejected: AtomicU64,
    pub queue_refused: AtomicU64,
}

impl Counts {
    /// A copy of the counters, with the breaker's state.
    pub fn snapshot(&self, breaker: &Breaker) -> RedisStats {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RedisStats {
            commands: load(&self.commands),
            round_trips: load(&self.round_trips),
            keys_read: load(&self.keys_read),
            errors: load(&self.errors),
            timeouts: load(&self.timeouts),
            rejected: load(&self.rejected),
            queue_refused: load(&self.queue_refused),
            breaker_open: breaker.state() != BreakerState::Closed,
            breaker_trips: breaker.stats().opened,
        }
    }
}

/// The counters of a [`RedisStorage`](super::RedisStorage), as of one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedisStats {
    /// Redis commands sent (an `MGET` counts 1, a pipeline of k counts k).
    pub commands: u64,
    /// Round trips (a single command, an `MGET` or a pipeline counts 1).
    pub round_trips: u64,
    /// Keys asked for by `get` and `get_many`.
    pub keys_read: u64,
    /// Round trips that failed (error reply, transport error or timeout).
    pub errors: u64,
    /// Of those, the ones that timed out.
    pub timeouts: u64,
    /// Calls refused at once by the open breaker (no network).
    pub rejected: u64,
    /// Auto-pipelined gets refused because the batcher's queue was full (each a miss).
    pub queue_refused: u64,
    /// Whether the breaker is open or half-open now.
    pub breaker_open: bool,
    /// How many times the breaker opened.
    pub breaker_trips: u64,
}

impl RedisStats {
    /// The sum of two stores' counters (open if either is).
    pub fn merge(self, other: &RedisStats) -> RedisStats {
        RedisStats {
            commands: self.commands + other.commands,
            round_trips: self.round_trips + other.round_trips,
            keys_read: self.keys_read + other.keys_read,
            errors: self.errors + other.errors,
            timeouts: self.timeouts + other.timeouts,
            rejected: self.rejected + other.rejected,
            queue_refused: self.queue_refused + other.queue_refused,
            breaker_open: self.breaker_open || other.breaker_open,
            breaker_trips: self.breaker_trips + other.breaker_trips,
        }
    }

    /// Prometheus text exposition, metric names starting with `prefix`
    /// (`graphql_cache_redis` gives `graphql_cache_redis_commands_total`).
    pub fn to_prometheus(&self, prefix: &str) -> String {
        let mut out = String::new();
        let counters = [
            ("commands", "Redis commands sent.", self.commands),
            ("round_trips", "Redis round trips.", self.round_trips),
            ("keys_read", "Keys asked of Redis by gets.", self.keys_read),
            ("errors", "Redis round trips that failed.", self.errors),
            (
                "timeouts",
                "Redis round trips that timed out.",
                self.timeouts,
            ),
            (
                "rejected",
                "Calls refused by the open breaker.",
                self.rejected,
            ),
            (
                "queue_refused",
                "Gets refused because the auto-pipelining queue was full (each a miss).",
                self.queue_refused,
            ),
            (
                "breaker_trips",
                "Times the breaker opened.",
                self.breaker_trips,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP {prefix}_{name}_total {help}");
            let _ = writeln!(out, "# TYPE {prefix}_{name}_total counter");
            let _ = writeln!(out, "{prefix}_{name}_total {value}");
        }
        let _ = writeln!(
            out,
            "# HELP {prefix}_breaker_open Whether the Redis breaker is open."
        );
        let _ = writeln!(out, "# TYPE {prefix}_breaker_open gauge");
        let _ = writeln!(out, "{prefix}_breaker_open {}", u8::from(self.breaker_open));
        out
    }
}
