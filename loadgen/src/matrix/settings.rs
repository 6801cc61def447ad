//! What a run needs before it starts: the rounds and windows in force, and where the
//! service binaries are.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context};
use serde::Serialize;

use super::experiment::Experiment;
use crate::cli::MatrixArgs;

/// Binaries the runner starts, by file name.
pub const GATEWAY: &str = "gateway";
pub const USER_SERVICE: &str = "user-service";
pub const POST_SERVICE: &str = "post-service";

/// Defaults when neither the command line nor the experiment file says.
/// Rounds when neither the file nor `--rounds` says: the A/A calibration (run
/// 20261207-063912, docs/matrix.md "How sure a ratio is") found the gateway's CPU per
/// request told apart from noise at ±28% with 3 rounds and ±14% with 5, and no false
/// alarm rate above 5% at either.
const DEFAULT_ROUNDS: u32 = 5;
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

    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration_s)
    }

    pub fn warmup(&self) -> Duration {
        Duration::from_secs_f64(self.warmup_s)
    }
}

/// Where the service binaries are: the gateway, and the subgraphs the runner starts.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub gateway: PathBuf,
    /// Where a binary named without a directory is looked for.
    pub dir: PathBuf,
    /// How `dir` was chosen, for messages.
    flag: &'static str,
}

impl Binaries {
    /// Find the gateway in `dir`, or next to the running loadgen (the same build).
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
        let mut binaries = Binaries {
            gateway: PathBuf::new(),
            dir,
            flag,
        };
        binaries.gateway = binaries.find(GATEWAY)?;
        Ok(binaries)
    }

    /// The binary `name`: a path when it holds a `/`, else the file of that name in
    /// the binaries' directory.
    pub fn find(&self, name: &str) -> anyhow::Result<PathBuf> {
        let path = if name.contains('/') {
            PathBuf::from(name)
        } else {
            self.dir.join(name)
        };
        if path.is_file() {
            Ok(path)
        } else if name.contains('/') {
            Err(anyhow!("{name} not found (a [[services.subgraph]] binary)"))
        } else {
            Err(anyhow!(
                "{name} not found in {} ({}); build the workspace first, e.g. `cargo build --release --workspace`",
                self.dir.display(),
                self.flag
            ))
        }
    }
}
