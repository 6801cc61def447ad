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
    /// The gateway's peak resident set size (VmHWM) at the end of the window. It
    /// includes the profiler's symbolization when profiling is on; see `rss_*_mib`.
    /// Several gateways: the largest instance's.
    pub gateway_peak_rss_bytes: Option<u64>,
    /// Gateway instances loaded round robin (1 unless the configuration says `gateways`).
    #[serde(default = "one")]
    pub gateways: u32,
    /// The gateway's VmRSS before the load, in MiB (several gateways: the largest).
    #[serde(default)]
    pub rss_start_mib: Option<f64>,
    /// The largest VmRSS sampled every ~100 ms over the warm-up and the window, in MiB;
    /// sampling stops when the window ends, before the profile is rendered (but with
    /// profiling on it includes the profiler's memory: see `rss_warmup_peak_mib`).
    #[serde(default)]
    pub rss_peak_mib: Option<f64>,
    /// The VmRSS sampled at the end of the window, in MiB.
    #[serde(default)]
    pub rss_end_mib: Option<f64>,
    /// The largest VmRSS sampled in the warm-up, before the window and its profile start:
    /// the load's memory without the profiler's, in MiB.
    #[serde(default)]
    pub rss_warmup_peak_mib: Option<f64>,
    /// Whether the profiler ran in the window: its memory (taken when sampling starts,
    /// over 100 MiB) then counts in `rss_peak_mib` and `rss_end_mib` of the first gateway.
    #[serde(default)]
    pub rss_includes_profiler: bool,
    /// hits / (hits + misses + dedupes) of the gateway's resolver cache in the window.
    #[serde(default)]
    pub cache_hit_ratio: Option<f64>,
    /// Δ`gateway_redis_commands_total` / Δ`gateway_requests_total`.
    #[serde(default)]
    pub redis_commands_per_request: Option<f64>,
    /// Δ`gateway_redis_round_trips_total` / Δ`gateway_requests_total`.
    #[serde(default)]
    pub redis_round_trips_per_request: Option<f64>,
    /// Commands the redis-server itself counted (INFO `total_commands_processed`) per
    /// client request, the runner's own two INFO commands subtracted.
    #[serde(default)]
    pub redis_server_commands_per_request: Option<f64>,
    /// Δ`gateway_storage_errors_total` + Δ`gateway_cache_storage_errors_total`.
    #[serde(default)]
    pub storage_errors: Option<f64>,
    /// Per gateway instance (in start order; the first is profiled).
    #[serde(default)]
    pub instances: Vec<InstanceFigures>,
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

fn one() -> u32 {
    1
}

/// One gateway instance's figures in one round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceFigures {
    /// `gateway`, `gateway-2`, …
    pub name: String,
    /// Δ`gateway_requests_total` of this instance.
    pub requests: Option<f64>,
    pub cache_hits: Option<f64>,
    pub cache_misses: Option<f64>,
    pub cache_dedupes: Option<f64>,
    /// hits / (hits + misses + dedupes) on this instance: with a shared store, how
    /// often the node found what any node had put there.
    pub cache_hit_ratio: Option<f64>,
    pub cpu_cores: Option<f64>,
    pub rss_start_mib: Option<f64>,
    /// The largest VmRSS sampled in the warm-up, before the profiler starts.
    pub rss_warmup_peak_mib: Option<f64>,
    pub rss_peak_mib: Option<f64>,
    pub rss_end_mib: Option<f64>,
    /// Whether this instance was profiled in the window (its window RSS includes the
    /// profiler's buffers).
    #[serde(default)]
    pub profiled: bool,
    /// VmHWM at the end of the window (profiler included on the first instance).
    pub peak_rss_bytes: Option<u64>,
}

/// hits / (hits + misses + dedupes); `None` without counters or events.
pub fn hit_ratio(hits: Option<f64>, misses: Option<f64>, dedupes: Option<f64>) -> Option<f64> {
    if hits.is_none() && misses.is_none() && dedupes.is_none() {
        return None;
    }
    let (h, m, d) = (
        hits.unwrap_or(0.0),
        misses.unwrap_or(0.0),
        dedupes.unwrap_or(0.0),
    );
    let all = h + m + d;
    (all > 0.0).then(|| h / all)
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
    #[serde(default = "one")]
    pub gateways: u32,
    #[serde(default)]
    pub rss_start_mib: Option<f64>,
    #[serde(default)]
    pub rss_peak_mib: Option<f64>,
    #[serde(default)]
    pub rss_end_mib: Option<f64>,
    #[serde(default)]
    pub rss_warmup_peak_mib: Option<f64>,
    #[serde(default)]
    pub rss_includes_profiler: bool,
    #[serde(default)]
    pub cache_hit_ratio: Option<f64>,
    #[serde(default)]
    pub redis_commands_per_request: Option<f64>,
    #[serde(default)]
    pub redis_round_trips_per_request: Option<f64>,
    #[serde(default)]
    pub redis_server_commands_per_request: Option<f64>,
    #[serde(default)]
    pub storage_errors: Option<f64>,
    /// Per instance (several gateways), the median of its cache hit ratio.
    #[serde(default)]
    pub instance_hit_ratios: Vec<Option<f64>>,
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
    /// Gateway instances of the configuration (`gateways`).
    #[serde(default = "one")]
    pub gateways: u32,
    /// Whether the configuration ran with its own redis-server (`redis = true`).
    #[serde(default)]
    pub redis: bool,
    /// Whether the configuration had its own query instead of the top-level `[query]`.
    #[serde(default)]
    pub own_query: bool,
    /// Its own baseline (ratios are against it), when not the experiment's.
    #[serde(default)]
    pub baseline: Option<String>,
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
            gateways: rounds.iter().map(|m| m.gateways).max().unwrap_or(1),
            rss_start_mib: median_of(rounds.iter().map(|m| m.rss_start_mib)),
            rss_peak_mib: median_of(rounds.iter().map(|m| m.rss_peak_mib)),
            rss_end_mib: median_of(rounds.iter().map(|m| m.rss_end_mib)),
            rss_warmup_peak_mib: median_of(rounds.iter().map(|m| m.rss_warmup_peak_mib)),
            rss_includes_profiler: rounds.iter().any(|m| m.rss_includes_profiler),
            cache_hit_ratio: median_of(rounds.iter().map(|m| m.cache_hit_ratio)),
            redis_commands_per_request: median_of(
                rounds.iter().map(|m| m.redis_commands_per_request),
            ),
            redis_round_trips_per_request: median_of(
                rounds.iter().map(|m| m.redis_round_trips_per_request),
            ),
            redis_server_commands_per_request: median_of(
                rounds.iter().map(|m| m.redis_server_commands_per_request),
            ),
            storage_errors: median_of(rounds.iter().map(|m| m.storage_errors)),
            instance_hit_ratios: {
                let n = rounds.iter().map(|m| m.instances.len()).max().unwrap_or(0);
                if n > 1 {
                    (0..n)
                        .map(|i| {
                            median_of(
                                rounds
                                    .iter()
                                    .map(|m| m.instances.get(i).and_then(|x| x.cache_hit_ratio)),
                            )
                        })
                        .collect()
                } else {
                    Vec::new()
                }
            },
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
            gateways: 1,
            redis: false,
            own_query: false,
            baseline: None,
        }
    }
}

/// Set every measurement's ratio to its baseline measured in the same round:
/// `baseline_of(config)` names it (the experiment's, or the configuration's own).
pub fn set_ratios(measurements: &mut [Measurement], baseline_of: &dyn Fn(&str) -> String) {
    let bases: Vec<(String, u32, f64, f64)> = measurements
        .iter()
        .map(|m| (m.config.clone(), m.round, m.requests_per_sec, m.p99_ms))
        .collect();
    for m in measurements.iter_mut() {
        let baseline = baseline_of(&m.config);
        let base = bases
            .iter()
            .find(|(c, r, _, _)| *c == baseline && *r == m.round);
        if let Some((_, _, rps, p99)) = base {
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
            let storage_errors: f64 = c.rounds.iter().filter_map(|m| m.storage_errors).sum();
            if storage_errors > 0.0 {
                warnings.push(format!(
                    "{}: the cache's storage failed {storage_errors:.0} time(s) in the measured windows \
                     (gateway_*storage_errors_total)",
                    c.name
                ));
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
        // Optional columns appear only when some configuration has the figure.
        let any = |f: &dyn Fn(&Medians) -> bool| self.configs.iter().any(|c| f(&c.median));
        let profiled = any(&|m| m.rss_includes_profiler);
        let show_hit_ratio = any(&|m| m.cache_hit_ratio.is_some());
        let show_per_node = any(&|m| m.instance_hit_ratios.len() > 1);
        let show_redis_commands = any(&|m| m.redis_commands_per_request.is_some());
        let show_redis_trips = any(&|m| m.redis_round_trips_per_request.is_some());
        let show_redis_server = any(&|m| m.redis_server_commands_per_request.is_some());
        let show_storage_errors = any(&|m| m.storage_errors.is_some());
        let mut header = format!(
            "| config | req/s | vs {} | p50 | p99 | upstream/req | gateway CPU | RSS start/peak/end |",
            self.baseline
        );
        let mut rule = String::from("|---|---:|---:|---:|---:|---:|---:|---:|");
        if profiled {
            header.push_str(" RSS warm-up peak (no profiler) |");
            rule.push_str("---:|");
        }
        header.push_str(" VmHWM (incl. profiler) | cache hit/miss/dedupe |");
        rule.push_str("---:|---:|");
        for (shown, title) in [
            (show_hit_ratio, "hit ratio"),
            (show_per_node, "hit ratio per gateway"),
            (show_redis_commands, "redis commands/req"),
            (show_redis_trips, "redis round trips/req"),
            (show_redis_server, "redis-server commands/req"),
            (show_storage_errors, "storage errors"),
        ] {
            if shown {
                header.push_str(&format!(" {title} |"));
                rule.push_str("---:|");
            }
        }
        header.push_str(" errors | flamegraph |");
        rule.push_str("---:|---|");
        let _ = writeln!(out, "{header}");
        let _ = writeln!(out, "{rule}");
        for c in &self.configs {
            let m = &c.median;
            let rps = match c.requests_per_sec {
                Some(s) if self.rounds > 1 => {
                    format!("{:.0} ({:.0}–{:.0})", s.median, s.min, s.max)
                }
                _ => format!("{:.0}", m.requests_per_sec),
            };
            let mut ratio = match c.ratio {
                Some(s) if self.rounds > 1 => {
                    format!("{:.2}x ({:.2}–{:.2})", s.median, s.min, s.max)
                }
                Some(s) => format!("{:.2}x", s.median),
                None => "–".into(),
            };
            if let Some(own) = &c.baseline {
                ratio.push_str(&format!(" vs {own}"));
            }
            let cache = match (m.cache_hits, m.cache_misses, m.cache_dedupes) {
                (None, None, None) => "–".to_string(),
                (h, mi, d) => format!("{}/{}/{}", count(h), count(mi), count(d)),
            };
            let flame = match (&c.flamegraph, &c.flamegraph_note) {
                (Some(f), _) => format!("[svg]({f})"),
                (None, Some(_)) => "none (see notes)".into(),
                (None, None) => "–".into(),
            };
            let several = m.gateways > 1;
            let cpu = m.gateway_cpu_cores.map_or("–".into(), |c| {
                if several {
                    format!("{c:.2} cores (sum of {})", m.gateways)
                } else {
                    format!("{c:.2} cores")
                }
            });
            let rss = match (m.rss_start_mib, m.rss_peak_mib, m.rss_end_mib) {
                (None, None, None) => "–".to_string(),
                (a, b, e) => {
                    let mib = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.1}"));
                    let of = if several {
                        format!(" (max of {})", m.gateways)
                    } else {
                        String::new()
                    };
                    format!("{}/{}/{} MiB{of}", mib(a), mib(b), mib(e))
                }
            };
            let hwm = m.gateway_peak_rss_bytes.map_or("–".into(), |b| {
                format!("{:.1} MiB", b / (1024.0 * 1024.0))
            });
            let mut row = format!(
                "| {} | {rps} | {ratio} | {} | {} | {} | {cpu} | {rss} |",
                c.name,
                ms(m.p50_ms),
                ms(m.p99_ms),
                m.upstream_per_request
                    .map_or("–".into(), |u| format!("{u:.2}")),
            );
            if profiled {
                let warm = m
                    .rss_warmup_peak_mib
                    .map_or("–".into(), |x| format!("{x:.1} MiB"));
                row.push_str(&format!(" {warm} |"));
            }
            row.push_str(&format!(" {hwm} | {cache} |"));
            let percent = |v: Option<f64>| v.map_or("–".into(), |x| format!("{:.1}%", x * 100.0));
            let two = |v: Option<f64>| v.map_or("–".into(), per_request);
            if show_hit_ratio {
                row.push_str(&format!(" {} |", percent(m.cache_hit_ratio)));
            }
            if show_per_node {
                let cell = if m.instance_hit_ratios.len() > 1 {
                    m.instance_hit_ratios
                        .iter()
                        .map(|r| percent(*r))
                        .collect::<Vec<_>>()
                        .join(" / ")
                } else {
                    "–".into()
                };
                row.push_str(&format!(" {cell} |"));
            }
            if show_redis_commands {
                row.push_str(&format!(" {} |", two(m.redis_commands_per_request)));
            }
            if show_redis_trips {
                row.push_str(&format!(" {} |", two(m.redis_round_trips_per_request)));
            }
            if show_redis_server {
                row.push_str(&format!(" {} |", two(m.redis_server_commands_per_request)));
            }
            if show_storage_errors {
                row.push_str(&format!(" {} |", count(m.storage_errors)));
            }
            row.push_str(&format!(" {} | {flame} |", c.errors_total));
            let _ = writeln!(out, "{row}");
        }
        let _ = writeln!(
            out,
            "\nMedians over rounds (min–max in brackets). Ratios are taken within each round against `{}` (or the configuration the cell names). \
             upstream/req: subgraph requests per client request. Cache counters are totals over the measured window. \
             RSS start/peak/end: the gateway's VmRSS before the load, its largest sample (every ~100 ms over warm-up and window) \
             and at the window's end, before the profile is rendered; VmHWM is the kernel's peak at the end, profiler included.{}{}{}",
            self.baseline,
            if profiled {
                " The profiler runs through the window and grows the first gateway by well over 100 MiB as soon as it \
                 starts sampling, so window RSS (peak, end) includes it; the warm-up peak is the load's memory before \
                 the profiler starts. For memory figures over the whole window, set `[profile] enabled = false`."
            } else {
                ""
            },
            if show_hit_ratio {
                " hit ratio: hits / (hits + misses + dedupes)."
            } else {
                ""
            },
            if show_redis_commands || show_redis_trips || show_redis_server {
                " Redis figures are per client request (Δ over the window / Δ`gateway_requests_total`)."
            } else {
                ""
            }
        );
        if any(&|m| m.gateways > 1) {
            let _ = writeln!(
                out,
                "\nSeveral gateways: connections round robin over the instances; counters and CPU are summed over them, \
                 RSS is the largest instance's (the first, profiled one, when profiling is on); \
                 hit ratio per gateway is each instance's own, in start order."
            );
        }
        if !self.warnings.is_empty() {
            let _ = writeln!(out, "\n**Notes**\n");
            for w in &self.warnings {
                let _ = writeln!(out, "- {w}");
            }
        }
        out
    }
}

/// A per-request figure: two decimals, more when it is small but not zero (a layered
/// cache's 0.0026 Redis commands per request must not read as 0.00).
fn per_request(x: f64) -> String {
    if x != 0.0 && x.abs() < 0.01 {
        format!("{x:.4}")
    } else {
        format!("{x:.2}")
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
            gateways: 1,
            rss_start_mib: Some(10.0),
            rss_peak_mib: Some(15.0),
            rss_end_mib: Some(14.0),
            rss_warmup_peak_mib: Some(13.0),
            rss_includes_profiler: false,
            cache_hit_ratio: None,
            redis_commands_per_request: None,
            redis_round_trips_per_request: None,
            redis_server_commands_per_request: None,
            storage_errors: None,
            instances: Vec::new(),
            loadgen_cpu_cores: 0.2,
            loadgen_may_be_bottleneck: false,
            machine_busy_cores: Some(1.5),
            ratio: None,
            p99_ratio: None,
            profile_note: None,
        }
    }

    #[test]
    fn redis_and_multi_gateway_columns_appear_only_with_their_figures() {
        let plain = measurement(1, "memory", 1000.0, 10.0);
        let mut redis = measurement(1, "layered-2", 900.0, 12.0);
        redis.gateways = 2;
        redis.cache_hits = Some(80.0);
        redis.cache_misses = Some(15.0);
        redis.cache_dedupes = Some(5.0);
        redis.cache_hit_ratio = hit_ratio(Some(80.0), Some(15.0), Some(5.0));
        redis.redis_commands_per_request = Some(1.5);
        redis.redis_round_trips_per_request = Some(0.25);
        redis.storage_errors = Some(3.0);
        redis.rss_includes_profiler = true;
        redis.instances = vec![
            InstanceFigures {
                name: "gateway".into(),
                cache_hit_ratio: Some(0.75),
                ..Default::default()
            },
            InstanceFigures {
                name: "gateway-2".into(),
                cache_hit_ratio: Some(0.85),
                ..Default::default()
            },
        ];
        assert_eq!(redis.cache_hit_ratio, Some(0.8));
        assert_eq!(hit_ratio(None, None, None), None);
        assert_eq!(hit_ratio(Some(0.0), Some(0.0), None), None);
        let summary = |ms: Vec<Measurement>| {
            let mut s = Summary {
                schema: SCHEMA.into(),
                run_id: "r".into(),
                experiment: "redis".into(),
                baseline: "memory".into(),
                rounds: 1,
                duration_s: 10.0,
                warmup_s: 2.0,
                quick: false,
                configs: ms
                    .into_iter()
                    .map(|m| {
                        ConfigSummary::from_rounds(
                            &m.config.clone(),
                            None,
                            Default::default(),
                            serde_json::json!({}),
                            vec![m],
                        )
                    })
                    .collect(),
                warnings: vec![],
            };
            s.derive_warnings();
            s
        };
        let without = summary(vec![plain.clone()]).to_markdown("m");
        for absent in [
            "redis commands/req",
            "round trips/req",
            "storage errors",
            "hit ratio",
            "per gateway",
            "warm-up peak",
        ] {
            assert!(!without.contains(absent), "{absent}: {without}");
        }
        assert!(without.contains("| 10.0/15.0/14.0 MiB |"), "{without}");
        let s = summary(vec![plain, redis]);
        let md = s.to_markdown("m");
        assert!(
            md.contains("| hit ratio | hit ratio per gateway | redis commands/req | redis round trips/req | storage errors |"),
            "{md}"
        );
        assert!(
            md.contains("| 80.0% | 75.0% / 85.0% | 1.50 | 0.25 | 3 |"),
            "{md}"
        );
        assert!(md.contains("0.90 cores (sum of 2)"), "{md}");
        assert_eq!(per_request(0.0026), "0.0026");
        assert_eq!(per_request(0.0), "0.00");
        assert_eq!(per_request(1.234), "1.23");
        assert!(
            md.contains("10.0/15.0/14.0 MiB (max of 2) | 13.0 MiB |"),
            "{md}"
        );
        // The baseline has none of these figures: dashes, not zeros.
        assert!(md.contains("| – | – | – | – | – |"), "{md}");
        assert!(
            s.warnings
                .iter()
                .any(|w| w.contains("storage failed 3 time(s)")),
            "{:?}",
            s.warnings
        );
        assert_eq!(
            s.configs[1].median.instance_hit_ratios,
            [Some(0.75), Some(0.85)]
        );
        // Older summaries without the new keys still read.
        let mut old = serde_json::to_value(&s).unwrap();
        for c in old["configs"].as_array_mut().unwrap() {
            for key in ["gateways", "redis", "own_query"] {
                c.as_object_mut().unwrap().remove(key);
            }
            for m in c["rounds"].as_array_mut().unwrap() {
                for key in ["gateways", "instances", "rss_start_mib", "cache_hit_ratio"] {
                    m.as_object_mut().unwrap().remove(key);
                }
            }
        }
        let back: Summary = serde_json::from_value(old).unwrap();
        assert_eq!(back.configs[1].gateways, 1);
        assert_eq!(back.configs[1].rounds[0].gateways, 1);
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
        set_ratios(&mut ms, &|_| "base".to_string());
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
        set_ratios(&mut ms, &|_| "no-cache".to_string());
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
