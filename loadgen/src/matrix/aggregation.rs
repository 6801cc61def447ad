//! From measurements to figures: ratios within a round, medians and spreads over
//! rounds, hit ratios, and the warnings a reader must see.

use std::collections::BTreeMap;

use super::confidence;
use super::sampling::ProcessCpu;
use super::summary::{
    AgainstBaseline, ConfigSummary, InstanceFigures, InstanceMedians, Measurement, Medians, Spread,
    Summary,
};
use crate::workload::WorkloadReport;

/// The least share of the gateway's CPU a flamegraph should hold (issue 14).
pub const PROFILE_COVERAGE_GOAL: f64 = 0.9;

/// hits / (hits + misses + dedupes + skips): the share of the cached resolvers' calls
/// answered from the cache (a skipped call, one the cache may not serve, is not); `None`
/// without counters or events.
pub fn hit_ratio(
    hits: Option<f64>,
    misses: Option<f64>,
    dedupes: Option<f64>,
    skips: Option<f64>,
) -> Option<f64> {
    if hits.is_none() && misses.is_none() && dedupes.is_none() {
        return None;
    }
    let all: f64 = [hits, misses, dedupes, skips].iter().flatten().sum();
    (all > 0.0).then(|| hits.unwrap_or(0.0) / all)
}

fn median_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let present: Vec<f64> = values.flatten().collect();
    Spread::of(&present).map(|s| s.median)
}

/// A stale-read figure of each round that has a workload (0 stale reads: no figure).
fn stale<'a>(
    rounds: &'a [Measurement],
    figure: impl Fn(&WorkloadReport) -> f64 + 'a,
) -> impl Iterator<Item = Option<f64>> + 'a {
    rounds.iter().map(move |m| {
        m.workload
            .as_ref()
            .filter(|w| w.stale_reads > 0)
            .map(&figure)
    })
}

/// The median over rounds of one CPU figure, per process name.
fn per_process(
    rounds: &[Measurement],
    figure: impl Fn(&ProcessCpu) -> Option<f64>,
) -> BTreeMap<String, f64> {
    let mut names: Vec<&str> = Vec::new();
    for p in rounds.iter().flat_map(|m| &m.cpu) {
        if !names.contains(&p.name.as_str()) {
            names.push(&p.name);
        }
    }
    names
        .into_iter()
        .filter_map(|name| {
            let values = rounds
                .iter()
                .map(|m| m.cpu.iter().find(|p| p.name == name).and_then(&figure));
            median_of(values).map(|v| (name.to_string(), v))
        })
        .collect()
}

/// Each gateway instance's figures over the rounds, in start order (`gateway-1`, …):
/// medians, and the largest stale age of any round.
fn instance_medians(rounds: &[Measurement]) -> Vec<InstanceMedians> {
    let n = rounds.iter().map(|m| m.instances.len()).max().unwrap_or(0);
    (0..n)
        .map(|i| {
            let of = |figure: &dyn Fn(&InstanceFigures) -> Option<f64>| {
                rounds
                    .iter()
                    .map(|m| m.instances.get(i).and_then(figure))
                    .collect::<Vec<_>>()
            };
            let fresh = |figure: &dyn Fn(&super::summary::InstanceFreshness) -> Option<f64>| {
                of(&|x| x.freshness.as_ref().and_then(figure))
            };
            InstanceMedians {
                name: format!("gateway-{}", i + 1),
                requests: median_of(of(&|x| x.requests).into_iter()),
                cache_hit_ratio: median_of(of(&|x| x.cache_hit_ratio).into_iter()),
                l1_hit_ratio: median_of(of(&|x| x.l1_hit_ratio).into_iter()),
                redis_commands_per_request: median_of(
                    of(&|x| x.redis_commands_per_request).into_iter(),
                ),
                responses: median_of(fresh(&|f| Some(f.responses as f64)).into_iter()),
                reads_checked: median_of(fresh(&|f| Some(f.reads_checked as f64)).into_iter()),
                stale_reads: median_of(fresh(&|f| Some(f.stale_reads as f64)).into_iter()),
                stale_fraction: median_of(fresh(&|f| f.stale_fraction).into_iter()),
                stale_age_p99_ms: median_of(fresh(&|f| f.stale_age_p99_ms).into_iter()),
                stale_age_max_ms: fresh(&|f| f.stale_age_max_ms)
                    .into_iter()
                    .flatten()
                    .reduce(f64::max),
            }
        })
        .collect()
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
        let instances = instance_medians(&rounds);
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
            redis_keys_per_round_trip: median_of(
                rounds.iter().map(|m| m.redis_keys_per_round_trip),
            ),
            redis_server_commands_per_request: median_of(
                rounds.iter().map(|m| m.redis_server_commands_per_request),
            ),
            redis_keys_per_master: rounds
                .iter()
                .rev()
                .find(|m| !m.redis_keys_per_master.is_empty())
                .map(|m| m.redis_keys_per_master.clone())
                .unwrap_or_default(),
            storage_errors: median_of(rounds.iter().map(|m| m.storage_errors)),
            instance_hit_ratios: if instances.len() > 1 {
                instances.iter().map(|x| x.cache_hit_ratio).collect()
            } else {
                Vec::new()
            },
            instances,
            cache_skips: median_of(rounds.iter().map(|m| m.cache_skips)),
            cpu_us_per_request: per_process(&rounds, |p| p.us_per_request),
            cpu_cores: per_process(&rounds, |p| p.cores),
            other_cores: median_of(rounds.iter().map(|m| {
                let ours: f64 = m.cpu.iter().filter_map(|p| p.cores).sum();
                m.machine_busy_cores.map(|busy| (busy - ours).max(0.0))
            })),
            reads_checked: median_of(
                rounds
                    .iter()
                    .map(|m| m.workload.as_ref().map(|w| w.reads_checked as f64)),
            ),
            stale_fraction: median_of(
                rounds
                    .iter()
                    .map(|m| m.workload.as_ref().and_then(|w| w.stale_fraction)),
            ),
            stale_age_p50_ms: median_of(stale(&rounds, |w| w.stale_age_ms.p50)),
            stale_age_p99_ms: median_of(stale(&rounds, |w| w.stale_age_ms.p99)),
            stale_age_max_ms: stale(&rounds, |w| w.stale_age_ms.max)
                .flatten()
                .reduce(f64::max),
            out_of_date_p99_ms: median_of(stale(&rounds, |w| w.out_of_date_ms.p99)),
            out_of_date_max_ms: stale(&rounds, |w| w.out_of_date_ms.max)
                .flatten()
                .reduce(f64::max),
            wrong_answers: rounds
                .iter()
                .filter_map(|m| m.workload.as_ref().map(|w| w.wrong_answers))
                .reduce(|a, b| a + b),
            profile_coverage: median_of(
                rounds
                    .iter()
                    .map(|m| m.profile.as_ref().and_then(|p| p.coverage)),
            ),
            cache: super::cache_figures::CacheFigures::median(&rounds),
        };
        let [gateway_args, user_service_args, post_service_args] = args;
        ConfigSummary {
            name: name.to_string(),
            description,
            peer: None,
            expected_difference: None,
            gateway_args,
            user_service_args,
            post_service_args,
            subgraph_args: Default::default(),
            max_error_rate: None,
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
            flamegraph_diff: None,
            gateways: 1,
            redis: false,
            own_query: false,
            network: String::new(),
            baseline: None,
            against_baseline: None,
        }
    }
}

/// Each configuration against its baseline, paired round by round, with 95% intervals
/// ([`confidence::paired`]); `None` for the baseline itself and with fewer than two
/// paired rounds.
fn against_baseline(config: &ConfigSummary, base: &ConfigSummary) -> Option<AgainstBaseline> {
    if config.name == base.name {
        return None;
    }
    let pairs: Vec<(&Measurement, &Measurement)> = config
        .rounds
        .iter()
        .filter_map(|m| {
            let b = base.rounds.iter().find(|b| b.round == m.round)?;
            Some((m, b))
        })
        .collect();
    if pairs.len() < 2 {
        return None;
    }
    let ratios = |figure: fn(&Measurement) -> Option<f64>| {
        let r: Vec<f64> = pairs
            .iter()
            .filter_map(|(m, b)| Some(figure(m)? / figure(b)?))
            .collect();
        confidence::paired(&r)
    };
    Some(AgainstBaseline {
        baseline: base.name.clone(),
        method: confidence::PAIRED_METHOD.to_string(),
        requests_per_sec: ratios(|m| Some(m.requests_per_sec)),
        p99: ratios(|m| Some(m.p99_ms)),
        gateway_cpu_per_request: ratios(Measurement::gateway_us_per_request),
    })
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

impl Summary {
    /// Set every configuration's intervals against its baseline (its own, or the run's)
    /// from the rounds; also for runs recorded before intervals existed.
    pub fn derive_intervals(&mut self) {
        let found: Vec<Option<AgainstBaseline>> = self
            .configs
            .iter()
            .map(|c| {
                let name = c.baseline.as_deref().unwrap_or(&self.baseline);
                let base = self.configs.iter().find(|b| b.name == name)?;
                against_baseline(c, base)
            })
            .collect();
        for (c, a) in self.configs.iter_mut().zip(found) {
            c.against_baseline = a;
        }
    }

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
            if let Some(wrong) = c.median.wrong_answers.filter(|n| *n > 0) {
                let example = c
                    .rounds
                    .iter()
                    .filter_map(|m| m.workload.as_ref())
                    .flat_map(|w| w.wrong_answer_examples.first())
                    .next()
                    .cloned()
                    .unwrap_or_default();
                match &c.expected_difference {
                    Some(why) => warnings.push(format!(
                        "{}: {wrong} answer(s) could not be right (e.g. {example}), as the configuration \
                         declares ({why}); see \"Answers declared to differ\" and runs/*.json, \
                         workload.wrong_answer_examples",
                        c.name
                    )),
                    None => warnings.insert(
                        0,
                        format!(
                            "**WRONG ANSWERS**: {}: {wrong} answer(s) could not be right (e.g. {example}); \
                             see runs/*.json, workload.wrong_answer_examples",
                            c.name
                        ),
                    ),
                }
            }
            if let Some(coverage) = c
                .median
                .profile_coverage
                .filter(|x| *x < PROFILE_COVERAGE_GOAL)
            {
                warnings.push(format!(
                    "{}: the flamegraph holds {:.0}% of the gateway's CPU time (samples / CPU s × Hz), \
                     under the {:.0}% a whole-process profile should reach",
                    c.name,
                    coverage * 100.0,
                    PROFILE_COVERAGE_GOAL * 100.0
                ));
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::summary::fixtures::measurement;

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
}
