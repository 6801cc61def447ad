//! One configuration in one round, from start to stop: start its processes, check the
//! answer, warm up, measure (bench on its own thread; CPU, RSS, metrics and the profile
//! sampled at the window's edges), check again, stop, and turn what was seen into a
//! [`Measurement`] and a [`RunRecord`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};

use super::aggregation::hit_ratio;
use super::cache_figures::CacheFigures;
use super::experiment::{ConfigSpec, Experiment};
use super::lifecycle::{Launch, Stack};
use super::network;
use super::profile::endpoint::fetch_profile;
use super::profile::flamegraph::sample_count;
use super::profile::perf::{PerfData, PerfRecording};
use super::profile::{ProfileFigures, ProfileOutcome};
use super::record::{QueryRecord, RedisRecord, RunRecord, ServiceRecord};
use super::sampling::{summed, CpuWatch, ProcessCpu};
use super::scraping::{scrape_all, upstream_every_second, Scrape, WindowMetrics};
use super::settings::{Binaries, RunSettings, GATEWAY};
use super::summary::{InstanceFigures, InstanceFreshness, Measurement};
use crate::bench::engine::{self, BenchPlan, StopRule};
use crate::bench::report::BenchReport;
use crate::bench::request_template::{BodySource, RequestTemplate};
use crate::bench::timeline::PeakToMean;
use crate::proc_usage;

/// How often the gateway's VmRSS is read during warm-up and window.
const RSS_SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Who profiles the gateway in this run (decided once, before the first round).
#[derive(Debug, Clone)]
pub enum Profiler {
    /// `perf record` with this binary.
    Perf(PathBuf),
    /// The gateway's `/debug/profile` (it is started with `--profiling`).
    Endpoint,
    /// No profile, and why.
    Off(String),
}

impl Profiler {
    pub fn name(&self) -> &'static str {
        match self {
            Profiler::Perf(_) => "perf",
            Profiler::Endpoint => "endpoint",
            Profiler::Off(_) => "off",
        }
    }
}

/// What the rounds share.
pub struct RunContext<'a> {
    pub runtime: &'a tokio::runtime::Runtime,
    pub experiment: &'a Experiment,
    pub settings: RunSettings,
    pub binaries: &'a Binaries,
    /// redis-server on PATH, when a configuration needs it.
    pub redis_binary: Option<&'a Path>,
    pub profiler: Profiler,
    pub out: &'a Path,
}

/// What one configuration's run in one round produced.
pub struct RoundOutput {
    pub measurement: Measurement,
    pub record: RunRecord,
    pub profile: ProfileOutcome,
}

fn mib(bytes: Option<u64>) -> Option<f64> {
    bytes.map(|b| b as f64 / (1024.0 * 1024.0))
}

/// The largest of the present values.
pub fn max_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    values.flatten().reduce(f64::max)
}

/// The bench plan: the configuration's query or workload, its connections round robin
/// over the gateway instances.
fn bench_plan(
    ctx: &RunContext<'_>,
    config: &ConfigSpec,
    stack: &Stack,
) -> anyhow::Result<BenchPlan> {
    let (path, headers, body, numbered) = match (&config.query, &config.workload) {
        // A document of several operations names the one that runs: the body is
        // written as the answer check sends it.
        (Some(q), _) if q.operation_name.is_some() => (
            q.path.clone(),
            q.headers.clone(),
            BodySource::Json(q.body().into_bytes()),
            false,
        ),
        (Some(q), _) => (
            q.path.clone(),
            q.headers.clone(),
            BodySource::GraphQl {
                query: q.document.clone(),
                variables: q.variables.as_ref().map(|v| v.to_string()),
            },
            q.unique_literals,
        ),
        (None, Some(w)) => (
            w.path().to_string(),
            Vec::new(),
            BodySource::GraphQl {
                query: String::new(),
                variables: None,
            },
            false,
        ),
        (None, None) => return Err(anyhow!("{}: nothing to send", config.name)),
    };
    let templates = stack
        .gateways
        .iter()
        .map(|(g, _)| {
            RequestTemplate::with_numbering(
                &format!("http://{}{path}", g.addr),
                Some("POST"),
                &headers,
                body.clone(),
                numbered,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(BenchPlan {
        templates,
        connections: config.load.connections,
        threads: config.load.threads,
        stop: StopRule::After(ctx.settings.duration()),
        warmup: ctx.settings.warmup(),
        timeout: config.load.timeout,
        rate: config.load.rate,
        progress: true,
        workload: config.workload.clone(),
    })
}

/// What one measured window saw, before it is turned into figures.
struct Window {
    report: BenchReport,
    gateway_names: Vec<String>,
    /// The started subgraphs' process names, in the graph's order.
    subgraph_names: Vec<String>,
    /// Those whose own counters give the subgraphs' requests (all of them counted).
    counted_subgraphs: Option<Vec<String>>,
    /// CPU of every measured process over the window.
    cpu_all: Vec<ProcessCpu>,
    window_started: Instant,
    window_wall: f64,
    rss_start: Vec<Option<u64>>,
    rss_tracks: Vec<proc_usage::RssTrack>,
    peak_rss: Vec<Option<u64>>,
    before: anyhow::Result<BTreeMap<String, Scrape>>,
    after: anyhow::Result<BTreeMap<String, Scrape>>,
    redis_before: Option<anyhow::Result<u64>>,
    redis_after: Option<anyhow::Result<u64>>,
    /// Redis processes whose counters `redis_before`/`redis_after` sum (cluster: nodes).
    redis_processes: usize,
    /// A cluster's keys per master at the window's end.
    keys_per_master: Vec<u64>,
    perf: anyhow::Result<Option<PerfData>>,
    endpoint: Option<ProfileOutcome>,
    profile_note: Option<String>,
}

/// Warm up and measure: the bench on its own thread; CPU clocks, the profile, RSS,
/// `/metrics` and Redis's counters at the window's edges.
fn measure_window(
    ctx: &RunContext<'_>,
    config: &ConfigSpec,
    round: u32,
    stack: &Stack,
    tag: &str,
) -> anyhow::Result<Window> {
    let rt = ctx.runtime;
    let logs = ctx.out.join("logs");
    let plan = bench_plan(ctx, config, stack)?;
    let gateway_names: Vec<String> = stack.gateways.iter().map(|(g, _)| g.name.clone()).collect();
    let gateway_pids: Vec<u32> = stack.gateways.iter().map(|(g, _)| g.pid()).collect();
    let scrape_targets = stack.scrape_targets();
    let mut measured = stack.measured();
    measured.push(("loadgen".to_string(), std::process::id()));

    // perf attaches now, disabled, so that attaching costs nothing inside the window.
    let mut perf = match &ctx.profiler {
        Profiler::Perf(binary) => Some(PerfRecording::start(
            binary,
            gateway_pids[0],
            ctx.experiment.profile.hz,
            &ctx.out.join("profiles").join(format!("{tag}.perf.data")),
            &logs.join(format!("{tag}-perf.log")),
        )?),
        _ => None,
    };

    // RSS before the load, then sampled through warm-up and window. Sampling stops
    // when the window ends, before the gateway symbolizes a profile it took.
    let rss_start: Vec<Option<u64>> = gateway_pids
        .iter()
        .map(|pid| proc_usage::rss_bytes(*pid))
        .collect();
    let bench_started = Instant::now();
    let window_end = bench_started + ctx.settings.warmup() + ctx.settings.duration();
    let rss_sampler = proc_usage::sample_rss(gateway_pids.clone(), RSS_SAMPLE_EVERY, window_end)
        .context("starting the RSS sampler")?;
    let bench_plan = plan.clone();
    let bench = std::thread::Builder::new()
        .name("matrix-bench".into())
        .spawn(move || engine::run(&bench_plan))?;

    // The measured window starts after the warm-up: CPU clocks and the profile first,
    // then the scrape (a loaded gateway can be slow to answer /metrics, and a profile
    // that started late would sample an idle gateway).
    std::thread::sleep(
        ctx.settings
            .warmup()
            .saturating_sub(bench_started.elapsed()),
    );
    let cpu = CpuWatch::start(measured);
    let window_started = Instant::now();
    let mut profile_note = None;
    if let Some(p) = &mut perf {
        if let Err(e) = p.enable() {
            profile_note = Some(format!("no flamegraph: {e:#}"));
            perf = None;
        }
    }
    let endpoint_profile = matches!(ctx.profiler, Profiler::Endpoint).then(|| {
        let seconds = ctx.settings.duration().as_secs().max(1);
        rt.spawn(fetch_profile(
            stack.gateways[0].0.addr,
            seconds,
            ctx.experiment.profile.hz,
        ))
    });
    let before = rt.block_on(scrape_all(&scrape_targets));
    // The subgraphs' requests second by second, from the window's start.
    let counter = stack.upstream_counter(config);
    let first = before.as_ref().ok().and_then(|b| counter.total(b));
    let upstream_timeline = rt.spawn(upstream_every_second(
        counter,
        window_started,
        ctx.settings.duration().as_secs(),
        first,
    ));
    let redis_before = stack.redis_commands(rt);

    let result = bench
        .join()
        .map_err(|_| anyhow!("the bench thread panicked"))?;
    let perf_data = perf.map(PerfRecording::stop).transpose();
    let window_wall = window_started.elapsed().as_secs_f64();
    let result = result.with_context(|| format!("round {round}, {}: load", config.name))?;
    let report = BenchReport::new(&plan, &result);
    let client_requests = Some(report.requests as f64).filter(|n| *n > 0.0);
    let cpu_all = cpu.stop(client_requests);
    let rss_tracks = rss_sampler
        .join()
        .map_err(|_| anyhow!("the RSS sampler panicked"))?;
    let peak_rss: Vec<Option<u64>> = gateway_pids
        .iter()
        .map(|pid| proc_usage::peak_rss_bytes(*pid))
        .collect();
    let after = rt.block_on(scrape_all(&scrape_targets));
    let mut report = report;
    let upstream_seconds = rt.block_on(upstream_timeline).unwrap_or_default();
    for (second, upstream) in report.timeline.iter_mut().zip(upstream_seconds) {
        second.upstream_requests = upstream;
    }
    let redis_after = stack.redis_commands(rt);
    // After the last INFO, so that DBSIZE is not counted in the window.
    let keys_per_master = stack
        .cluster
        .as_ref()
        .and_then(|c| c.keys_per_master().ok())
        .unwrap_or_default();
    let endpoint_outcome = endpoint_profile.map(|task| {
        rt.block_on(task).unwrap_or_else(|e| {
            ProfileOutcome::Unavailable(format!("no flamegraph: profile task failed: {e}"))
        })
    });
    Ok(Window {
        report,
        gateway_names,
        subgraph_names: stack
            .subgraphs
            .iter()
            .map(|s| s.process.name.clone())
            .collect(),
        counted_subgraphs: config.graph.counts_every_subgraph().then(|| {
            stack
                .metered_subgraphs()
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        }),
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
        redis_processes: stack.redis_processes(),
        keys_per_master,
        perf: perf_data,
        endpoint: endpoint_outcome,
        profile_note,
    })
}

/// The profile of the window, symbolized (perf) or as the endpoint gave it, with its
/// coverage of the profiled gateway's CPU.
fn profile_of(ctx: &RunContext<'_>, w: &mut Window) -> (ProfileOutcome, Option<ProfileFigures>) {
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

/// Run one configuration once.
pub fn run_configuration(
    ctx: &RunContext<'_>,
    config: &ConfigSpec,
    round: u32,
) -> anyhow::Result<RoundOutput> {
    let rt = ctx.runtime;
    let tag = format!("r{round}-{}", config.name);
    let logs = ctx.out.join("logs");
    let mut stack = Stack::start(
        &Launch {
            runtime: rt,
            binaries: ctx.binaries,
            redis_binary: ctx.redis_binary,
            experiment_name: &ctx.experiment.name,
            logs: &logs,
            tag: tag.clone(),
            gateway_profiling: matches!(ctx.profiler, Profiler::Endpoint),
        },
        config,
    )
    .with_context(|| format!("round {round}, {}", config.name))?;
    rt.block_on(super::validation::validate(
        stack.gateways[0].0.addr,
        config,
    ))
    .with_context(|| format!("round {round}, {}", config.name))?;
    if config.check {
        stack.check(rt, config, &format!("round {round}"))?;
    }
    let mut window = measure_window(ctx, config, round, &stack, &tag)?;
    if config.check {
        stack.check(rt, config, &format!("round {round}, after the measurement"))?;
    }
    let processes: Vec<ServiceRecord> = stack
        .processes()
        .iter()
        .map(|(p, ready)| ServiceRecord {
            name: p.name.clone(),
            pid: p.pid(),
            addr: p.addr,
            command_line: p.command_line.clone(),
            healthy_after_s: ready.as_secs_f64(),
            stopped: String::new(),
        })
        .collect();
    let redis_url = stack.redis_url();
    let stopped = stack.stop();
    let services: Vec<ServiceRecord> = processes
        .into_iter()
        .zip(stopped)
        .map(|(s, stopped)| ServiceRecord { stopped, ..s })
        .collect();

    // The profile, symbolized now that the services are stopped.
    let (profile, figures) = profile_of(ctx, &mut window);
    round_output(
        ctx, config, round, window, services, redis_url, profile, figures,
    )
}

/// Turn a window's observations into the round's [`Measurement`] and [`RunRecord`].
#[allow(clippy::too_many_arguments)]
fn round_output(
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
    for name in subgraph_names.iter().map(String::as_str).chain(["loadgen"]) {
        cpu_figures.extend(cpu_all.iter().find(|p| p.name == name).cloned());
    }
    cpu_figures.extend(summed(
        &cpu_all,
        network::PROXY_PREFIX,
        client_requests,
        window_wall,
    ));
    let gateway_cpu_cores = cpu_figures.first().and_then(|g| g.cores);
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
    };
    Ok(RoundOutput {
        measurement,
        record,
        profile,
    })
}
