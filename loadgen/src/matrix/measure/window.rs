//! One measured window: the bench plan (the configuration's query or workload, round
//! robin over the gateway instances), then warm-up and window with the bench on its
//! own thread, and the processes' CPU clocks, RSS, `/metrics`, Redis's counters and
//! the profile read at the window's edges.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};

use crate::bench::engine::{self, BenchPlan, StopRule};
use crate::bench::report::BenchReport;
use crate::bench::request_template::{BodySource, RequestTemplate};
use crate::matrix::experiment::ConfigSpec;
use crate::matrix::lifecycle::Stack;
use crate::matrix::profile::endpoint::fetch_profile;
use crate::matrix::profile::perf::{PerfData, PerfRecording};
use crate::matrix::profile::ProfileOutcome;
use crate::matrix::query::Send;
use crate::matrix::sampling::{CpuWatch, ProcessCpu};
use crate::matrix::scraping::{scrape_all, upstream_every_second, Scrape};
use crate::proc_usage;

use super::{Profiler, RunContext};

/// Why a peer's window has no flamegraph.
const PEER_NOT_PROFILED: &str = "a peer gateway is not profiled";
/// How often the gateway's VmRSS is read during warm-up and window.
const RSS_SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The bench plan: the configuration's query or workload, its connections round robin
/// over the gateway instances.
fn bench_plan(
    ctx: &RunContext<'_>,
    config: &ConfigSpec,
    stack: &Stack,
) -> anyhow::Result<BenchPlan> {
    let load = config.query.as_ref().map(|q| q.load_request());
    let (method, query_string) = match &load {
        Some(load) => (load.method, load.query_string.as_str()),
        None => ("POST", ""),
    };
    let (headers, body, numbered) = match (&config.query, &config.workload) {
        // A document sent as text, alone: numbered literals are written per request.
        (Some(q), _) if q.operation_name.is_none() && q.send == Send::Text => (
            q.headers.clone(),
            BodySource::GraphQl {
                query: q.document.clone(),
                variables: q.variables.as_ref().map(|v| v.to_string()),
            },
            q.unique_literals,
        ),
        // Otherwise (an operation named, a persisted document): the body as the query
        // table writes it, or none for a GET.
        (Some(q), _) => (
            q.headers.clone(),
            match load.as_ref().and_then(|l| l.body.clone()) {
                Some(body) => BodySource::Json(body.into_bytes()),
                None => BodySource::Empty,
            },
            false,
        ),
        (None, Some(_)) => (
            Vec::new(),
            BodySource::GraphQl {
                query: String::new(),
                variables: None,
            },
            false,
        ),
        (None, None) => return Err(anyhow!("{}: nothing to send", config.name)),
    };
    let path = config.path();
    let templates = stack
        .targets()
        .iter()
        .map(|(_, addr)| {
            RequestTemplate::with_numbering(
                &format!("http://{addr}{path}{query_string}"),
                Some(method),
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
        progress_bars: ctx.progress_bars.clone(),
        workload: config.workload.clone(),
    })
}

/// What one measured window saw, before it is turned into figures.
pub(super) struct Window {
    pub(super) report: BenchReport,
    pub(super) gateway_names: Vec<String>,
    /// The started subgraphs' process names, in the graph's order.
    pub(super) subgraph_names: Vec<String>,
    /// Those whose own counters give the subgraphs' requests (all of them counted).
    pub(super) counted_subgraphs: Option<Vec<String>>,
    /// CPU of every measured process over the window.
    pub(super) cpu_all: Vec<ProcessCpu>,
    pub(super) window_started: Instant,
    pub(super) window_wall: f64,
    pub(super) rss_start: Vec<Option<u64>>,
    pub(super) rss_tracks: Vec<proc_usage::RssTrack>,
    pub(super) peak_rss: Vec<Option<u64>>,
    pub(super) before: anyhow::Result<BTreeMap<String, Scrape>>,
    pub(super) after: anyhow::Result<BTreeMap<String, Scrape>>,
    pub(super) redis_before: Option<anyhow::Result<u64>>,
    pub(super) redis_after: Option<anyhow::Result<u64>>,
    /// Redis processes whose counters `redis_before`/`redis_after` sum (cluster: nodes).
    pub(super) redis_processes: usize,
    /// A cluster's keys per master at the window's end.
    pub(super) keys_per_master: Vec<u64>,
    /// The edge's counters at the window's edges (`edge = "varnish"`).
    pub(super) edge_before: Option<anyhow::Result<local_varnish::Counters>>,
    pub(super) edge_after: Option<anyhow::Result<local_varnish::Counters>>,
    pub(super) perf: anyhow::Result<Option<PerfData>>,
    pub(super) endpoint: Option<ProfileOutcome>,
    pub(super) profile_note: Option<String>,
}

/// Warm up and measure: the bench on its own thread; CPU clocks, the profile, RSS,
/// `/metrics` and Redis's counters at the window's edges.
pub(super) fn measure_window(
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
    // A peer is not profiled: its frames would be Node's JIT, not the lab's code.
    let peer_off = Profiler::Off(PEER_NOT_PROFILED.to_string());
    let profiler = if stack.peer { &peer_off } else { &ctx.profiler };
    let mut perf = match profiler {
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
    // A gateway's CPU sums its whole process tree: a peer may fork workers.
    let cpu = CpuWatch::start(measured, gateway_pids.clone());
    let window_started = Instant::now();
    let mut profile_note = stack.peer.then(|| PEER_NOT_PROFILED.to_string());
    if let Some(p) = &mut perf {
        if let Err(e) = p.enable() {
            profile_note = Some(format!("no flamegraph: {e:#}"));
            perf = None;
        }
    }
    let endpoint_profile = matches!(profiler, Profiler::Endpoint).then(|| {
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
    let edge_before = stack.edge_counters();

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
    let edge_after = stack.edge_counters();
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
        edge_before,
        edge_after,
        perf: perf_data,
        endpoint: endpoint_outcome,
        profile_note,
    })
}
