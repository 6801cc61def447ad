//! Counters per namespace, their snapshot and the periodic report.
//!
//! Each namespace has one set of relaxed atomic counters, shared by every
//! [`Namespace`](crate::Namespace) handle of that name, so counting costs one
//! uncontended-or-not atomic add and no lookup. The registry (name → counters)
//! is only locked to create a namespace, to count an eviction reported by the
//! storage, and to take a snapshot.
//!
//! A [`StatsSnapshot`] is plain data: render it as a table (like
//! mercurius-cache's `logInterval` report) or as Prometheus text, or read
//! its fields. The periodic report ([`Cache::report_every`](crate::Cache::report_every))
//! hands a sink the counts of each interval.
//!
//! The counting (the counters, the registry) and the report task are here; the
//! snapshot and its renderings are `snapshot`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

mod snapshot;

pub use snapshot::{DecisionCount, NamespaceStats, StatsSnapshot};

/// One kind of counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Counter {
    /// A fresh stored value was returned.
    Hits,
    /// No usable stored value: this call started the fetch.
    Misses,
    /// This call joined a fetch already in flight for the same key.
    Dedupes,
    /// A stale value was served while a refresh runs (or was already running).
    Stale,
    /// The cache was bypassed (by the caller or a strategy).
    Skips,
    /// A fetch failed (counted once per fetch, not per waiter).
    Errors,
    /// Entries the storage dropped to respect its size bound.
    Evictions,
    /// Entries the storage dropped because their ttl and stale window ended.
    Expirations,
    /// Entries dropped by `invalidate`, `delete` or `clear`.
    Invalidations,
    /// Background refreshes started: for stale values, and early refreshes
    /// a strategy asked for on a fresh hit.
    Refreshes,
    /// Callers that gave up waiting for an in-flight fetch.
    Timeouts,
    /// Storage reads or writes that failed (treated as misses / not stored).
    StorageErrors,
}

impl Counter {
    /// Every counter, in report order.
    pub const ALL: [Counter; 12] = [
        Counter::Hits,
        Counter::Misses,
        Counter::Dedupes,
        Counter::Stale,
        Counter::Skips,
        Counter::Errors,
        Counter::Evictions,
        Counter::Expirations,
        Counter::Invalidations,
        Counter::Refreshes,
        Counter::Timeouts,
        Counter::StorageErrors,
    ];

    /// A short snake_case name, usable in metric names.
    pub const fn name(self) -> &'static str {
        match self {
            Counter::Hits => "hits",
            Counter::Misses => "misses",
            Counter::Dedupes => "dedupes",
            Counter::Stale => "stale",
            Counter::Skips => "skips",
            Counter::Errors => "errors",
            Counter::Evictions => "evictions",
            Counter::Expirations => "expirations",
            Counter::Invalidations => "invalidations",
            Counter::Refreshes => "refreshes",
            Counter::Timeouts => "timeouts",
            Counter::StorageErrors => "storage_errors",
        }
    }

    /// One line of help text, for Prometheus `# HELP`.
    pub const fn help(self) -> &'static str {
        match self {
            Counter::Hits => "Calls answered by a fresh stored value.",
            Counter::Misses => "Calls that started a fetch.",
            Counter::Dedupes => "Calls that joined a fetch already in flight.",
            Counter::Stale => "Calls answered by a stale value during a refresh.",
            Counter::Skips => "Calls that bypassed the cache.",
            Counter::Errors => "Fetches that failed.",
            Counter::Evictions => "Entries dropped by the size bound.",
            Counter::Expirations => "Entries dropped at the end of their ttl and stale window.",
            Counter::Invalidations => "Entries dropped by invalidate, delete or clear.",
            Counter::Refreshes => {
                "Background refreshes started: for stale values, and early refreshes of fresh ones."
            }
            Counter::Timeouts => "Callers that gave up waiting for an in-flight fetch.",
            Counter::StorageErrors => "Storage reads or writes that failed.",
        }
    }
}

/// The live counters of one namespace.
#[derive(Default)]
pub(crate) struct Counters {
    values: [AtomicU64; Counter::ALL.len()],
    /// Strategies' decisions, by (strategy, label). Few, and only written
    /// under the lock when a pair is new.
    decisions: RwLock<Vec<Decision>>,
}

struct Decision {
    strategy: Arc<str>,
    label: &'static str,
    count: AtomicU64,
}

impl Counters {
    /// Counts one decision `label` of `strategy`.
    pub(crate) fn decide(&self, strategy: &str, label: &'static str) {
        let find = |list: &[Decision]| {
            list.iter()
                .position(|d| d.label == label && &*d.strategy == strategy)
        };
        {
            let list = self.decisions.read();
            if let Some(i) = find(&list) {
                list[i].count.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let mut list = self.decisions.write();
        match find(&list) {
            Some(i) => list[i].count.fetch_add(1, Ordering::Relaxed),
            None => {
                list.push(Decision {
                    strategy: Arc::from(strategy),
                    label,
                    count: AtomicU64::new(1),
                });
                0
            }
        };
    }

    fn decisions(&self) -> Vec<DecisionCount> {
        let mut out: Vec<DecisionCount> = self
            .decisions
            .read()
            .iter()
            .map(|d| DecisionCount {
                strategy: d.strategy.to_string(),
                decision: d.label.to_string(),
                count: d.count.load(Ordering::Relaxed),
            })
            .collect();
        out.sort_by(|a, b| (&a.strategy, &a.decision).cmp(&(&b.strategy, &b.decision)));
        out
    }

    #[inline]
    pub(crate) fn add(&self, counter: Counter, n: u64) {
        self.values[counter as usize].fetch_add(n, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn incr(&self, counter: Counter) {
        self.add(counter, 1);
    }

    fn read(&self, counter: Counter) -> u64 {
        self.values[counter as usize].load(Ordering::Relaxed)
    }
}

/// Name → counters, shared by a cache and the observers it hands its storage.
#[derive(Default)]
pub(crate) struct StatsRegistry {
    namespaces: RwLock<HashMap<Arc<str>, Arc<Counters>>>,
}

impl StatsRegistry {
    /// The counters of `name`, created on first use, with the shared name.
    pub(crate) fn counters(&self, name: &str) -> (Arc<str>, Arc<Counters>) {
        if let Some((name, counters)) = self.namespaces.read().get_key_value(name) {
            return (Arc::clone(name), Arc::clone(counters));
        }
        let mut namespaces = self.namespaces.write();
        if let Some((name, counters)) = namespaces.get_key_value(name) {
            return (Arc::clone(name), Arc::clone(counters));
        }
        let name: Arc<str> = Arc::from(name);
        let counters = Arc::new(Counters::default());
        namespaces.insert(Arc::clone(&name), Arc::clone(&counters));
        (name, counters)
    }

    pub(crate) fn add(&self, name: &str, counter: Counter, n: u64) {
        if n == 0 {
            return;
        }
        let known = self.namespaces.read().get(name).map(Arc::clone);
        let counters = match known {
            Some(counters) => counters,
            None => self.counters(name).1,
        };
        counters.add(counter, n);
    }

    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        let namespaces = self.namespaces.read();
        let mut list: Vec<NamespaceStats> = namespaces
            .iter()
            .map(|(name, counters)| {
                let mut stats = NamespaceStats::named(name);
                for counter in Counter::ALL {
                    stats.set(counter, counters.read(counter));
                }
                stats.decisions = counters.decisions();
                stats
            })
            .collect();
        list.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        StatsSnapshot { namespaces: list }
    }
}

/// A running periodic report; dropping it (or calling
/// [`stop`](Self::stop)) stops the report.
pub struct ReportTask {
    pub(crate) handle: tokio::task::JoinHandle<()>,
}

impl ReportTask {
    /// Stops the report.
    pub fn stop(self) {}
}

impl Drop for ReportTask {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// Why a periodic report could not start.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ReportError {
    /// It was asked for outside a tokio runtime.
    #[error("the periodic report needs a tokio runtime")]
    NoRuntime,
    /// The interval was zero.
    #[error("the report interval must be more than zero")]
    ZeroInterval,
}
