//! `loadgen matrix`: run every configuration of an experiment, round after round.
//!
//! Rounds are interleaved, and their order rotates (A B C D, B C D A, …: [`order`]), so
//! that drift on a shared machine hits every configuration alike. The steps, each in
//! its own file along the data's path:
//!
//! - [`experiment`]: the experiment file; [`settings`]: rounds, windows, binaries;
//!   [`order`]: which configuration runs when in each round; [`eta`]: how far the run
//!   has come and about how long it has left;
//! - [`lifecycle`] (with [`services`], [`redis_server`], [`redis_cluster`], [`network`],
//!   [`http_probe`]): start fresh processes on free ports (latency proxies in front of
//!   the services a configuration puts across a network), wait for `/health`, check the
//!   answer, stop by PID;
//!   [`reaper`]: on SIGTERM or SIGINT, every process the run started is stopped by PID
//!   and the run's folder marked `INCOMPLETE`;
//! - [`measure`]: one configuration in one round, the window and what is sampled at its
//!   edges: [`sampling`] (CPU per process, RSS), [`scraping`] (`/metrics`), [`profile`]
//!   (perf or the gateway's endpoint);
//! - [`aggregation`]: ratios within rounds, medians over them, warnings;
//! - [`summary`] (the data model), [`record`] (`runs/*.json`), [`manifest`], and
//!   [`render`] (`summary.md`, charts, pages); [`disturbance`] says what disturbed a
//!   run; [`report`] writes the run's `index.html` and the results folder's; [`compare`]
//!   sets two runs side by side.
//!
//! A wrong answer aborts the run (before or after a window); wrong answers a workload
//! finds during the load are counted, reported loudly, and fail the command at the end.

pub mod aggregation;
pub mod answer_diff;
pub mod builds;
pub mod cache_figures;
pub mod calibration;
pub mod compare;
pub mod confidence;
pub mod disturbance;
pub mod edge_cache;
pub mod error_budget;
pub mod eta;
pub mod experiment;
pub mod graph;
pub mod http_probe;
pub mod lifecycle;
pub mod manifest;
pub mod measure;
pub mod network;
pub mod order;
pub mod peers;
pub mod profile;
pub mod progress;
pub mod query;
pub mod reaper;
pub mod record;
pub mod redis_cluster;
pub mod redis_server;
pub mod render;
pub mod report;
pub mod sampling;
pub mod scraping;
pub mod services;
pub mod settings;
pub mod summary;
pub mod validation;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{anyhow, bail, Context};
use serde::Serialize;

use self::aggregation::set_ratios;
use self::experiment::{Experiment, ProfileTool};
use self::manifest::Manifest;
use self::measure::{run_configuration, Profiler, RunContext};
use self::profile::flamegraph;
use self::profile::ProfileOutcome;
use self::render::chart;
use self::settings::{Binaries, RunSettings, GATEWAY};
use self::summary::{ConfigSummary, Measurement, Summary};
use crate::cli::MatrixArgs;
use crate::proc_usage;

/// Decide who profiles the gateway: perf where it works (unless the file says
/// `endpoint`), the gateway's endpoint otherwise.
fn choose_profiler(experiment: &Experiment) -> anyhow::Result<Profiler> {
    if !experiment.profile.enabled {
        return Ok(Profiler::Off(
            "profiling disabled in the experiment file".into(),
        ));
    }
    match experiment.profile.tool {
        ProfileTool::Endpoint => Ok(Profiler::Endpoint),
        ProfileTool::Perf => profile::perf::find()
            .map(Profiler::Perf)
            .map_err(|e| anyhow!("[profile] tool = \"perf\": {e}")),
        ProfileTool::Auto => {
            Ok(match profile::perf::find() {
                Ok(perf) => Profiler::Perf(perf),
                Err(why) => {
                    eprintln!("loadgen matrix: {why}; profiling through the gateway's /debug/profile instead");
                    Profiler::Endpoint
                }
            })
        }
    }
}

/// `chart.svg`, and where the run has their figures `tradeoff.svg`, `overload.svg` and
/// `timeline.svg`, drawn from the summary.
pub fn write_charts(out: &Path, summary: &Summary) -> anyhow::Result<()> {
    let write = |name: &str, svg: String| {
        std::fs::write(out.join(name), svg)
            .with_context(|| format!("writing {}", out.join(name).display()))
    };
    write("chart.svg", chart::render(summary))?;
    for (name, svg) in [
        ("tradeoff.svg", render::tradeoff::render(summary)),
        ("overload.svg", render::overload::render(summary)),
        ("timeline.svg", render::timeline::render(summary)),
    ] {
        if let Some(svg) = svg {
            write(name, svg)?;
        }
    }
    Ok(())
}

/// `summary.md` and the charts of a run; returns the Markdown.
fn write_renderings(out: &Path, summary: &Summary, machine: &str) -> anyhow::Result<String> {
    let markdown = summary.to_markdown(machine);
    std::fs::write(out.join("summary.md"), &markdown)?;
    write_charts(out, summary)?;
    Ok(markdown)
}

/// `loadgen render DIR`: write a run's summary.md and charts again from its
/// summary.json and manifest.json (after loadgen's rendering changed); the measurements
/// are not touched, and summary.json is not rewritten.
pub fn rerender(dir: &Path) -> anyhow::Result<()> {
    let summary = compare::load_summary(dir)?;
    let manifest =
        manifest::load(dir)?.ok_or_else(|| anyhow!("{}: no manifest.json", dir.display()))?;
    write_renderings(dir, &summary, &manifest::machine_line(&manifest))?;
    let (page, index) = report::write_pages(dir)?;
    eprintln!(
        "loadgen render: summary.md and charts rewritten in {}; page {}, index {}",
        dir.display(),
        page.display(),
        index.display()
    );
    Ok(())
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
    args.check()?;
    let experiment_text = std::fs::read_to_string(&args.config)
        .map_err(|e| anyhow!("--config {}: {e}", args.config.display()))?;
    let mut experiment = Experiment::parse(&experiment_text, &args.config)?;
    experiment
        .select(&args.only, &args.skip)
        .map_err(|e| anyhow!(e))?;
    let settings = RunSettings::resolve(args, &experiment);
    // A configuration that needs redis-server fails the run before anything starts.
    let redis_binary = match experiment
        .configs
        .iter()
        .find(|c| c.redis || c.redis_cluster)
    {
        None => None,
        Some(c) => Some(
            redis_server::find_on_path()
                .ok_or_else(|| anyhow!(redis_server::missing_message(&experiment.name, &c.name)))?,
        ),
    };
    let binaries = Binaries::locate(args.bin_dir.as_deref())?;
    let resolved_builds = builds::resolve(&mut experiment.configs)?;
    // Every peer gateway the run starts, installed and its versions read, before
    // anything starts.
    let peer_configs: Vec<(String, peers::PeerConfig)> = experiment
        .configs
        .iter()
        .filter_map(|c| Some((c.name.clone(), c.peer.clone()?)))
        .collect();
    let prepared_peers = peers::install::prepare(&peer_configs, args.install_peers)?;
    // Every subgraph binary the run starts, found before anything starts.
    let mut started_binaries = Vec::new();
    for (_, started) in experiment.graph.started() {
        let path = binaries.find(&started.binary).map_err(|e| {
            anyhow!(
                "experiment {:?}: subgraph {}: {e}",
                experiment.name,
                started.process
            )
        })?;
        if !started_binaries.iter().any(|(_, p)| *p == path) {
            started_binaries.push((started.binary.clone(), path));
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    // Someone else's subgraphs answer, or nothing starts.
    runtime
        .block_on(experiment.graph.check_reachable())
        .map_err(|e| anyhow!(e))?;

    let (timestamp, run_id) = manifest::utc_stamps(SystemTime::now());
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => default_out_dir(&run_id),
    };
    for sub in ["logs", "runs", "profiles"] {
        std::fs::create_dir_all(out.join(sub))
            .with_context(|| format!("creating {}", out.join(sub).display()))?;
    }
    reaper::watch(&out);
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
        round_order: order::by_name(
            &experiment
                .configs
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            settings.rounds,
        ),
        binaries: std::iter::once(manifest::binary_info(GATEWAY, &binaries.gateway))
            .chain(
                started_binaries
                    .iter()
                    .map(|(name, path)| manifest::binary_info(name, path)),
            )
            .chain(
                resolved_builds
                    .iter()
                    .map(builds::ResolvedBuild::binary_info),
            )
            .chain([manifest::binary_info("loadgen", &std::env::current_exe()?)])
            .chain(
                redis_binary
                    .as_deref()
                    .map(|p| manifest::binary_info(redis_server::REDIS_SERVER, p)),
            )
            .collect(),
        builds: resolved_builds,
        peers: prepared_peers.clone(),
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

    let profiler = choose_profiler(&experiment)?;
    let mut progress =
        progress::RunProgress::start(experiment.configs.len() * settings.rounds as usize);
    let ctx = RunContext {
        runtime: &runtime,
        experiment: &experiment,
        settings,
        binaries: &binaries,
        redis_binary: redis_binary.as_deref(),
        profiler: profiler.clone(),
        out: &out,
        progress_bars: progress.bars(),
        peers: prepared_peers.as_ref(),
    };
    let mut measurements = Vec::new();
    let mut stacks: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut notes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut stopped: Option<String> = None;
    'rounds: for round in 1..=settings.rounds {
        for index in order::of_round(experiment.configs.len(), round) {
            let config = &experiment.configs[index];
            progress.window_started(round, settings.rounds, &config.name);
            let output = run_configuration(&ctx, config, round).map_err(|e| {
                e.context(format!(
                    "aborting the run (files so far in {})",
                    out.display()
                ))
            })?;
            let m = &output.measurement;
            let freshness = m.workload.as_ref().map_or(String::new(), |w| {
                format!(
                    "  stale {}/{}  wrong {}",
                    w.stale_reads, w.reads_checked, w.wrong_answers
                )
            });
            progress.window_done(&format!(
                "  round {round}/{} {:<12} {:>9.0} req/s  p50 {}  p99 {}  errors {}{freshness}{}",
                settings.rounds,
                config.name,
                m.requests_per_sec,
                crate::bench::report::ms(m.p50_ms),
                crate::bench::report::ms(m.p99_ms),
                m.errors.total(),
                m.profile_note
                    .as_deref()
                    .map(|n| format!("  [{n}]"))
                    .unwrap_or_default(),
            ));
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
            let limit = args.max_error_rate.or(config.max_error_rate);
            let verdict = error_budget::check(&output.measurement, limit);
            measurements.push(output.measurement);
            if let Err(why) = verdict {
                stopped = Some(why);
                break 'rounds;
            }
        }
    }
    progress.finish();
    drop(runtime);

    let baseline_of = |name: &str| {
        experiment
            .configs
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.baseline.clone())
            .unwrap_or_else(|| experiment.baseline.clone())
    };
    set_ratios(&mut measurements, &baseline_of);
    let mut configs = Vec::with_capacity(experiment.configs.len());
    for config in &experiment.configs {
        let rounds: Vec<Measurement> = measurements
            .iter()
            .filter(|m| m.config == config.name)
            .cloned()
            .collect();
        if rounds.is_empty() {
            // A run stopped before this configuration's first round.
            continue;
        }
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
        c.expected_difference = config.expected_difference.clone();
        c.peer = prepared_peers
            .as_ref()
            .and_then(|p| p.configs.iter().find(|r| r.config == config.name).cloned())
            .or_else(|| config.external.as_ref().map(|e| e.record(&config.name)));
        if !config.graph.lab {
            c.subgraph_args = config.subgraph_args.clone();
        }
        c.max_error_rate = args.max_error_rate.or(config.max_error_rate);
        c.redis = config.redis;
        c.own_query = config.own_query;
        c.network = config.network.describe();
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
                        "{} round(s) merged, {} Hz ({}), run {run_id}; {}",
                        sampled,
                        experiment.profile.hz,
                        profiler.name(),
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
    profile::differential::write_all(&out, &mut configs, &stacks, &baseline_of, &run_id)?;
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
    summary.derive_intervals();
    if let Some(why) = &stopped {
        summary.warnings.insert(
            0,
            format!("**STOPPED**: {why}. The rounds before are kept."),
        );
    }
    write_json(&out.join("summary.json"), &summary)?;
    let markdown = write_renderings(&out, &summary, &manifest::machine_line(&manifest))?;
    update_latest(&out)?;
    let (page, index) = report::write_pages(&out)?;
    println!("{markdown}");
    eprintln!(
        "loadgen matrix: results in {}; open {} (all runs: {})",
        out.display(),
        page.display(),
        index.display()
    );
    if let Some(why) = stopped {
        bail!(
            "STOPPED: {why}; the rounds measured so far are in {}",
            out.display()
        );
    }
    // Wrong answers fail the run, but for a configuration that declares them expected
    // (`expected_difference`): the report counts and names those.
    let wrong: u64 = summary
        .configs
        .iter()
        .filter(|c| c.expected_difference.is_none())
        .filter_map(|c| c.median.wrong_answers)
        .sum();
    if wrong > 0 {
        bail!(
            "WRONG ANSWERS: {wrong} answer(s) in this run could not be right; see the notes in {}",
            out.join("summary.md").display()
        );
    }
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
            (5, 10.0, 2.0, false)
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
        use self::lifecycle::{gateway_name, with_redis_url};
        use self::measure::max_of;
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
