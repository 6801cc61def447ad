//! Experiment files: what is sent (one query and its expected answer, or a workload),
//! and the configurations to compare.
//!
//! An experiment file is TOML (see `experiments/seed.toml` and `loadgen/README.md`). A
//! configuration is nothing more than the extra arguments of the services plus the
//! load settings, so new gateway flags need no change here. Loading checks every rule
//! up front and names the file, the configuration and the key at fault (and the line,
//! for what someone else's graph brings). The `[workload]` table (or the operations
//! file `[graph] operations` names) is read by [`crate::workload`], `[query]` by
//! [`super::query`], `[graph]` and `[[services.subgraph]]` by [`super::graph`].
//!
//! The file as written is `file`'s model, its checks and defaults are `parse`'s, and
//! what they give, the validated [`Experiment`], is here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::builds::GatewayBuild;
use super::graph::GraphSpec;
use super::network::NetworkSpec;
use super::peers::PeerConfig;
use super::query::QuerySpec;
use crate::workload::Workload;

mod file;
mod parse;
#[cfg(test)]
mod tests;

/// Flags the runner sets itself; a configuration may not pass them.
const RUNNER_OWNED_FLAGS: [&str; 5] = [
    "--listen",
    "--subgraph",
    "--profiling",
    "--supergraph",
    "--subgraph-url",
];
/// The share of answers that may carry errors before a configuration whose answers
/// are checked stops the run (`max_error_rate`, `--max-error-rate`).
pub const DEFAULT_MAX_ERROR_RATE: f64 = 0.01;
/// In a configuration's gateway arguments, replaced by its redis-server's URL.
pub const REDIS_PLACEHOLDER: &str = "{redis}";
/// In a configuration's gateway arguments, replaced by its Redis Cluster's seed URLs
/// (comma-separated, for `--redis-cluster`).
pub const REDIS_CLUSTER_PLACEHOLDER: &str = "{redis-cluster}";
/// In a configuration's gateway arguments, replaced by its edge cache's purge URL
/// (for `--edge-purge`).
pub const EDGE_PLACEHOLDER: &str = "{edge}";
/// In any service argument, replaced by the experiment file's directory (for policy
/// files next to the experiment).
pub const DIR_PLACEHOLDER: &str = "{dir}";
/// Most gateway instances one configuration may start.
pub const MAX_GATEWAYS: i64 = 16;

/// Why an experiment file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    /// A message that names its own file and line (`ops.toml:12: …`).
    #[error("{message}")]
    Located { message: String },
}

/// Load settings of one configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadSpec {
    pub connections: usize,
    pub threads: usize,
    /// Open loop at this many requests per second; closed loop when absent.
    pub rate: Option<f64>,
    #[serde(serialize_with = "seconds")]
    pub timeout: Duration,
}

/// Round count and window lengths the file asks for (the command line may override).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunSpec {
    pub rounds: Option<u32>,
    #[serde(serialize_with = "optional_seconds")]
    pub duration: Option<Duration>,
    #[serde(serialize_with = "optional_seconds")]
    pub warmup: Option<Duration>,
}

/// Flamegraph sampling of the gateway.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileSpec {
    /// Sample the gateway during the measured window.
    pub enabled: bool,
    /// Sampling frequency.
    pub hz: u32,
    /// Who samples: `perf`, the gateway's own endpoint, or `auto` (perf where it works).
    pub tool: ProfileTool,
}

/// Who takes the gateway's profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProfileTool {
    /// `perf record` where perf is installed and allowed, else the endpoint.
    Auto,
    /// `perf record -e cpu-clock` on the gateway's PID (fails the run without perf).
    Perf,
    /// The gateway's own `GET /debug/profile` (started with `--profiling`).
    Endpoint,
}

/// One configuration: the services' extra arguments and the load.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigSpec {
    pub name: String,
    pub description: Option<String>,
    pub gateway_args: Vec<String>,
    pub user_service_args: Vec<String>,
    pub post_service_args: Vec<String>,
    pub load: LoadSpec,
    /// The query this configuration is measured with: its own, or the top-level one.
    /// `None` when it sends the experiment's workload instead.
    pub query: Option<QuerySpec>,
    /// The experiment's workload, when the configuration has no query of its own.
    pub workload: Option<Arc<Workload>>,
    /// Whether `query` is the configuration's own (`query = {…}` in `[[config]]`).
    pub own_query: bool,
    /// Start a redis-server for this configuration and round.
    pub redis: bool,
    /// Start a Redis Cluster for this configuration and round (`redis = "cluster"`).
    pub redis_cluster: bool,
    /// Gateway instances, loaded round robin.
    pub gateways: usize,
    /// Start Varnish in front of the gateway, and send the load through it
    /// (`edge = "varnish"`).
    pub edge: bool,
    /// Its own baseline configuration, if not the file's.
    pub baseline: Option<String>,
    /// Whether the answer is checked before and after the window.
    pub check: bool,
    /// The services the gateways reach through a latency proxy (none by default).
    pub network: NetworkSpec,
    /// The graph its gateways federate.
    pub graph: Arc<GraphSpec>,
    /// Every argument of each subgraph the runner starts, by subgraph name (the
    /// lab's `user` and `post` included).
    pub subgraph_args: BTreeMap<String, Vec<String>>,
    /// The share of answers with errors past which the run stops; `None`: no limit.
    pub max_error_rate: Option<f64>,
    /// The gateway build it runs (`build = {...}`); `None`: the one beside loadgen.
    pub build: Option<GatewayBuild>,
    /// That build's binary, once [`crate::matrix::builds::prepare`] resolved it.
    pub gateway_binary: Option<PathBuf>,
    /// A peer gateway that runs in place of the lab's (`peer = "NAME"`).
    pub peer: Option<PeerConfig>,
    /// A gateway the runner does not start (`url = "http://…"`): nothing is started
    /// for the configuration, and the load goes to that address and path.
    pub external: Option<crate::matrix::peers::external::ExternalGateway>,
    /// Why its answers are expected to differ (`expected_difference = "…"`): a
    /// difference found by the checks is recorded and reported, not a stop.
    pub expected_difference: Option<String>,
}

impl ConfigSpec {
    /// The path every request of this configuration goes to: a gateway at a URL's own
    /// (`url = ...`), else its query's or its workload's.
    pub fn path(&self) -> &str {
        if let Some(external) = &self.external {
            return &external.path;
        }
        match (&self.query, &self.workload) {
            (Some(query), _) => &query.path,
            (None, Some(workload)) => workload.path(),
            (None, None) => "/graphql",
        }
    }
}

/// A validated experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    pub name: String,
    pub description: Option<String>,
    /// The configuration ratios are taken against.
    pub baseline: String,
    /// The top-level `[query]`, if the file has one (every configuration may have its own).
    pub query: Option<QuerySpec>,
    /// The top-level `[workload]`, if the file has one (instead of `[query]`).
    pub workload: Option<Arc<Workload>>,
    pub run: RunSpec,
    pub profile: ProfileSpec,
    pub configs: Vec<ConfigSpec>,
    /// The graph every configuration federates.
    pub graph: Arc<GraphSpec>,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn optional_seconds<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

impl Experiment {
    /// Keep only the configurations `only` names (all when empty), less those `skip`
    /// names (`loadgen matrix --only/--skip`). Unknown names, and leaving out a baseline
    /// that a kept configuration's ratios need, are refused naming the flag.
    pub fn select(&mut self, only: &[String], skip: &[String]) -> Result<(), String> {
        for (flag, names) in [("--only", only), ("--skip", skip)] {
            if let Some(unknown) = names
                .iter()
                .find(|n| !self.configs.iter().any(|c| c.name == **n))
            {
                let known: Vec<&str> = self.configs.iter().map(|c| c.name.as_str()).collect();
                return Err(format!(
                    "{flag}: {unknown:?} is not a configuration of {:?} ({})",
                    self.name,
                    known.join(", ")
                ));
            }
        }
        self.configs
            .retain(|c| (only.is_empty() || only.contains(&c.name)) && !skip.contains(&c.name));
        if self.configs.is_empty() {
            return Err("--only/--skip leave no configuration to run".into());
        }
        let flag = if only.is_empty() { "--skip" } else { "--only" };
        for c in &self.configs {
            let baseline = c.baseline.as_ref().unwrap_or(&self.baseline);
            if !self.configs.iter().any(|k| k.name == *baseline) {
                return Err(format!(
                    "{flag}: {:?} is measured against {baseline:?}, which would not run",
                    c.name
                ));
            }
        }
        Ok(())
    }
}
