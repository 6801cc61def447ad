//! A [`StatsSnapshot`]: every namespace's counts at one moment, as plain data, with
//! the difference between two snapshots (an interval's counts), the table the
//! periodic report logs (like mercurius-cache's `logInterval`) and Prometheus text.

use std::fmt::{self, Write as _};

use super::Counter;

/// The counters of one namespace at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct NamespaceStats {
    /// The namespace, e.g. `Query.user`.
    pub namespace: String,
    /// See [`Counter::Hits`].
    pub hits: u64,
    /// See [`Counter::Misses`].
    pub misses: u64,
    /// See [`Counter::Dedupes`].
    pub dedupes: u64,
    /// See [`Counter::Stale`].
    pub stale: u64,
    /// See [`Counter::Skips`].
    pub skips: u64,
    /// See [`Counter::Errors`].
    pub errors: u64,
    /// See [`Counter::Evictions`].
    pub evictions: u64,
    /// See [`Counter::Expirations`].
    pub expirations: u64,
    /// See [`Counter::Invalidations`].
    pub invalidations: u64,
    /// See [`Counter::Refreshes`].
    pub refreshes: u64,
    /// See [`Counter::Timeouts`].
    pub timeouts: u64,
    /// See [`Counter::StorageErrors`].
    pub storage_errors: u64,
    /// The strategies' decisions in this namespace, sorted by strategy and
    /// decision (see [`crate::strategy`]).
    pub decisions: Vec<DecisionCount>,
}

/// How many times one strategy decided one thing in one namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DecisionCount {
    /// The strategy's name (`second-hit`).
    pub strategy: String,
    /// The decision (`refused`, `early_refresh`, `no_store`, ...).
    pub decision: String,
    /// How many times.
    pub count: u64,
}

impl DecisionCount {
    fn same(&self, other: &DecisionCount) -> bool {
        self.strategy == other.strategy && self.decision == other.decision
    }
}

impl NamespaceStats {
    pub(super) fn named(namespace: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            ..Self::default()
        }
    }

    /// The value of one counter.
    pub fn get(&self, counter: Counter) -> u64 {
        match counter {
            Counter::Hits => self.hits,
            Counter::Misses => self.misses,
            Counter::Dedupes => self.dedupes,
            Counter::Stale => self.stale,
            Counter::Skips => self.skips,
            Counter::Errors => self.errors,
            Counter::Evictions => self.evictions,
            Counter::Expirations => self.expirations,
            Counter::Invalidations => self.invalidations,
            Counter::Refreshes => self.refreshes,
            Counter::Timeouts => self.timeouts,
            Counter::StorageErrors => self.storage_errors,
        }
    }

    /// Adds `other`'s counters to these (the namespace name is kept): for a
    /// caller that reports several caches as one.
    pub fn merge(&mut self, other: &NamespaceStats) {
        for counter in Counter::ALL {
            self.set(counter, self.get(counter) + other.get(counter));
        }
        for theirs in &other.decisions {
            match self.decisions.iter_mut().find(|d| d.same(theirs)) {
                Some(mine) => mine.count += theirs.count,
                None => self.decisions.push(theirs.clone()),
            }
        }
        self.decisions
            .sort_by(|a, b| (&a.strategy, &a.decision).cmp(&(&b.strategy, &b.decision)));
    }

    /// How many times `strategy` decided `decision` here (0 if never).
    pub fn decision(&self, strategy: &str, decision: &str) -> u64 {
        self.decisions
            .iter()
            .find(|d| d.strategy == strategy && d.decision == decision)
            .map_or(0, |d| d.count)
    }

    pub(super) fn set(&mut self, counter: Counter, value: u64) {
        let slot = match counter {
            Counter::Hits => &mut self.hits,
            Counter::Misses => &mut self.misses,
            Counter::Dedupes => &mut self.dedupes,
            Counter::Stale => &mut self.stale,
            Counter::Skips => &mut self.skips,
            Counter::Errors => &mut self.errors,
            Counter::Evictions => &mut self.evictions,
            Counter::Expirations => &mut self.expirations,
            Counter::Invalidations => &mut self.invalidations,
            Counter::Refreshes => &mut self.refreshes,
            Counter::Timeouts => &mut self.timeouts,
            Counter::StorageErrors => &mut self.storage_errors,
        };
        *slot = value;
    }

    /// Every counter with its value, in report order.
    pub fn counters(&self) -> impl Iterator<Item = (Counter, u64)> + '_ {
        Counter::ALL.into_iter().map(|c| (c, self.get(c)))
    }

    /// Calls that went through the cache (hits, misses, dedupes, stale).
    pub fn lookups(&self) -> u64 {
        self.hits + self.misses + self.dedupes + self.stale
    }

    /// The share of lookups that did not start a fetch, in `[0, 1]`
    /// (`0` when there were no lookups).
    pub fn hit_ratio(&self) -> f64 {
        let lookups = self.lookups();
        if lookups == 0 {
            0.0
        } else {
            (lookups - self.misses) as f64 / lookups as f64
        }
    }
}

/// Every namespace's counters at one moment, sorted by namespace.
/// Serializes to JSON as `{"namespaces": [{"namespace": ..., "hits": ...}]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatsSnapshot {
    /// One entry per namespace.
    pub namespaces: Vec<NamespaceStats>,
}

impl StatsSnapshot {
    /// The counters of `namespace`, if it was ever used.
    pub fn namespace(&self, namespace: &str) -> Option<&NamespaceStats> {
        self.namespaces.iter().find(|n| n.namespace == namespace)
    }

    /// The sum over every namespace, named `*`.
    pub fn total(&self) -> NamespaceStats {
        let mut total = NamespaceStats::named("*");
        for stats in &self.namespaces {
            total.merge(stats);
        }
        total
    }

    /// Adds `other`'s namespaces to these, summing the counters of a
    /// namespace both have: for a caller that reports several caches as one.
    pub fn merge(&mut self, other: &StatsSnapshot) {
        for theirs in &other.namespaces {
            match self
                .namespaces
                .iter_mut()
                .find(|n| n.namespace == theirs.namespace)
            {
                Some(mine) => mine.merge(theirs),
                None => self.namespaces.push(theirs.clone()),
            }
        }
        self.namespaces
            .sort_by(|a, b| a.namespace.cmp(&b.namespace));
    }

    /// What happened between `earlier` and this snapshot.
    pub fn since(&self, earlier: &StatsSnapshot) -> StatsSnapshot {
        let namespaces = self
            .namespaces
            .iter()
            .map(|now| {
                let before = earlier.namespace(&now.namespace);
                let mut delta = NamespaceStats::named(&now.namespace);
                for counter in Counter::ALL {
                    let base = before.map_or(0, |b| b.get(counter));
                    delta.set(counter, now.get(counter).saturating_sub(base));
                }
                delta.decisions = now
                    .decisions
                    .iter()
                    .map(|d| DecisionCount {
                        count: d.count.saturating_sub(
                            before.map_or(0, |b| b.decision(&d.strategy, &d.decision)),
                        ),
                        ..d.clone()
                    })
                    .collect();
                delta
            })
            .collect();
        StatsSnapshot { namespaces }
    }

    /// A text table, one row per namespace and a total row.
    pub fn table(&self) -> String {
        const COLUMNS: [Counter; 10] = [
            Counter::Hits,
            Counter::Misses,
            Counter::Dedupes,
            Counter::Stale,
            Counter::Skips,
            Counter::Errors,
            Counter::Evictions,
            Counter::Invalidations,
            Counter::Refreshes,
            Counter::Timeouts,
        ];
        let total = self.total();
        let rows: Vec<&NamespaceStats> = self.namespaces.iter().chain(Some(&total)).collect();
        let name_width = rows
            .iter()
            .map(|r| r.namespace.len())
            .chain(Some("namespace".len()))
            .max()
            .unwrap_or(9);
        let widths: Vec<usize> = COLUMNS
            .iter()
            .map(|c| {
                rows.iter()
                    .map(|r| digits(r.get(*c)))
                    .chain(Some(c.name().len()))
                    .max()
                    .unwrap_or(1)
            })
            .collect();
        let mut out = String::new();
        let _ = write!(out, "{:<name_width$}", "namespace");
        for (c, w) in COLUMNS.iter().zip(&widths) {
            let _ = write!(out, "  {:>w$}", c.name());
        }
        let _ = writeln!(out, "  {:>5}", "ratio");
        for row in rows {
            let _ = write!(out, "{:<name_width$}", row.namespace);
            for (c, w) in COLUMNS.iter().zip(&widths) {
                let _ = write!(out, "  {:>w$}", row.get(*c));
            }
            let _ = writeln!(out, "  {:>5.2}", row.hit_ratio());
        }
        out
    }

    /// Prometheus text exposition: one counter family per [`Counter`],
    /// named `{prefix}_{counter}_total`, labelled by `namespace`; and, when
    /// a strategy decided anything, `{prefix}_strategy_decisions_total`
    /// labelled by `namespace`, `strategy` and `decision`.
    pub fn to_prometheus(&self, prefix: &str) -> String {
        let mut out = String::new();
        for counter in Counter::ALL {
            let metric = format!("{prefix}_{}_total", counter.name());
            let _ = writeln!(out, "# HELP {metric} {}", counter.help());
            let _ = writeln!(out, "# TYPE {metric} counter");
            for stats in &self.namespaces {
                let _ = writeln!(
                    out,
                    "{metric}{{namespace=\"{}\"}} {}",
                    escape_label(&stats.namespace),
                    stats.get(counter)
                );
            }
        }
        if self.namespaces.iter().any(|n| !n.decisions.is_empty()) {
            let metric = format!("{prefix}_strategy_decisions_total");
            let _ = writeln!(
                out,
                "# HELP {metric} Decisions of each cache strategy, per namespace."
            );
            let _ = writeln!(out, "# TYPE {metric} counter");
            for stats in &self.namespaces {
                for d in &stats.decisions {
                    let _ = writeln!(
                        out,
                        "{metric}{{namespace=\"{}\",strategy=\"{}\",decision=\"{}\"}} {}",
                        escape_label(&stats.namespace),
                        escape_label(&d.strategy),
                        escape_label(&d.decision),
                        d.count
                    );
                }
            }
        }
        out
    }
}

impl fmt::Display for StatsSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.table())
    }
}

fn digits(mut n: u64) -> usize {
    let mut width = 1;
    while n >= 10 {
        n /= 10;
        width += 1;
    }
    width
}

fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for ch in value.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
    out
}
