//! `loadgen matrix`: run every configuration of an experiment, round after round.
//!
//! Rounds are interleaved (A B C D, A B C D, …) so that drift on a shared machine hits
//! every configuration alike. For each configuration in each round the runner starts
//! fresh user-service, post-service and gateway processes on free ports, waits for
//! `/health`, checks the answer (a wrong answer aborts the whole run), warms up,
//! measures while sampling the gateway (CPU, peak RSS, a profile for the flamegraph),
//! scrapes `/metrics` of all three at both edges of the window, checks the answer again
//! and stops the processes by PID. Then it writes the run directory.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail, Context};
use hyper::Method;
use serde::Serialize;

use crate::cli::MatrixArgs;
use crate::engine::{self, BenchPlan, StopRule};
use crate::experiment::{ConfigSpec, Experiment, QuerySpec, REDIS_PLACEHOLDER};
use crate::flamegraph::{self, ProfileOutcome};
use crate::manifest::{self, Manifest};
use crate::metrics::Scrape;
use crate::proc_usage;
use crate::report::BenchReport;
use crate::request_template::{BodySource, RequestTemplate};
use crate::services::{free_ports, ServiceProcess, STOP_GRACE};
use crate::summary::{self, ConfigSummary, InstanceFigures, Measurement, Summary};
use crate::{chart, http_probe, redis_server};

/// Binaries the runner starts, by file name.
const GATEWAY: &str = "gateway";
const USER_SERVICE: &str = "user-service";
const POST_SERVICE: &str = "post-service";
/// How long a service may take to answer `/health` after it starts.
const HEALTH_DEADLINE: Duration = Duration::from_secs(60);
/// Deadline of one answer check or metrics scrape.
const PROBE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a configuration's redis-server may take to answer PING.
const REDIS_DEADLINE: Duration = Duration::from_secs(20);
/// How often the gateway's VmRSS is read during warm-up and window.
const RSS_SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Defaults when neither the command line nor the experiment file says.
const DEFAULT_ROUNDS: u32 = 3;
const DEFAULT_DURATION: Duration = Duration::from_secs(10);
const DEFAULT_WARMUP: Duration = Duration::from_secs(2);
/// `--quick`: one round of a few seconds, for CI.
const QUICK_ROUNDS: u32 = 1;
const QUICK_DURATION: Duration = Duration::from_secs(3);
const QUICK_WARMUP: Duration = Duration::from_secs(1);

/// Rounds and windows in force for a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunSettings {
    pub rounds: u32,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub quick: bool,
}

impl RunSettings {
    /// Command line first, then (unless --quick) the experiment file, then defaults.
    pub fn resolve(args: &MatrixArgs, experiment: &Experiment) -> RunSettings {
        let (rounds, duration, warmup) = if args.quick {
            (QUICK_ROUNDS, QUICK_DURATION, QUICK_WARMUP)
        } else {
            (
                experiment.run.rounds.unwrap_or(DEFAULT_ROUNDS),
                experiment.run.duration.unwrap_or(DEFAULT_DURATION),
                experiment.run.warmup.unwrap_or(DEFAULT_WARMUP),
            )
        };
        RunSettings {
            rounds: args.rounds.unwrap_or(rounds),
            duration_s: args.duration.unwrap_or(duration).as_secs_f64(),
            warmup_s: args.warmup.unwrap_or(warmup).as_secs_f64(),
            quick: args.quick,
        }
    }

    fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration_s)
    }

    fn warmup(&self) -> Duration {
        Duration::from_secs_f64(self.warmup_s)
    }
}

/// Paths of the three service binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub gateway: PathBuf,
    pub user_service: PathBuf,
    pub post_service: PathBuf,
}

impl Binaries {
    /// Find the binaries in `dir`, or next to the running loadgen (the same build).
    pub fn locate(dir: Option<&Path>) -> anyhow::Result<Binaries> {
        let (dir, flag) = match dir {
            Some(d) => (d.to_path_buf(), "--bin-dir"),
            None => {
                let exe = std::env::current_exe().context("locating loadgen's own binary")?;
                let dir = exe
                    .parent()
                    .ok_or_else(|| anyhow!("loadgen's binary has no directory"))?;
                // Test binaries live in target/<profile>/deps; the services one level up.
                let dir = if dir.ends_with("deps") {
                    dir.parent().unwrap_or(dir)
                } else {
                    dir
                };
                (
                    dir.to_path_buf(),
                    "the directory of loadgen's binary (use --bin-dir)",
                )
            }
        };
        let find = |name: &str| {
            let path = dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(anyhow!(
                    "{name} not found in {} ({flag}); build the workspace first, e.g. `cargo build --release --workspace`",
                    dir.display()
                ))
            }
        };
        Ok(Binaries {
            gateway: find(GATEWAY)?,
            user_service: find(USER_SERVICE)?,
            post_service: find(POST_SERVICE)?,
        })
    }
}

/// Everything recorded about one measured run, kept as `runs/r<round>-<config>.json`.
#[derive(Debug, Clone, Serialize)]
struct RunRecord {
    round: u32,
    config: String,
    services: Vec<ServiceRecord>,
    query: QueryRecord,
    bench: BenchReport,
    /// Per-service metric differences over the measured window.
    metrics_delta: BTreeMap<String, BTreeMap<String, f64>>,
    /// Summed over the gateway instances.
    gateway_cpu_cores: Option<f64>,
    /// VmHWM at the end of the window (the largest instance's), profiler included.
    gateway_peak_rss_bytes: Option<u64>,
    /// VmRSS before the load, sampled peak and at the window's end (largest instance).
    rss_start_mib: Option<f64>,
    rss_peak_mib: Option<f64>,
    rss_end_mib: Option<f64>,
    rss_warmup_peak_mib: Option<f64>,
    /// VmRSS readings taken per instance.
    rss_samples: Vec<usize>,
    /// Per gateway instance: requests, cache counters, CPU, RSS.
    gateways: Vec<InstanceFigures>,
    /// The configuration's redis-server, if it has one.
    redis: Option<RedisRecord>,
    profile: String,
    answer_checked_before: bool,
    answer_checked_after: bool,
}

/// The query a run was measured with (the document abridged).
#[derive(Debug, Clone, Serialize)]
struct QueryRecord {
    /// The configuration's own query rather than the top-level one.
    own: bool,
    path: String,
    document_chars: usize,
    /// The first 200 characters of the document.
    document_start: String,
    variables: Option<serde_json::Value>,
    unique_literals: bool,
}

impl QueryRecord {
    fn of(q: &QuerySpec, own: bool) -> QueryRecord {
        QueryRecord {
            own,
            path: q.path.clone(),
            document_chars: q.document.chars().count(),
            document_start: q.document.chars().take(200).collect(),
            variables: q.variables.clone(),
            unique_literals: q.unique_literals,
        }
    }
}

/// What the runner saw of a configuration's redis-server.
#[derive(Debug, Clone, Serialize)]
struct RedisRecord {
    url: String,
    /// INFO `total_commands_processed` at the window's start and end.
    commands_processed_before: Option<u64>,
    commands_processed_after: Option<u64>,
    /// Commands in the window, the runner's own INFO subtracted.
    commands_in_window: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
struct ServiceRecord {
    name: String,
    pid: u32,
    addr: SocketAddr,
    command_line: Vec<String>,
    healthy_after_s: f64,
    stopped: String,
}

/// Ask the gateway the configuration's query (`{{n}}` read as 0) and compare with the
/// expected answer.
async fn check_answer(gateway: SocketAddr, query: &QuerySpec) -> anyhow::Result<()> {
    let answer = http_probe::request(
        gateway,
        Method::POST,
        &query.path,
        &query.headers,
        Some(query.check_body()),
        PROBE_DEADLINE,
    )
    .await
    .context("asking the gateway the experiment's query")?;
    let got: Option<serde_json::Value> = serde_json::from_slice(&answer.body).ok();
    if answer.status != 200 || got.as_ref() != Some(&query.expected) {
        bail!(
            "wrong answer from the gateway (HTTP {}):\n  expected {}\n  got      {}",
            answer.status,
            query.expected,
            answer.text()
        );
    }
    Ok(())
}

async fn scrape(addr: SocketAddr) -> anyhow::Result<Scrape> {
    let answer = http_probe::get(addr, "/metrics", PROBE_DEADLINE).await?;
    if answer.status != 200 {
        bail!("{addr}/metrics answered {}", answer.status);
    }
    Ok(Scrape::parse(&answer.text()))
}

async fn scrape_all(services: &[(String, SocketAddr)]) -> anyhow::Result<BTreeMap<String, Scrape>> {
    let mut all = BTreeMap::new();
    for (name, addr) in services {
        all.insert(
            name.to_string(),
            scrape(*addr)
                .await
                .with_context(|| format!("scraping {name}"))?,
        );
    }
    Ok(all)
}

/// What one configuration's run in one round produced.
struct RoundOutput {
    measurement: Measurement,
    record: RunRecord,
    profile: ProfileOutcome,
}

struct RunContext<'a> {
    runtime: &'a tokio::runtime::Runtime,
    experiment: &'a Experiment,
    settings: RunSettings,
    binaries: &'a Binaries,
    /// redis-server on PATH, when a configuration needs it.
    redis_binary: Option<&'a Path>,
    out: &'a Path,
}

/// The name of the `i`-th gateway instance: `gateway`, then `gateway-2`, `gateway-3`, …
fn gateway_name(i: usize) -> String {
    if i == 0 {
        GATEWAY.to_string()
    } else {
        format!("{GATEWAY}-{}", i + 1)
    }
}

/// `args` with every `{redis}` replaced by `url` (unchanged without a redis-server).
fn with_redis_url(args: &[String], url: Option<&str>) -> Vec<String> {
    args.iter()
        .map(|a| match url {
            Some(url) => a.replace(REDIS_PLACEHOLDER, url),
            None => a.clone(),
        })
        .collect()
}

fn mib(bytes: Option<u64>) -> Option<f64> {
    bytes.map(|b| b as f64 / (1024.0 * 1024.0))
}

/// The largest of the present values.
fn max_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    values.flatten().reduce(f64::max)
}

fn run_configuration(
    ctx: &RunContext<'_>,
    config: &ConfigSpec,
    round: u32,
) -> anyhow::Result<RoundOutput> {
    let rt = ctx.runtime;
    let tag = format!("r{round}-{}", config.name);
    let instances = config.gateways.max(1);
    let ports =
        free_ports(2 + instances + usize::from(config.redis)).context("choosing free ports")?;
    let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let (user_addr, post_addr) = (addr(ports[0]), addr(ports[1]));
    let gateway_addrs: Vec<SocketAddr> = ports[2..2 + instances].iter().map(|p| addr(*p)).collect();
    let log = |service: &str| ctx.out.join("logs").join(format!("{tag}-{service}.log"));
    let with_listen = |listen: SocketAddr, extra: &[String]| {
        let mut args = vec!["--listen".to_string(), listen.to_string()];
        args.extend(extra.iter().cloned());
        args
    };

    // Redis first, so that the gateways find it when they start.
    let mut redis = if config.redis {
        let binary = ctx.redis_binary.ok_or_else(|| {
            anyhow!(redis_server::missing_message(
                &ctx.experiment.name,
                &config.name
            ))
        })?;
        let mut process = redis_server::start(binary, ports[2 + instances], &log("redis"))?;
        let ready = rt.block_on(redis_server::wait_ready(&mut process, REDIS_DEADLINE))?;
        Some((process, ready))
    } else {
        None
    };
    let redis_url = redis.as_ref().map(|(r, _)| redis_server::url(r.addr));
    let gateway_extra = with_redis_url(&config.gateway_args, redis_url.as_deref());

    let mut user = ServiceProcess::spawn(
        USER_SERVICE,
        &ctx.binaries.user_service,
        &with_listen(user_addr, &config.user_service_args),
        user_addr,
        &log(USER_SERVICE),
    )?;
    let mut post = ServiceProcess::spawn(
        POST_SERVICE,
        &ctx.binaries.post_service,
        &with_listen(post_addr, &config.post_service_args),
        post_addr,
        &log(POST_SERVICE),
    )?;
    let user_ready = rt.block_on(user.wait_healthy(HEALTH_DEADLINE))?;
    let post_ready = rt.block_on(post.wait_healthy(HEALTH_DEADLINE))?;
    let mut gateways = Vec::with_capacity(instances);
    for (i, gateway_addr) in gateway_addrs.iter().enumerate() {
        let mut gateway_args = vec![
            "--listen".to_string(),
            gateway_addr.to_string(),
            "--subgraph".to_string(),
            format!("user=http://{user_addr}/graphql"),
            "--subgraph".to_string(),
            format!("post=http://{post_addr}/graphql"),
        ];
        // Every instance gets the same arguments; only the first is sampled.
        if ctx.experiment.profile.enabled {
            gateway_args.push("--profiling".to_string());
        }
        gateway_args.extend(gateway_extra.iter().cloned());
        let name = gateway_name(i);
        gateways.push(ServiceProcess::spawn(
            &name,
            &ctx.binaries.gateway,
            &gateway_args,
            *gateway_addr,
            &log(&name),
        )?);
    }
    let mut gateway_ready = Vec::with_capacity(instances);
    for g in &mut gateways {
        gateway_ready.push(rt.block_on(g.wait_healthy(HEALTH_DEADLINE))?);
    }

    let query = &config.query;
    for g in &gateways {
        rt.block_on(check_answer(g.addr, query))
            .with_context(|| format!("round {round}, {}: {} at {}", config.name, g.name, g.addr))?;
    }

    // The load: the same request a client sends, from the same body text; connections
    // round robin over the gateway instances.
    let variables = query.variables.as_ref().map(|v| v.to_string());
    let templates = gateway_addrs
        .iter()
        .map(|a| {
            RequestTemplate::with_numbering(
                &format!("http://{a}{}", query.path),
                Some("POST"),
                &query.headers,
                BodySource::GraphQl {
                    query: query.document.clone(),
                    variables: variables.clone(),
                },
                query.unique_literals,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let plan = BenchPlan {
        templates,
        connections: config.load.connections,
        threads: config.load.threads,
        stop: StopRule::After(ctx.settings.duration()),
        warmup: ctx.settings.warmup(),
        timeout: config.load.timeout,
        rate: config.load.rate,
        progress: true,
    };
    let gateway_names: Vec<String> = gateways.iter().map(|g| g.name.clone()).collect();
    let mut services: Vec<(String, SocketAddr)> =
        gateways.iter().map(|g| (g.name.clone(), g.addr)).collect();
    services.push((USER_SERVICE.to_string(), user_addr));
    services.push((POST_SERVICE.to_string(), post_addr));
    let gateway_pids: Vec<u32> = gateways.iter().map(ServiceProcess::pid).collect();

    // RSS before the load, then sampled through warm-up and window. Sampling stops
    // when the window ends, before the gateway symbolizes the profile it took.
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

    // The measured window starts after the warm-up: sample CPU, start profiling, then
    // scrape. The profile and the CPU clock go first: a loaded gateway may take a while
    // to answer /metrics, and a profile that started late would sample an idle gateway.
    std::thread::sleep(
        ctx.settings
            .warmup()
            .saturating_sub(bench_started.elapsed()),
    );
    let cpu_sample = || -> Vec<(Instant, Option<Duration>)> {
        gateway_pids
            .iter()
            .map(|pid| (Instant::now(), proc_usage::process_cpu_time(*pid)))
            .collect()
    };
    let cpu_before = cpu_sample();
    // RSS read from here on includes the profiler's memory on the profiled instance.
    let window_started = Instant::now();
    let profile_task = ctx.experiment.profile.enabled.then(|| {
        let seconds = ctx.settings.duration().as_secs().max(1);
        rt.spawn(flamegraph::fetch_profile(
            gateway_addrs[0],
            seconds,
            ctx.experiment.profile.hz,
        ))
    });
    let before = rt.block_on(scrape_all(&services));
    let redis_before = redis
        .as_ref()
        .map(|(r, _)| rt.block_on(redis_server::commands_processed(r.addr)));

    let result = bench
        .join()
        .map_err(|_| anyhow!("the bench thread panicked"))?;
    let cpu_after = cpu_sample();
    let rss_tracks = rss_sampler
        .join()
        .map_err(|_| anyhow!("the RSS sampler panicked"))?;
    let peak_rss: Vec<Option<u64>> = gateway_pids
        .iter()
        .map(|pid| proc_usage::peak_rss_bytes(*pid))
        .collect();
    let after = rt.block_on(scrape_all(&services));
    let redis_after = redis
        .as_ref()
        .map(|(r, _)| rt.block_on(redis_server::commands_processed(r.addr)));
    let result = result.with_context(|| format!("round {round}, {}: load", config.name))?;
    let profile = match profile_task {
        Some(task) => rt.block_on(task).unwrap_or_else(|e| {
            ProfileOutcome::Unavailable(format!("no flamegraph: profile task failed: {e}"))
        }),
        None => ProfileOutcome::Unavailable("profiling disabled in the experiment file".into()),
    };
    for g in &gateways {
        rt.block_on(check_answer(g.addr, query)).with_context(|| {
            format!(
                "round {round}, {}: {} after the measurement",
                config.name, g.name
            )
        })?;
    }

    let mut stopped: Vec<String> = gateways.iter_mut().map(|g| g.stop(STOP_GRACE)).collect();
    stopped.push(post.stop(STOP_GRACE));
    stopped.push(user.stop(STOP_GRACE));
    if let Some((r, _)) = &mut redis {
        stopped.push(r.stop(STOP_GRACE));
    }

    let report = BenchReport::new(&plan, &result);
    let (before, after) = (before?, after?);
    let delta: BTreeMap<String, Scrape> = after
        .iter()
        .map(|(name, a)| {
            (
                name.clone(),
                a.delta(before.get(name).unwrap_or(&Scrape::default())),
            )
        })
        .collect();
    // Gateway counters summed over the instances; absent when no instance has them.
    let gateway_sum = |metric: &str| -> Option<f64> {
        let present: Vec<f64> = gateway_names
            .iter()
            .filter_map(|n| delta.get(n).and_then(|d| d.sum(metric)))
            .collect();
        (!present.is_empty()).then(|| present.iter().sum())
    };
    let gateway_requests = gateway_sum("gateway_requests_total");
    let upstream_requests = match (
        delta[USER_SERVICE].sum("subgraph_requests_total"),
        delta[POST_SERVICE].sum("subgraph_requests_total"),
    ) {
        (Some(u), Some(p)) => Some(u + p),
        _ => gateway_sum("gateway_upstream_requests_total"),
    };
    let client_requests = gateway_requests
        .or(Some(report.requests as f64))
        .filter(|n| *n > 0.0);
    let per_request = |count: Option<f64>| match (count, client_requests) {
        (Some(c), Some(n)) => Some(c / n),
        _ => None,
    };
    let upstream_per_request = per_request(upstream_requests);
    let cpu_cores: Vec<Option<f64>> = cpu_before
        .iter()
        .zip(&cpu_after)
        .map(|(b, a)| match (b.1, a.1) {
            (Some(cb), Some(ca)) => {
                let wall = (a.0 - b.0).as_secs_f64();
                (wall > 0.0).then(|| ca.saturating_sub(cb).as_secs_f64() / wall)
            }
            _ => None,
        })
        .collect();
    let gateway_cpu_cores = cpu_cores.iter().flatten().copied().reduce(|a, b| a + b);
    let (cache_hits, cache_misses, cache_dedupes) = (
        gateway_sum("gateway_cache_hits_total"),
        gateway_sum("gateway_cache_misses_total"),
        gateway_sum("gateway_cache_dedupes_total"),
    );
    let storage_errors = match (
        gateway_sum("gateway_storage_errors_total"),
        gateway_sum("gateway_cache_storage_errors_total"),
    ) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    };
    // Between the two INFO answers the server ran the first INFO and the gateways'
    // commands (whether INFO counts itself or not, exactly one INFO falls in between).
    let redis_server_commands = match (&redis_before, &redis_after) {
        (Some(Ok(b)), Some(Ok(a))) => Some(a.saturating_sub(*b).saturating_sub(1) as f64),
        _ => None,
    };
    let instance_figures: Vec<InstanceFigures> = gateway_names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let d = delta.get(name);
            let sum = |metric: &str| d.and_then(|d| d.sum(metric));
            let (hits, misses, dedupes) = (
                sum("gateway_cache_hits_total"),
                sum("gateway_cache_misses_total"),
                sum("gateway_cache_dedupes_total"),
            );
            InstanceFigures {
                name: name.clone(),
                requests: sum("gateway_requests_total"),
                cache_hits: hits,
                cache_misses: misses,
                cache_dedupes: dedupes,
                cache_hit_ratio: summary::hit_ratio(hits, misses, dedupes),
                cpu_cores: cpu_cores[i],
                rss_start_mib: mib(rss_start[i]),
                rss_warmup_peak_mib: mib(rss_tracks[i].peak_before(window_started)),
                rss_peak_mib: mib(rss_tracks[i].peak()),
                rss_end_mib: mib(rss_tracks[i].last()),
                profiled: i == 0 && ctx.experiment.profile.enabled,
                peak_rss_bytes: peak_rss[i],
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
        gateway_requests,
        upstream_requests,
        upstream_per_request,
        cache_hits,
        cache_misses,
        cache_dedupes,
        gateway_cpu_cores,
        gateway_peak_rss_bytes,
        gateways: instances as u32,
        rss_start_mib: max_of(instance_figures.iter().map(|f| f.rss_start_mib)),
        rss_peak_mib: max_of(instance_figures.iter().map(|f| f.rss_peak_mib)),
        rss_end_mib: max_of(instance_figures.iter().map(|f| f.rss_end_mib)),
        rss_warmup_peak_mib: max_of(instance_figures.iter().map(|f| f.rss_warmup_peak_mib)),
        rss_includes_profiler: ctx.experiment.profile.enabled,
        cache_hit_ratio: summary::hit_ratio(cache_hits, cache_misses, cache_dedupes),
        redis_commands_per_request: per_request(gateway_sum("gateway_redis_commands_total")),
        redis_round_trips_per_request: per_request(gateway_sum("gateway_redis_round_trips_total")),
        redis_server_commands_per_request: per_request(redis_server_commands),
        storage_errors,
        instances: instance_figures.clone(),
        loadgen_cpu_cores: report.loadgen_cpu.process_cores,
        loadgen_may_be_bottleneck: report.loadgen_cpu.may_be_bottleneck,
        machine_busy_cores: report.loadgen_cpu.machine_busy_cores,
        ratio: None,
        p99_ratio: None,
        profile_note: profile_note.clone(),
    };
    let mut processes: Vec<(&ServiceProcess, Duration)> =
        gateways.iter().zip(gateway_ready.iter().copied()).collect();
    processes.push((&post, post_ready));
    processes.push((&user, user_ready));
    if let Some((r, ready)) = &redis {
        processes.push((r, *ready));
    }
    let record = RunRecord {
        round,
        config: config.name.clone(),
        services: processes
            .iter()
            .zip(stopped)
            .map(|((p, ready), stopped)| ServiceRecord {
                name: p.name.clone(),
                pid: p.pid(),
                addr: p.addr,
                command_line: p.command_line.clone(),
                healthy_after_s: ready.as_secs_f64(),
                stopped,
            })
            .collect(),
        query: QueryRecord::of(query, config.own_query),
        bench: report,
        metrics_delta: delta.iter().map(|(k, v)| (k.clone(), v.to_map())).collect(),
        gateway_cpu_cores,
        gateway_peak_rss_bytes,
        rss_start_mib: measurement.rss_start_mib,
        rss_peak_mib: measurement.rss_peak_mib,
        rss_end_mib: measurement.rss_end_mib,
        rss_warmup_peak_mib: measurement.rss_warmup_peak_mib,
        rss_samples: rss_tracks.iter().map(|t| t.samples.len()).collect(),
        gateways: instance_figures,
        redis: redis.as_ref().map(|(r, _)| RedisRecord {
            url: redis_server::url(r.addr),
            commands_processed_before: redis_before.as_ref().and_then(|b| b.as_ref().ok().copied()),
            commands_processed_after: redis_after.as_ref().and_then(|a| a.as_ref().ok().copied()),
            commands_in_window: redis_server_commands,
        }),
        profile: profile_note.unwrap_or_else(|| "collected".into()),
        answer_checked_before: true,
        answer_checked_after: true,
    };
    Ok(RoundOutput {
        measurement,
        record,
        profile,
    })
}

/// A fresh run directory under `results/`, named by the UTC time.
fn default_out_dir(run_id: &str) -> PathBuf {
    let base = Path::new("results");
    let mut dir = base.join(run_id);
    let mut n = 2;
    while dir.exists() {
        dir = base.join(format!("{run_id}-{n}"));
        n += 1;
    }
    dir
}

/// Point `<parent of out>/latest` at `out`.
fn update_latest(out: &Path) -> anyhow::Result<()> {
    let (Some(parent), Some(name)) = (out.parent(), out.file_name()) else {
        return Ok(());
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let link = parent.join("latest");
    if link.symlink_metadata().is_ok() {
        if link.is_symlink() {
            std::fs::remove_file(&link)?;
        } else {
            bail!(
                "{} exists and is not a symlink; not replacing it",
                link.display()
            );
        }
    }
    std::os::unix::fs::symlink(name, &link)
        .with_context(|| format!("linking {}", link.display()))?;
    Ok(())
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// Run the matrix; returns the run directory.
pub fn run(args: &MatrixArgs) -> anyhow::Result<PathBuf> {
    let experiment_text = std::fs::read_to_string(&args.config)
        .map_err(|e| anyhow!("--config {}: {e}", args.config.display()))?;
    let experiment = Experiment::parse(&experiment_text, &args.config)?;
    let settings = RunSettings::resolve(args, &experiment);
    // A configuration that needs redis-server fails the run before anything starts.
    let redis_binary = match experiment.configs.iter().find(|c| c.redis) {
        None => None,
        Some(c) => Some(
            redis_server::find_on_path()
                .ok_or_else(|| anyhow!(redis_server::missing_message(&experiment.name, &c.name)))?,
        ),
    };
    let binaries = Binaries::locate(args.bin_dir.as_deref())?;

    let (timestamp, run_id) = manifest::utc_stamps(SystemTime::now());
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => default_out_dir(&run_id),
    };
    for sub in ["logs", "runs", "profiles"] {
        std::fs::create_dir_all(out.join(sub))
            .with_context(|| format!("creating {}", out.join(sub).display()))?;
    }
    let manifest = Manifest {
        schema: manifest::SCHEMA.into(),
        run_id: run_id.clone(),
        timestamp,
        git: manifest::git_state(Path::new(".")),
        rustc: env!("LOADGEN_RUSTC_VERSION").into(),
        loadgen_version: env!("CARGO_PKG_VERSION").into(),
        cpu_model: manifest::cpu_model(),
        cores: proc_usage::available_cores(),
        kernel: manifest::kernel(),
        experiment_file: args.config.clone(),
        experiment: experiment_text,
        arguments: std::env::args().collect(),
        settings: serde_json::to_value(settings)?,
        binaries: vec![
            manifest::binary_info(GATEWAY, &binaries.gateway),
            manifest::binary_info(USER_SERVICE, &binaries.user_service),
            manifest::binary_info(POST_SERVICE, &binaries.post_service),
            manifest::binary_info("loadgen", &std::env::current_exe()?),
        ]
        .into_iter()
        .chain(
            redis_binary
                .as_deref()
                .map(|p| manifest::binary_info(redis_server::REDIS_SERVER, p)),
        )
        .collect(),
    };
    write_json(&out.join("manifest.json"), &manifest)?;
    eprintln!(
        "loadgen matrix: {} ({} configurations × {} round(s), {:.0} s + {:.0} s warm-up each) → {}",
        experiment.name,
        experiment.configs.len(),
        settings.rounds,
        settings.duration_s,
        settings.warmup_s,
        out.display()
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let ctx = RunContext {
        runtime: &runtime,
        experiment: &experiment,
        settings,
        binaries: &binaries,
        redis_binary: redis_binary.as_deref(),
        out: &out,
    };
    let mut measurements = Vec::new();
    let mut stacks: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut notes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for round in 1..=settings.rounds {
        for config in &experiment.configs {
            let output = run_configuration(&ctx, config, round).map_err(|e| {
                e.context(format!(
                    "aborting the run (files so far in {})",
                    out.display()
                ))
            })?;
            let m = &output.measurement;
            eprintln!(
                "  round {round}/{} {:<12} {:>9.0} req/s  p50 {}  p99 {}  errors {}{}",
                settings.rounds,
                config.name,
                m.requests_per_sec,
                crate::report::ms(m.p50_ms),
                crate::report::ms(m.p99_ms),
                m.errors.total(),
                m.profile_note
                    .as_deref()
                    .map(|n| format!("  [{n}]"))
                    .unwrap_or_default()
            );
            write_json(
                &out.join("runs")
                    .join(format!("r{round}-{}.json", config.name)),
                &output.record,
            )?;
            match output.profile {
                ProfileOutcome::Stacks(text) => {
                    std::fs::write(
                        out.join("profiles")
                            .join(format!("r{round}-{}.folded", config.name)),
                        &text,
                    )?;
                    flamegraph::merge_into(stacks.entry(config.name.clone()).or_default(), &text);
                }
                ProfileOutcome::Unavailable(note) => {
                    notes.entry(config.name.clone()).or_default().push(note)
                }
            }
            measurements.push(output.measurement);
        }
    }
    drop(runtime);

    let baseline_of = |name: &str| {
        experiment
            .configs
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.baseline.clone())
            .unwrap_or_else(|| experiment.baseline.clone())
    };
    summary::set_ratios(&mut measurements, &baseline_of);
    let mut configs = Vec::with_capacity(experiment.configs.len());
    for config in &experiment.configs {
        let rounds: Vec<Measurement> = measurements
            .iter()
            .filter(|m| m.config == config.name)
            .cloned()
            .collect();
        let mut c = ConfigSummary::from_rounds(
            &config.name,
            config.description.clone(),
            [
                config.gateway_args.clone(),
                config.user_service_args.clone(),
                config.post_service_args.clone(),
            ],
            serde_json::to_value(&config.load)?,
            rounds,
        );
        c.gateways = config.gateways as u32;
        c.redis = config.redis;
        c.own_query = config.own_query;
        c.baseline = config.baseline.clone();
        let missing = notes.get(&config.name).cloned().unwrap_or_default();
        match stacks.get(&config.name) {
            Some(counts) if !counts.is_empty() => {
                let file = format!("flame-{}.svg", config.name);
                let sampled = settings.rounds as usize - missing.len();
                flamegraph::render_svg(
                    counts,
                    &format!("gateway — {}", config.name),
                    &format!(
                        "{} round(s) merged, {} Hz, run {run_id}; {}",
                        sampled,
                        experiment.profile.hz,
                        config.gateway_args.join(" ")
                    ),
                    &out.join(&file),
                )?;
                std::fs::write(
                    out.join("profiles").join(format!("{}.folded", config.name)),
                    flamegraph::to_collapsed(counts),
                )?;
                c.flamegraph = Some(file);
                if !missing.is_empty() {
                    c.flamegraph_note = Some(format!(
                        "flamegraph misses {} round(s): {}",
                        missing.len(),
                        missing[0]
                    ));
                }
            }
            _ => {
                let mut unique = missing.clone();
                unique.dedup();
                c.flamegraph_note = Some(
                    unique
                        .first()
                        .cloned()
                        .unwrap_or_else(|| "no flamegraph".into()),
                );
            }
        }
        configs.push(c);
    }
    let mut summary = Summary {
        schema: summary::SCHEMA.into(),
        run_id: run_id.clone(),
        experiment: experiment.name.clone(),
        baseline: experiment.baseline.clone(),
        rounds: settings.rounds,
        duration_s: settings.duration_s,
        warmup_s: settings.warmup_s,
        quick: settings.quick,
        configs,
        warnings: Vec::new(),
    };
    summary.derive_warnings();
    write_json(&out.join("summary.json"), &summary)?;
    let markdown = summary.to_markdown(&manifest::machine_line(&manifest));
    std::fs::write(out.join("summary.md"), &markdown)?;
    std::fs::write(out.join("chart.svg"), chart::render(&summary))?;
    update_latest(&out)?;
    println!("{markdown}");
    eprintln!("loadgen matrix: results in {}", out.display());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn matrix_args(extra: &[&str]) -> MatrixArgs {
        let mut argv = vec!["loadgen", "matrix"];
        argv.extend_from_slice(extra);
        match crate::cli::Cli::parse_from(argv).command {
            crate::cli::Command::Matrix(a) => a,
            _ => unreachable!("parsed a matrix command"),
        }
    }

    fn experiment(run: &str) -> Experiment {
        let text = format!(
            "{run}\n[query]\ndocument = \"{{a}}\"\nexpected = '{{}}'\n[[config]]\nname = \"a\"\n"
        );
        Experiment::parse(&text, Path::new("e.toml")).unwrap()
    }

    #[test]
    fn settings_follow_flags_then_file_then_defaults() {
        let plain = experiment("");
        let s = RunSettings::resolve(&matrix_args(&[]), &plain);
        assert_eq!(
            (s.rounds, s.duration_s, s.warmup_s, s.quick),
            (3, 10.0, 2.0, false)
        );
        let q = RunSettings::resolve(&matrix_args(&["--quick"]), &plain);
        assert_eq!(
            (q.rounds, q.duration_s, q.warmup_s, q.quick),
            (1, 3.0, 1.0, true)
        );
        let file = experiment("[run]\nrounds = 5\nduration = \"20s\"");
        let f = RunSettings::resolve(&matrix_args(&[]), &file);
        assert_eq!((f.rounds, f.duration_s, f.warmup_s), (5, 20.0, 2.0));
        let o = RunSettings::resolve(
            &matrix_args(&["--quick", "--rounds", "2", "--duration", "5s"]),
            &file,
        );
        assert_eq!((o.rounds, o.duration_s, o.warmup_s), (2, 5.0, 1.0));
    }

    #[test]
    fn redis_urls_replace_the_placeholder_and_instances_are_named() {
        let args: Vec<String> = ["--ttl", "10", "--redis", "{redis}", "--x={redis}/0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            with_redis_url(&args, Some("redis://127.0.0.1:7000")),
            [
                "--ttl",
                "10",
                "--redis",
                "redis://127.0.0.1:7000",
                "--x=redis://127.0.0.1:7000/0"
            ]
        );
        assert_eq!(with_redis_url(&args, None), args);
        assert_eq!(
            (0..3).map(gateway_name).collect::<Vec<_>>(),
            ["gateway", "gateway-2", "gateway-3"]
        );
        assert_eq!(max_of([Some(1.0), None, Some(3.0)].into_iter()), Some(3.0));
        assert_eq!(max_of([None, None].into_iter()), None);
    }

    #[test]
    fn missing_binaries_name_the_flag() {
        let err = Binaries::locate(Some(Path::new("/nonexistent-dir")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--bin-dir") && err.contains("gateway"),
            "{err}"
        );
    }

    #[test]
    fn latest_points_at_the_newest_run() {
        let base = std::env::temp_dir().join(format!("loadgen-latest-{}", std::process::id()));
        for run in ["one", "two"] {
            std::fs::create_dir_all(base.join(run)).unwrap();
            update_latest(&base.join(run)).unwrap();
        }
        assert_eq!(
            std::fs::read_link(base.join("latest")).unwrap(),
            Path::new("two")
        );
        std::fs::remove_dir_all(&base).ok();
    }
}
