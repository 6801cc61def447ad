//! The results of a matrix run: one [`Measurement`] per configuration and round, their
//! medians and spreads, ratios to the baseline, and `summary.md`, the table a person
//! reads in ten seconds.
//!
//! `summary.json` is [`Summary`] serialised; `loadgen compare` reads it back.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::report::ms;
use crate::stats::ErrorCounts;

/// Version tag of `summary.json`.
pub const SCHEMA: &str = "loadgen.summary/1";

/// One configuration measured once (one round).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub round: u32,
    pub config: String,
    /// Responses received in the measured window.
    pub requests: u64,
    pub requests_per_sec: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p99_9_ms: f64,
    pub max_ms: f64,
    pub errors: ErrorCounts,
    /// Client requests the gateway counted in the window (`gateway_requests_total`).
    pub gateway_requests: Option<f64>,
    /// Requests the subgraphs received in the window.
    pub upstream_requests: Option<f64>,
    /// Subgraph requests per client request.
    pub upstream_per_request: Option<f64>,
    pub cache_hits: Option<f64>,
    pub cache_misses: Option<f64>,
    pub cache_dedupes: Option<f64>,
    /// The gateway's CPU time over the window / the window, in cores.
    pub gateway_cpu_cores: Option<f64>,
    /// The gateway's peak resident set size (VmHWM) at the end of the window.
    pub gateway_peak_rss_bytes: Option<u64>,
    /// The load generator's own CPU, in cores, and whether it may have been the bottleneck.
    pub loadgen_cpu_cores: f64,
    pub loadgen_may_be_bottleneck: bool,
    /// Busy cores of the whole machine during the window.
    pub machine_busy_cores: Option<f64>,
    /// req/s over the baseline's req/s in the same round.
    pub ratio: Option<f64>,
    /// p99 over the baseline's p99 in the same round.
    pub p99_ratio: Option<f64>,
    /// Why this round has no profile, if it has none.
    pub profile_note: Option<String>,
}

/// Median, minimum and maximum of a figure over rounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// `None` for no values.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }

    /// Whether the two ranges do not overlap: a difference larger than the rounds' spread.
    pub fn separated_from(&self, other: &Spread) -> bool {
        self.max < other.min || other.max < self.min
    }
}

/// Medians of a configuration's figures over its rounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Medians {
    pub requests_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub upstream_per_request: Option<f64>,
    pub gateway_cpu_cores: Option<f64>,
    pub gateway_peak_rss_bytes: Option<f64>,
    pub cache_hits: Option<f64>,
    pub cache_misses: Option<f64>,
    pub cache_dedupes: Option<f64>,
    pub loadgen_cpu_cores: f64,
}

/// Everything about one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigSummary {
    pub name: String,
    pub description: Option<String>,
    pub gateway_args: Vec<String>,
    pub user_service_args: Vec<String>,
    pub post_service_args: Vec<String>,
    /// The load settings (connections, threads, rate, timeout).
    pub load: serde_json::Value,
    pub rounds: Vec<Measurement>,
    pub median: Medians,
    pub requests_per_sec: Option<Spread>,
    pub p99_ms: Option<Spread>,
    /// req/s relative to the baseline, over rounds.
    pub ratio: Option<Spread>,
    /// p99 relative to the baseline, over rounds.
    pub p99_ratio: Option<Spread>,
    /// File name of the flamegraph, when there is one.
    pub flamegraph: Option<String>,
    /// Why there is no flamegraph, or what is odd about it.
    pub flamegraph_note: Option<String>,
    /// Total errors of every class over all rounds.
    pub errors_total: u64,
}

fn median_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let present: Vec<f64> = values.flatten().collect();
    Spread::of(&present).map(|s| s.median)
}

impl ConfigSummary {
    /// Summarise the rounds of one configuration (ratios must already be set).
    pub fn from_rounds(
        name: &str,
        description: Option<String>,
        args: [Vec<String>; 3],
        load: serde_json::Value,
        rounds: Vec<Measurement>,
    ) -> ConfigSummary {
        let rps: Vec<f64> = rounds.iter().map(|m| m.requests_per_sec).collect();
        let p99: Vec<f64> = rounds.iter().map(|m| m.p99_ms).collect();
        let ratios: Vec<f64> = rounds.iter().filter_map(|m| m.ratio).collect();
        let p99_ratios: Vec<f64> = rounds.iter().filter_map(|m| m.p99_ratio).collect();
        let median = Medians {
            requests_per_sec: median_of(rounds.iter().map(|m| Some(m.requests_per_sec)))
                .unwrap_or(0.0),
            p50_ms: median_of(rounds.iter().map(|m| Some(m.p50_ms))).unwrap_or(0.0),
            p99_ms: median_of(rounds.iter().map(|m| Some(m.p99_ms))).unwrap_or(0.0),
            upstream_per_request: median_of(rounds.iter().map(|m| m.upstream_per_request)),
            gateway_cpu_cores: median_of(rounds.iter().map(|m| m.gateway_cpu_cores)),
            gateway_peak_rss_bytes: median_of(
                rounds
                    .iter()
                    .map(|m| m.gateway_peak_rss_bytes.map(|b| b as f64)),
            ),
            cache_hits: median_of(rounds.iter().map(|m| m.cache_hits)),
            cache_misses: median_of(rounds.iter().map(|m| m.cache_misses)),
            cache_dedupes: median_of(rounds.iter().map(|m| m.cache_dedupes)),
            loadgen_cpu_cores: median_of(rounds.iter().map(|m| Some(m.loadgen_cpu_cores)))
                .unwrap_or(0.0),
        };
        let [gateway_args, user_service_args, post_service_args] = args;
        ConfigSummary {
            name: name.to_string(),
            description,
            gateway_args,
            user_service_args,
            post_service_args,
            load,
            errors_total: rounds.iter().map(|m| m.errors.total()).sum(),
            median,
            requests_per_sec: Spread::of(&rps),
            p99_ms: Spread::of(&p99),
            ratio: Spread::of(&ratios),
            p99_ratio: Spread::of(&p99_ratios),
            rounds,
            flamegraph: None,
            flamegraph_note: None,
        }
    }
}

/// Set every measurement's ratio to the baseline measured in the same round.
pub fn set_ratios(measurements: &mut [Measurement], baseline: &str) {
    let bases: Vec<(u32, f64, f64)> = measurements
        .iter()
        .filter(|m| m.config == baseline)
        .map(|m| (m.round, m.requests_per_sec, m.p99_ms))
        .collect();
    for m in measurements.iter_mut() {
        if let Some((_, rps, p99)) = bases.iter().find(|(r, _, _)| *r == m.round) {
            m.ratio = (*rps > 0.0).then(|| m.requests_per_sec / rps);
            m.p99_ratio = (*p99 > 0.0).then(|| m.p99_ms / p99);
        }
    }
}

/// A whole matrix run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub schema: String,
    pub run_id: String,
    pub experiment: String,
    pub baseline: String,
    pub rounds: u32,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub quick: bool,
    pub configs: Vec<ConfigSummary>,
    /// Things a reader must know: loadgen saturation, errors, missing flamegraphs.
    pub warnings: Vec<String>,
}

impl Summary {
    /// Collect the warnings that follow from the measurements.
    pub fn derive_warnings(&mut self) {
        let mut warnings = Vec::new();
        for c in &self.configs {
            let saturated = c
                .rounds
                .iter()
                .filter(|m| m.loadgen_may_be_bottleneck)
                .count();
            if saturated > 0 {
                warnings.push(format!(
                    "{}: loadgen may have been the bottleneck in {saturated} of {} round(s)",
                    c.name,
                    c.rounds.len()
                ));
            }
            if c.errors_total > 0 {
                warnings.push(format!(
                    "{}: {} request(s) failed (see the rounds' errors)",
                    c.name, c.errors_total
                ));
            }
            if let Some(note) = &c.flamegraph_note {
                warnings.push(format!("{}: {note}", c.name));
            }
        }
        self.warnings = warnings;
    }

    /// The human-readable table, as Markdown.
    pub fn to_markdown(&self, machine: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# {} — run {}\n", self.experiment, self.run_id);
        let _ = writeln!(
            out,
            "{} round(s), {:.0} s measured after {:.0} s warm-up per configuration, rounds interleaved{}. {machine}\n",
            self.rounds,
            self.duration_s,
            self.warmup_s,
            if self.quick { " (--quick: indicative only)" } else { "" }
        );
        let _ = writeln!(
            out,
            "| config | req/s | vs {} | p50 | p99 | upstream/req | gateway CPU | peak RSS | cache hit/miss/dedupe | errors | flamegraph |",
            self.baseline
        );
        let _ = writeln!(
            out,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        );
        for c in &self.configs {
            let m = &c.median;
            let rps = match c.requests_per_sec {
                Some(s) if self.rounds > 1 => {
                    format!("{:.0} ({:.0}–{:.0})", s.median, s.min, s.max)
                }
                _ => format!("{:.0}", m.requests_per_sec),
            };
            let ratio = match c.ratio {
                Some(s) if self.rounds > 1 => {
                    format!("{:.2}x ({:.2}–{:.2})", s.median, s.min, s.max)
                }
                Some(s) => format!("{:.2}x", s.median),
                None => "–".into(),
            };
            let cache = match (m.cache_hits, m.cache_misses, m.cache_dedupes) {
                (None, None, None) => "–".to_string(),
                (h, mi, d) => format!("{}/{}/{}", count(h), count(mi), count(d)),
            };
            let flame = match (&c.flamegraph, &c.flamegraph_note) {
                (Some(f), _) => format!("[svg]({f})"),
                (None, Some(_)) => "none (see notes)".into(),
                (None, None) => "–".into(),
            };
            let _ = writeln!(
                out,
                "| {} | {rps} | {ratio} | {} | {} | {} | {} | {} | {cache} | {} | {flame} |",
                c.name,
                ms(m.p50_ms),
                ms(m.p99_ms),
                m.upstream_per_request
                    .map_or("–".into(), |u| format!("{u:.2}")),
                m.gateway_cpu_cores
                    .map_or("–".into(), |c| format!("{c:.2} cores")),
                m.gateway_peak_rss_bytes.map_or("–".into(), |b| format!(
                    "{:.1} MiB",
                    b / (1024.0 * 1024.0)
                )),
                c.errors_total,
            );
        }
        let _ = writeln!(
            out,
            "\nMedians over rounds (min–max in brackets). Ratios are taken within each round against `{}`. \
             upstream/req: subgraph requests per client request. Cache counters are totals over the measured window.",
            self.baseline
        );
        if !self.warnings.is_empty() {
            let _ = writeln!(out, "\n**Notes**\n");
            for w in &self.warnings {
                let _ = writeln!(out, "- {w}");
            }
        }
        out
    }
}

fn count(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{x:.0}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn measurement(round: u32, config: &str, rps: f64, p99: f64) -> Measurement {
        Measurement {
            round,
            config: config.into(),
            requests: (rps * 10.0) as u64,
            requests_per_sec: rps,
            p50_ms: p99 / 2.0,
            p90_ms: p99 * 0.8,
            p99_ms: p99,
            p99_9_ms: p99 * 1.1,
            max_ms: p99 * 1.2,
            errors: ErrorCounts::default(),
            gateway_requests: Some(rps * 10.0),
            upstream_requests: Some(rps * 40.0),
            upstream_per_request: Some(4.0),
            cache_hits: None,
            cache_misses: None,
            cache_dedupes: None,
            gateway_cpu_cores: Some(0.9),
            gateway_peak_rss_bytes: Some(20 << 20),
            loadgen_cpu_cores: 0.2,
            loadgen_may_be_bottleneck: false,
            machine_busy_cores: Some(1.5),
            ratio: None,
            p99_ratio: None,
            profile_note: None,
        }
    }

    #[test]
    fn spread_takes_median_min_max() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(Spread::of(&[1.0, 4.0]).unwrap().median, 2.5);
        assert!(Spread::of(&[]).is_none());
        assert!(Spread {
            median: 2.0,
            min: 1.0,
            max: 3.0
        }
        .separated_from(&Spread {
            median: 5.0,
            min: 4.0,
            max: 6.0
        }));
        assert!(!Spread {
            median: 2.0,
            min: 1.0,
            max: 4.5
        }
        .separated_from(&Spread {
            median: 5.0,
            min: 4.0,
            max: 6.0
        }));
    }

    #[test]
    fn ratios_are_taken_within_each_round() {
        let mut ms = vec![
            measurement(1, "base", 1000.0, 100.0),
            measurement(1, "fast", 4000.0, 25.0),
            measurement(2, "base", 500.0, 200.0),
            measurement(2, "fast", 2500.0, 40.0),
        ];
        set_ratios(&mut ms, "base");
        assert_eq!(ms[0].ratio, Some(1.0));
        assert_eq!(ms[1].ratio, Some(4.0));
        assert_eq!(ms[3].ratio, Some(5.0));
        assert_eq!(ms[3].p99_ratio, Some(0.2));
        let fast: Vec<Measurement> = ms.iter().filter(|m| m.config == "fast").cloned().collect();
        let c = ConfigSummary::from_rounds(
            "fast",
            None,
            Default::default(),
            serde_json::json!({}),
            fast,
        );
        let r = c.ratio.unwrap();
        assert_eq!((r.median, r.min, r.max), (4.5, 4.0, 5.0));
        assert_eq!(c.median.requests_per_sec, 3250.0);
        assert_eq!(c.median.upstream_per_request, Some(4.0));
        assert_eq!(c.median.cache_hits, None);
    }

    #[test]
    fn markdown_has_a_row_per_config_and_the_notes() {
        let mut ms = vec![
            measurement(1, "no-cache", 1000.0, 250.0),
            measurement(1, "ttl-0", 4600.0, 46.0),
        ];
        set_ratios(&mut ms, "no-cache");
        let configs: Vec<ConfigSummary> = ms
            .iter()
            .map(|m| {
                ConfigSummary::from_rounds(
                    &m.config,
                    None,
                    Default::default(),
                    serde_json::json!({}),
                    vec![m.clone()],
                )
            })
            .collect();
        let mut s = Summary {
            schema: SCHEMA.into(),
            run_id: "r".into(),
            experiment: "seed".into(),
            baseline: "no-cache".into(),
            rounds: 1,
            duration_s: 10.0,
            warmup_s: 2.0,
            quick: false,
            configs,
            warnings: vec![],
        };
        s.configs[1].flamegraph_note =
            Some("no flamegraph (gateway built without profiling?)".into());
        s.derive_warnings();
        let md = s.to_markdown("2 cores");
        assert!(md.contains("| no-cache | 1000 | 1.00x |"), "{md}");
        assert!(md.contains("| ttl-0 | 4600 | 4.60x |"), "{md}");
        assert!(
            md.contains("ttl-0: no flamegraph (gateway built without profiling?)"),
            "{md}"
        );
    }
}
