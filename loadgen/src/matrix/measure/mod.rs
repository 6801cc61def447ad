//! One configuration in one round, from start to stop: start its processes, check the
//! answer, warm up, measure (bench on its own thread; CPU, RSS, metrics and the profile
//! sampled at the window's edges), check again, stop, and turn what was seen into a
//! [`Measurement`] and a [`RunRecord`].
//!
//! The files follow the round: `window` starts the load and watches the processes
//! while it runs (the bench plan, the window's edges), `output` turns what the
//! window saw into figures and records (and the profile into stacks).

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::matrix::experiment::{ConfigSpec, Experiment};
use crate::matrix::lifecycle::{Launch, Stack, AFTER_LOAD_DEADLINE, PROBE_DEADLINE};
use crate::matrix::peers::install::PreparedPeers;
use crate::matrix::profile::ProfileOutcome;
use crate::matrix::record::{RunRecord, ServiceRecord};
use crate::matrix::settings::{Binaries, RunSettings};
use crate::matrix::summary::Measurement;

mod output;
mod window;

pub use output::max_of;
use output::{profile_of, round_output};
use window::measure_window;

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
    /// The run's progress bars, which each window's live line joins (none when stderr
    /// is not a terminal).
    pub progress_bars: Option<indicatif::MultiProgress>,
    /// node and the peers' folders, when a configuration runs a peer gateway.
    pub peers: Option<&'a PreparedPeers>,
}

/// What one configuration's run in one round produced.
pub struct RoundOutput {
    pub measurement: Measurement,
    pub record: RunRecord,
    pub profile: ProfileOutcome,
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
            peers: ctx.peers,
        },
        config,
    )
    .with_context(|| format!("round {round}, {}", config.name))?;
    // The lab's gateway validates what is sent without running it; a peer cannot, and
    // is judged by its answers alone.
    if !stack.peer {
        rt.block_on(super::validation::validate(
            stack.gateways[0].0.addr,
            config,
        ))
        .with_context(|| format!("round {round}, {}", config.name))?;
    }
    let mut differences = Vec::new();
    if config.check {
        differences.extend(stack.check(rt, config, &format!("round {round}"), PROBE_DEADLINE)?);
    }
    let mut window = measure_window(ctx, config, round, &stack, &tag)?;
    if config.check {
        differences.extend(stack.check(
            rt,
            config,
            &format!("round {round}, after the measurement"),
            AFTER_LOAD_DEADLINE,
        )?);
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
    let mut output = round_output(
        ctx, config, round, window, services, redis_url, profile, figures,
    )?;
    output.measurement.answer_differences = differences.clone();
    output.record.answer_differences = differences;
    Ok(output)
}
