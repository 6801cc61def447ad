//! The data model of a matrix run's results: one [`Measurement`] per configuration
//! and round, a [`ConfigSummary`] of its rounds, the [`Summary`] of the run.
//!
//! `summary.json` is [`Summary`] serialised; `loadgen compare` reads it back. The
//! figures are computed in [`super::aggregation`] and rendered in [`super::render`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cache_figures::CacheFigures;
use super::confidence::Interval;
use super::edge_cache::EdgeFigures;
use super::profile::ProfileFigures;
use super::sampling::ProcessCpu;
use crate::bench::recorder::ErrorCounts;
use crate::bench::timeline::{PeakToMean, Second};
use crate::workload::WorkloadReport;

/// Version tag of `summary.json`.
pub const SCHEMA: &str = "loadgen.summary/1";

/// What the load sent for a configuration's query ([`crate::matrix::query::Send`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestSent {
    /// `text`, `apq`, `apq-get` or `document-id`.
    pub sent_as: String,
    pub method: String,
    /// Head and body of one request, as written on the wire.
    pub bytes: Option<u64>,
}

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
    /// Δ`gateway_redis_keys_read_total` / Δ`gateway_redis_round_trips_total`: how many
    /// keys one round trip carried (auto-pipelining's batch size, writes diluting it).
    #[serde(default)]
    pub redis_keys_per_round_trip: Option<f64>,
    /// Commands the redis-server itself counted (INFO `total_commands_processed`) per
    /// client request, the runner's own two INFO commands subtracted.
    #[serde(default)]
    pub redis_server_commands_per_request: Option<f64>,
    /// A Redis Cluster's keys per master (`DBSIZE`, in node order) at the window's end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redis_keys_per_master: Vec<u64>,
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
    /// Δ`gateway_cache_skips_total`: resolver calls that did not use the cache (a
    /// request carrying `authorization` without a policy keying by it, a `skip` rule).
    #[serde(default)]
    pub cache_skips: Option<f64>,
    /// CPU over the window per process: `gateway` (its instances summed),
    /// `user-service`, `post-service` and `loadgen`, in cores and µs per client request.
    #[serde(default)]
    pub cpu: Vec<ProcessCpu>,
    /// With a workload: per operation, and the freshness of every checked read.
    #[serde(default)]
    pub workload: Option<WorkloadReport>,
    /// How the gateway's profile was taken and how much of its CPU it holds.
    #[serde(default)]
    pub profile: Option<ProfileFigures>,
    /// Answers with GraphQL errors, per place of an error (the bench's `error_paths`).
    #[serde(default)]
    pub error_paths: std::collections::BTreeMap<String, u64>,
    /// 2xx answers without errors, per second.
    #[serde(default)]
    pub goodput_per_sec: Option<f64>,
    /// p50 and p99 of those answers alone, in ms (in open loop from the intended send
    /// time): what the requests the gateway admitted and served met.
    #[serde(default)]
    pub ok_p50_ms: Option<f64>,
    #[serde(default)]
    pub ok_p99_ms: Option<f64>,
    /// Open loop: the rate asked for, the rate sent in the window, the requests
    /// scheduled in the window that were never answered, and whether the rate held.
    #[serde(default)]
    pub open_loop: Option<OpenLoopFigures>,
    /// Subgraph requests per second over the window: peak, mean and peak/mean.
    #[serde(default)]
    pub upstream_per_second: Option<PeakToMean>,
    /// Δ`gateway_cache_strategy_decisions_total` by `strategy/decision`, all fields
    /// summed (`stale-if-error/served_stale`, `early-refresh/early_refresh`, ...).
    #[serde(default)]
    pub strategy_decisions: BTreeMap<String, f64>,
    /// Δ`gateway_cache_stale_total`: calls answered from a stale entry.
    #[serde(default)]
    pub stale_served: Option<f64>,
    /// The window second by second: client req/s, errors, p99, subgraph requests.
    #[serde(default)]
    pub timeline: Vec<Second>,
    /// Per place of `error_paths`, the message of the first error seen there.
    #[serde(default)]
    pub error_examples: BTreeMap<String, String>,
    /// What the caches held at the window's end and shared across operations.
    #[serde(default)]
    pub cache: Option<CacheFigures>,
    /// The answer checks that found a difference the configuration declares expected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answer_differences: Vec<String>,
    /// How the load named its document and the bytes of one request as sent (head
    /// and body), when every request was the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<RequestSent>,
    /// What the edge cache in front did in the window (`edge = "varnish"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<EdgeFigures>,
}

impl Measurement {
    /// The gateway's CPU µs per client request in this round (its instances summed).
    pub fn gateway_us_per_request(&self) -> Option<f64> {
        self.cpu
            .iter()
            .find(|p| p.name == "gateway")
            .and_then(|p| p.us_per_request)
    }
}

/// An open-loop round's schedule, as sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenLoopFigures {
    pub target_rate: f64,
    pub sent_rate: f64,
    pub missed: u64,
    pub rate_held: bool,
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
    /// Δ`gateway_redis_commands_total` of this instance / its own requests.
    #[serde(default)]
    pub redis_commands_per_request: Option<f64>,
    /// Layered storage: the calls its in-process L1 answered
    /// (Δ`gateway_cache_layer_hits_total{layer="l1"}`) over the same calls as
    /// `cache_hit_ratio`; the rest of its hits came from Redis.
    #[serde(default)]
    pub l1_hit_ratio: Option<f64>,
    /// With a workload: what loadgen saw of the answers this instance gave (its
    /// connections, i % gateways = this one): responses, reads checked, stale reads.
    #[serde(default)]
    pub freshness: Option<InstanceFreshness>,
}

/// The freshness of the reads one gateway instance answered in one round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceFreshness {
    /// Responses loadgen received from this instance in the window.
    pub responses: u64,
    pub reads_checked: u64,
    pub stale_reads: u64,
    pub stale_fraction: Option<f64>,
    /// Of its stale reads (none: `None`), in ms.
    pub stale_age_p99_ms: Option<f64>,
    pub stale_age_max_ms: Option<f64>,
    pub wrong_answers: u64,
}

/// One gateway instance's figures over rounds (medians; the largest stale age).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceMedians {
    /// `gateway-1`, `gateway-2`, … in start order.
    pub name: String,
    /// Δ`gateway_requests_total` of the instance.
    pub requests: Option<f64>,
    pub cache_hit_ratio: Option<f64>,
    #[serde(default)]
    pub l1_hit_ratio: Option<f64>,
    pub redis_commands_per_request: Option<f64>,
    pub responses: Option<f64>,
    pub reads_checked: Option<f64>,
    pub stale_reads: Option<f64>,
    pub stale_fraction: Option<f64>,
    pub stale_age_p99_ms: Option<f64>,
    pub stale_age_max_ms: Option<f64>,
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
    pub redis_keys_per_round_trip: Option<f64>,
    #[serde(default)]
    pub redis_server_commands_per_request: Option<f64>,
    /// A Redis Cluster's keys per master at the end of the last round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redis_keys_per_master: Vec<u64>,
    #[serde(default)]
    pub storage_errors: Option<f64>,
    /// Per instance (several gateways), the median of its cache hit ratio.
    #[serde(default)]
    pub instance_hit_ratios: Vec<Option<f64>>,
    /// Per instance, in start order: its own figures (the "per gateway" table).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<InstanceMedians>,
    #[serde(default)]
    pub cache_skips: Option<f64>,
    /// Per process (`gateway`, `user-service`, `post-service`, `loadgen`): µs of CPU per
    /// client request, and cores.
    #[serde(default)]
    pub cpu_us_per_request: BTreeMap<String, f64>,
    #[serde(default)]
    pub cpu_cores: BTreeMap<String, f64>,
    /// Busy cores of the machine that the run's own processes do not account for
    /// (other work on the machine, and perf or redis-server when they run): the median
    /// over rounds of the machine's busy cores minus the processes' sum.
    #[serde(default)]
    pub other_cores: Option<f64>,
    /// Workloads: entity reads checked per round, stale reads / reads checked, and the
    /// stale reads' age (median of the rounds' p50 and p99; the largest max).
    #[serde(default)]
    pub reads_checked: Option<f64>,
    #[serde(default)]
    pub stale_fraction: Option<f64>,
    #[serde(default)]
    pub stale_age_p50_ms: Option<f64>,
    #[serde(default)]
    pub stale_age_p99_ms: Option<f64>,
    #[serde(default)]
    pub stale_age_max_ms: Option<f64>,
    /// How long stale answers had been out of date (from the first write they missed).
    #[serde(default)]
    pub out_of_date_p99_ms: Option<f64>,
    #[serde(default)]
    pub out_of_date_max_ms: Option<f64>,
    /// Wrong answers summed over the rounds (must be 0).
    #[serde(default)]
    pub wrong_answers: Option<u64>,
    /// Share of the gateway's CPU time its flamegraph holds (samples / (CPU s × Hz)).
    #[serde(default)]
    pub profile_coverage: Option<f64>,
    /// The caches' entries, bytes and reuse across operations (medians).
    #[serde(default)]
    pub cache: Option<CacheFigures>,
}

/// Everything about one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigSummary {
    pub name: String,
    pub description: Option<String>,
    /// The peer gateway it ran in place of the lab's, with versions and settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<crate::matrix::peers::install::PeerRecord>,
    /// Why its answers are expected to differ (`expected_difference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_difference: Option<String>,
    pub gateway_args: Vec<String>,
    pub user_service_args: Vec<String>,
    pub post_service_args: Vec<String>,
    /// With a graph of the experiment's own: each started subgraph's arguments, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub subgraph_args: BTreeMap<String, Vec<String>>,
    /// The share of answers with errors past which the run stopped (none: no limit).
    #[serde(default)]
    pub max_error_rate: Option<f64>,
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
    /// File name of the differential flamegraph against the baseline, per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flamegraph_diff: Option<String>,
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
    /// The services behind a latency proxy and their RTT (`redis: 2 ms`), empty when
    /// everything was on loopback.
    #[serde(default)]
    pub network: String,
    /// Its own baseline (ratios are against it), when not the experiment's.
    #[serde(default)]
    pub baseline: Option<String>,
    /// Its ratios to the baseline with 95% intervals, paired within rounds (two
    /// rounds or more; none for the baseline itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against_baseline: Option<AgainstBaseline>,
}

/// A configuration over its baseline, round by round, with how sure that is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgainstBaseline {
    /// The baseline's name.
    pub baseline: String,
    /// How the intervals were computed ([`super::confidence::PAIRED_METHOD`]).
    pub method: String,
    pub requests_per_sec: Option<Interval>,
    pub p99: Option<Interval>,
    /// The gateway's CPU µs per client request over the baseline's.
    pub gateway_cpu_per_request: Option<Interval>,
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

#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    /// A one-round summary with a configuration per measurement, warnings derived.
    pub(crate) fn summary(experiment: &str, baseline: &str, ms: Vec<Measurement>) -> Summary {
        let mut s = Summary {
            schema: SCHEMA.into(),
            run_id: "r".into(),
            experiment: experiment.into(),
            baseline: baseline.into(),
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
    }

    /// A run whose configurations have these req/s in rounds 1, 2, …, with p99
    /// 100 000 / req/s ms and the gateway's CPU 1 000 000 / req/s µs per request;
    /// ratios and intervals against the first configuration.
    pub(crate) fn run_of(run_id: &str, configs: &[(&str, &[f64])]) -> Summary {
        let mut ms = Vec::new();
        for (name, rounds) in configs {
            for (i, rps) in rounds.iter().enumerate() {
                let mut m = measurement(i as u32 + 1, name, *rps, 100_000.0 / rps);
                m.cpu = vec![ProcessCpu {
                    name: "gateway".into(),
                    cpu_seconds: Some(10.0),
                    cores: Some(1.0),
                    us_per_request: Some(1_000_000.0 / rps),
                }];
                ms.push(m);
            }
        }
        let baseline = configs[0].0;
        crate::matrix::aggregation::set_ratios(&mut ms, &|_| baseline.to_string());
        let mut s = summary("seed", baseline, Vec::new());
        s.run_id = run_id.into();
        s.rounds = configs.iter().map(|c| c.1.len() as u32).max().unwrap_or(0);
        for (name, _) in configs {
            let own = ms.iter().filter(|m| m.config == *name).cloned().collect();
            s.configs.push(ConfigSummary::from_rounds(
                name,
                None,
                Default::default(),
                serde_json::json!({}),
                own,
            ));
        }
        s.derive_intervals();
        s
    }

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
            error_paths: Default::default(),
            goodput_per_sec: Some(rps),
            ok_p50_ms: Some(p99 / 2.0),
            ok_p99_ms: Some(p99),
            open_loop: None,
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
            redis_keys_per_round_trip: None,
            redis_server_commands_per_request: None,
            redis_keys_per_master: Vec::new(),
            storage_errors: None,
            instances: Vec::new(),
            loadgen_cpu_cores: 0.2,
            loadgen_may_be_bottleneck: false,
            machine_busy_cores: Some(1.5),
            ratio: None,
            p99_ratio: None,
            profile_note: None,
            cache_skips: None,
            cpu: Vec::new(),
            workload: None,
            profile: None,
            upstream_per_second: None,
            strategy_decisions: BTreeMap::new(),
            stale_served: None,
            timeline: Vec::new(),
            error_examples: BTreeMap::new(),
            cache: None,
            answer_differences: Vec::new(),
            request: None,
            edge: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
