//! What one window saw, turned into the round's [`Measurement`] and [`RunRecord`]:
//! requests, latency and CPU per request per process, the cache's and the
//! subgraphs' counters, memory, freshness, and the profile (perf's stacks
//! symbolized, or the endpoint's) with its coverage of the gateway's CPU.

use crate::bench::timeline::PeakToMean;
use crate::matrix::aggregation::hit_ratio;
use crate::matrix::cache_figures::CacheFigures;
use crate::matrix::edge_cache::{EdgeFigures, EDGE_NAME};
use crate::matrix::experiment::ConfigSpec;
use crate::matrix::network;
use crate::matrix::profile::flamegraph::sample_count;
use crate::matrix::profile::{ProfileFigures, ProfileOutcome};
use crate::matrix::record::{QueryRecord, RedisRecord, RunRecord, ServiceRecord};
use crate::matrix::sampling::{summed, ProcessCpu};
use crate::matrix::scraping::WindowMetrics;
use crate::matrix::settings::GATEWAY;
use crate::matrix::summary::{InstanceFigures, InstanceFreshness, Measurement, RequestSent};

use super::window::Window;
use super::{Profiler, RoundOutput, RunContext};

/// The profile of the window, symbolized (perf) or as the endpoint gave it, with its
/// coverage of the profiled gateway's CPU.
pub(super) fn profile_of(
    ctx: &RunContext<'_>,
    w: &mut Window,
) -> (ProfileOutcome, Option<ProfileFigures>) {
    let perf_data = std::mem::replace(&mut w.perf, Ok(None));
    let endpoint_outcome = w.endpoint.take();
    let profile_note = w.profile_note.take();
    let cpu_all = &w.cpu_all;
    let first_gateway_cpu = cpu_all
        .iter()
        .find(|p| p.name == GATEWAY)
        .and_then(|p| p.cpu_seconds);
    let hz = ctx.experiment.profile.hz;
    match (&ctx.profiler, perf_data, endpoint_outcome) {
        (Profiler::Perf(_), Ok(Some(data)), _) => {
            let cpu_seconds = data.cpu_seconds;
            match data.collapse() {
                Ok(stacks) if !stacks.trim().is_empty() => {
                    let figures =
                        ProfileFigures::new("perf", hz, sample_count(&stacks), cpu_seconds);
                    (ProfileOutcome::Stacks(stacks), Some(figures))
                }
                Ok(_) => (
                    ProfileOutcome::Unavailable("no flamegraph: perf took no samples".into()),
                    None,
                ),
                Err(e) => (
                    ProfileOutcome::Unavailable(format!("no flamegraph: {e:#}")),
                    None,
                ),
            }
        }
        (Profiler::Perf(_), Err(e), _) => (
            ProfileOutcome::Unavailable(format!("no flamegraph: {e:#}")),
            None,
        ),
        (_, _, Some(outcome)) => {
            let figures = match &outcome {
                ProfileOutcome::Stacks(s) => Some(ProfileFigures::new(
                    "endpoint",
                    hz,
                    sample_count(s),
                    first_gateway_cpu,
                )),
                ProfileOutcome::Unavailable(_) => None,
            };
            (outcome, figures)
        }
        (Profiler::Off(why), _, _) => (ProfileOutcome::Unavailable(why.clone()), None),
        _ => (
            ProfileOutcome::Unavailable(profile_note.unwrap_or_else(|| "no flamegraph".into())),
            None,
        ),
    }
}

/// Turn a window's observations into the round's [`Measurement`] and [`RunRecord`].
#[allow(clippy::too_many_arguments)]
pub(super) fn round_output(
    ctx: &RunContext<'_>,
    config: &ConfigSpec,
    round: u32,
    window: Window,
    services: Vec<ServiceRecord>,
    redis_url: Option<String>,
    profile: ProfileOutcome,
    figures: Option<ProfileFigures>,
) -> anyhow::Result<RoundOutput> {
    let Window {
        report,
        gateway_names,
        subgraph_names,
        counted_subgraphs,
        cpu_all,
        window_started,
        window_wall,
        rss_start,
        rss_tracks,
        peak_rss,
        before,
        after,
        redis_before,
        redis_after,
        redis_processes,
        keys_per_master,
        edge_before,
        edge_after,
        ..
    } = window;
    let client_requests = Some(report.requests as f64).filter(|n| *n > 0.0);
    let (before, after) = (before?, after?);
    let metrics = WindowMetrics::between(&before, &after, gateway_names.clone(), counted_subgraphs);
    let gateway_requests = metrics.gateway_sum("gateway_requests_total");
    let upstream_requests = metrics.upstream_requests();
    let counted_requests = gateway_requests.or(client_requests).filter(|n| *n > 0.0);
    let per_request = |count: Option<f64>| match (count, counted_requests) {
        (Some(c), Some(n)) => Some(c / n),
        _ => None,
    };
    // Per process, with the gateway's instances summed into one figure.
    let mut cpu_figures: Vec<ProcessCpu> = Vec::new();
    cpu_figures.extend(summed(&cpu_all, GATEWAY, client_requests, window_wall));
    for name in subgraph_names
        .iter()
        .map(String::as_str)
        .chain([EDGE_NAME, "loadgen"])
    {
        cpu_figures.extend(cpu_all.iter().find(|p| p.name == name).cloned());
    }
    cpu_figures.extend(summed(
        &cpu_all,
        network::PROXY_PREFIX,
        client_requests,
        window_wall,
    ));
    let gateway_cpu_cores = cpu_figures
        .iter()
        .find(|p| p.name == GATEWAY)
        .and_then(|g| g.cores);
    // The resolver cache's counters; a gateway with only a request-level strategy
    // (`--request-strategy coalesce | response`) reports that strategy's instead.
    let counter = |what: &str| {
        metrics
            .gateway_sum(&format!("gateway_cache_{what}_total"))
            .or_else(|| metrics.gateway_sum(&format!("gateway_request_cache_{what}_total")))
    };
    let (cache_hits, cache_misses, cache_dedupes, cache_skips) = (
        counter("hits"),
        counter("misses"),
        counter("dedupes"),
        counter("skips"),
    );
    let storage_errors = match (
        metrics.gateway_sum("gateway_storage_errors_total"),
        metrics.gateway_sum("gateway_cache_storage_errors_total"),
    ) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    };
    // Between the two INFO answers the server ran the first INFO and the gateways'
    // commands (whether INFO counts itself or not, exactly one INFO falls in between);
    // on a cluster, so did every node.
    let redis_server_commands = match (&redis_before, &redis_after) {
        (Some(Ok(b)), Some(Ok(a))) => {
            Some(a.saturating_sub(*b).saturating_sub(redis_processes as u64) as f64)
        }
        _ => None,
    };
    // An edge whose counters cannot be read stops the round: its hits are the point.
    let edge = match (edge_before, edge_after) {
        (Some(before), Some(after)) => Some(EdgeFigures::between(&before?, &after?)),
        _ => None,
    };
    let profiled_in_window = !matches!(ctx.profiler, Profiler::Off(_));
    let instance_figures: Vec<InstanceFigures> = gateway_names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let sum = |metric: &str| metrics.of(name, metric);
            let counter = |what: &str| {
                sum(&format!("gateway_cache_{what}_total"))
                    .or_else(|| sum(&format!("gateway_request_cache_{what}_total")))
            };
            let (hits, misses, dedupes, skips) = (
                counter("hits"),
                counter("misses"),
                counter("dedupes"),
                counter("skips"),
            );
            let requests = sum("gateway_requests_total");
            // Layered storage: the hits its in-process L1 gave, over all cached calls.
            let l1_hits =
                metrics.of_labelled(name, "gateway_cache_layer_hits_total", "layer", "l1");
            let calls: f64 = [hits, misses, dedupes, skips].iter().flatten().sum();
            let freshness = report
                .workload
                .as_ref()
                .and_then(|w| w.per_url.get(i))
                .map(|u| &u.report)
                .map(|u| InstanceFreshness {
                    responses: u.requests(),
                    reads_checked: u.reads_checked,
                    stale_reads: u.stale_reads,
                    stale_fraction: u.stale_fraction,
                    stale_age_p99_ms: (u.stale_reads > 0).then_some(u.stale_age_ms.p99),
                    stale_age_max_ms: (u.stale_reads > 0).then_some(u.stale_age_ms.max),
                    wrong_answers: u.wrong_answers,
                });
            InstanceFigures {
                name: name.clone(),
                requests,
                cache_hits: hits,
                cache_misses: misses,
                cache_dedupes: dedupes,
                cache_hit_ratio: hit_ratio(hits, misses, dedupes, skips),
                cpu_cores: cpu_all
                    .iter()
                    .find(|p| p.name == *name)
                    .and_then(|p| p.cores),
                rss_start_mib: mib(rss_start[i]),
                rss_warmup_peak_mib: mib(rss_tracks[i].peak_before(window_started)),
                rss_peak_mib: mib(rss_tracks[i].peak()),
                rss_end_mib: mib(rss_tracks[i].last()),
                profiled: i == 0 && profiled_in_window,
                peak_rss_bytes: peak_rss[i],
                redis_commands_per_request: match (sum("gateway_redis_commands_total"), requests) {
                    (Some(c), Some(n)) if n > 0.0 => Some(c / n),
                    _ => None,
                },
                l1_hit_ratio: l1_hits.filter(|_| calls > 0.0).map(|l1| l1 / calls),
                freshness,
            }
        })
        .collect();
    let gateway_peak_rss_bytes = peak_rss.iter().flatten().copied().max();
    let profile_note = match &profile {
        ProfileOutcome::Stacks(_) => None,
        ProfileOutcome::Unavailable(note) => Some(note.clone()),
    };
    let measurement = Measurement {
        round,
        config: config.name.clone(),
        requests: report.requests,
        requests_per_sec: report.requests_per_sec,
        p50_ms: report.latency_ms.p50,
        p90_ms: report.latency_ms.p90,
        p99_ms: report.latency_ms.p99,
        p99_9_ms: report.latency_ms.p99_9,
        max_ms: report.latency_ms.max,
        errors: report.errors,
        error_paths: report.error_paths.clone(),
        goodput_per_sec: Some(report.goodput_per_sec),
        ok_p50_ms: Some(report.ok_latency_ms.p50),
        ok_p99_ms: Some(report.ok_latency_ms.p99),
        open_loop: report
            .open_loop
            .as_ref()
            .map(|o| crate::matrix::summary::OpenLoopFigures {
                target_rate: o.target_rate,
                sent_rate: o.sent_rate,
                missed: o.missed,
                rate_held: o.rate_held,
            }),
        gateway_requests,
        upstream_requests,
        upstream_per_request: per_request(upstream_requests),
        cache_hits,
        cache_misses,
        cache_dedupes,
        gateway_cpu_cores,
        gateway_peak_rss_bytes,
        gateways: gateway_names.len() as u32,
        rss_start_mib: max_of(instance_figures.iter().map(|f| f.rss_start_mib)),
        rss_peak_mib: max_of(instance_figures.iter().map(|f| f.rss_peak_mib)),
        rss_end_mib: max_of(instance_figures.iter().map(|f| f.rss_end_mib)),
        rss_warmup_peak_mib: max_of(instance_figures.iter().map(|f| f.rss_warmup_peak_mib)),
        // Only the endpoint profiler lives in the gateway's memory.
        rss_includes_profiler: matches!(ctx.profiler, Profiler::Endpoint),
        cache_hit_ratio: hit_ratio(cache_hits, cache_misses, cache_dedupes, cache_skips),
        redis_commands_per_request: per_request(
            metrics.gateway_sum("gateway_redis_commands_total"),
        ),
        redis_round_trips_per_request: per_request(
            metrics.gateway_sum("gateway_redis_round_trips_total"),
        ),
        redis_keys_per_round_trip: match (
            metrics.gateway_sum("gateway_redis_keys_read_total"),
            metrics.gateway_sum("gateway_redis_round_trips_total"),
        ) {
            (Some(keys), Some(trips)) if trips > 0.0 => Some(keys / trips),
            _ => None,
        },
        redis_server_commands_per_request: per_request(redis_server_commands),
        redis_keys_per_master: keys_per_master.clone(),
        storage_errors,
        instances: instance_figures.clone(),
        loadgen_cpu_cores: report.loadgen_cpu.process_cores,
        loadgen_may_be_bottleneck: report.loadgen_cpu.may_be_bottleneck,
        machine_busy_cores: report.loadgen_cpu.machine_busy_cores,
        ratio: None,
        p99_ratio: None,
        profile_note: profile_note.clone(),
        cache_skips,
        cpu: cpu_figures,
        workload: report.workload.clone(),
        profile: figures.clone(),
        upstream_per_second: PeakToMean::of(
            report.timeline.iter().filter_map(|s| s.upstream_requests),
        ),
        strategy_decisions: metrics.gateway_by(
            "gateway_cache_strategy_decisions_total",
            &["strategy", "decision"],
        ),
        stale_served: metrics.gateway_sum("gateway_cache_stale_total"),
        timeline: report.timeline.clone(),
        error_examples: report.error_examples.clone(),
        cache: CacheFigures::of_window(&metrics, &after),
        answer_differences: Vec::new(),
        request: config.query.as_ref().map(|q| RequestSent {
            sent_as: q.send.name().to_owned(),
            method: report.method.clone(),
            bytes: report.request_bytes,
        }),
        edge,
    };
    let record = RunRecord {
        round,
        config: config.name.clone(),
        services,
        query: config
            .query
            .as_ref()
            .map(|q| QueryRecord::of(q, config.own_query)),
        bench: report,
        metrics_delta: metrics.to_maps(),
        gateway_cpu_cores,
        cpu: cpu_all,
        gateway_peak_rss_bytes,
        rss_start_mib: measurement.rss_start_mib,
        rss_peak_mib: measurement.rss_peak_mib,
        rss_end_mib: measurement.rss_end_mib,
        rss_warmup_peak_mib: measurement.rss_warmup_peak_mib,
        rss_samples: rss_tracks.iter().map(|t| t.samples.len()).collect(),
        gateways: instance_figures,
        redis: redis_url.map(|url| RedisRecord {
            url,
            commands_processed_before: redis_before.as_ref().and_then(|b| b.as_ref().ok().copied()),
            commands_processed_after: redis_after.as_ref().and_then(|a| a.as_ref().ok().copied()),
            commands_in_window: redis_server_commands,
            keys_per_master: keys_per_master.clone(),
        }),
        profile: profile_note.unwrap_or_else(|| "collected".into()),
        profile_figures: figures,
        answer_checked_before: config.check,
        answer_checked_after: config.check,
        answer_differences: Vec::new(),
    };
    Ok(RoundOutput {
        measurement,
        record,
        profile,
    })
}

pub(super) fn mib(bytes: Option<u64>) -> Option<f64> {
    bytes.map(|b| b as f64 / (1024.0 * 1024.0))
}

/// The largest of the present values.
pub fn max_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    values.flatten().reduce(f64::max)
}
