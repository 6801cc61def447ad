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

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use std::sync::Arc;

use std::collections::BTreeMap;

use super::graph::{GraphFile, GraphSpec, SubgraphServiceFile};
use super::network::{NetworkFile, NetworkSpec};
use super::query::{resolve_query, QueryFile, QuerySpec};
use crate::cli::{parse_duration, parse_duration_or_zero};
use crate::workload::spec::WorkloadFile;
use crate::workload::Workload;

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

/// Whether `message` starts with a place (`file:12: `).
fn is_located(message: &str) -> bool {
    message.split_once(": ").is_some_and(|(head, _)| {
        head.rsplit_once(':').is_some_and(|(file, line)| {
            !file.is_empty() && !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit())
        })
    })
}

/// The file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExperimentFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    baseline: Option<String>,
    #[serde(default)]
    query: Option<QueryFile>,
    /// Instead of one query: a mix of operations (see `crate::workload::spec`).
    #[serde(default)]
    workload: Option<WorkloadFile>,
    /// Someone else's graph: a supergraph, subgraphs at URLs, an operations file.
    #[serde(default)]
    graph: Option<GraphFile>,
    /// The share of answers with errors past which the run stops (every
    /// configuration's default; `check = false` ones have no limit unless this says).
    #[serde(default)]
    max_error_rate: Option<f64>,
    /// Arguments every configuration passes before its own.
    #[serde(default)]
    services: ServicesFile,
    #[serde(default)]
    load: LoadFile,
    #[serde(default)]
    run: RunFile,
    #[serde(default)]
    profile: ProfileFile,
    #[serde(default, rename = "config")]
    configs: Vec<ConfigFile>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadFile {
    connections: Option<i64>,
    threads: Option<i64>,
    rate: Option<f64>,
    timeout: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServicesFile {
    #[serde(default)]
    gateway: Vec<String>,
    #[serde(default)]
    user_service: Vec<String>,
    #[serde(default)]
    post_service: Vec<String>,
    /// Subgraphs the runner starts instead of the lab's two.
    #[serde(default)]
    subgraph: Vec<SubgraphServiceFile>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunFile {
    rounds: Option<i64>,
    duration: Option<String>,
    warmup: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    enabled: Option<bool>,
    hz: Option<i64>,
    tool: Option<String>,
}

/// `redis = true | false | "cluster"` in a `[[config]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum RedisChoice {
    Server(bool),
    Named(String),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    gateway: Vec<String>,
    #[serde(default)]
    user_service: Vec<String>,
    #[serde(default)]
    post_service: Vec<String>,
    #[serde(default)]
    load: LoadFile,
    /// This configuration's own query, replacing the top-level `[query]`.
    #[serde(default)]
    query: Option<QueryFile>,
    /// Start a private redis-server for this configuration (`true`: `{redis}` in its
    /// gateway arguments becomes its URL) or a private three-master Redis Cluster
    /// (`"cluster"`: `{redis-cluster}` becomes its seed URLs).
    #[serde(default)]
    redis: Option<RedisChoice>,
    /// Gateway instances to start and load round robin (default 1).
    #[serde(default)]
    gateways: Option<i64>,
    /// The configuration this one's ratios are taken against (default: the file's
    /// `baseline`); for experiments made of pairs, such as cache on/off per size.
    #[serde(default)]
    baseline: Option<String>,
    /// Check the answer before and after the window (default true). `false` for a
    /// configuration with injected faults, whose answers may carry errors by design.
    #[serde(default)]
    check: Option<bool>,
    /// Services put behind a `loadgen netproxy` with a round-trip time ([`super::network`]).
    #[serde(default)]
    network: Option<NetworkFile>,
    /// Extra arguments per subgraph of `[[services.subgraph]]`, by name.
    #[serde(default)]
    subgraphs: BTreeMap<String, Vec<String>>,
    /// This configuration's error limit (over the file's `max_error_rate`).
    #[serde(default)]
    max_error_rate: Option<f64>,
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

/// Load settings used where neither `[load]` nor a configuration says otherwise.
/// One thread and 100 connections, as wrk -t1 -c100 and autocannon in the talk.
const DEFAULT_CONNECTIONS: usize = 100;
const DEFAULT_THREADS: usize = 1;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default flamegraph sampling rate: under the ~215 samples/s the kernel tick allows,
/// and off the 100 Hz beat of timers.
const DEFAULT_PROFILE_HZ: u32 = 99;

impl Experiment {
    /// Read and validate an experiment file.
    pub fn load(path: &Path) -> Result<Experiment, ExperimentError> {
        let text = std::fs::read_to_string(path).map_err(|source| ExperimentError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Experiment::parse(&text, path)
    }

    /// Validate the text of an experiment file; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Experiment, ExperimentError> {
        let file: ExperimentFile = toml::from_str(text).map_err(|e| ExperimentError::Syntax {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let invalid = |message: String| {
            if is_located(&message) {
                ExperimentError::Located { message }
            } else {
                ExperimentError::Invalid {
                    path: path.to_path_buf(),
                    message,
                }
            }
        };

        let base_dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let top_query = file
            .query
            .map(|q| resolve_query(q, "query", &base_dir))
            .transpose()
            .map_err(invalid)?;
        let graph = Arc::new(
            GraphSpec::resolve(
                file.graph.clone(),
                file.services.subgraph.clone(),
                text,
                path,
                &base_dir,
            )
            .map_err(invalid)?,
        );
        let origin = crate::workload::source::Origin::of(
            text,
            path,
            crate::workload::source::Table::Workload,
        );
        let mut workload = file
            .workload
            .map(|w| Workload::from_file_in(w, &origin))
            .transpose()
            .map_err(invalid)?
            .map(Arc::new);
        if let Some(ops) = &graph.operations {
            if workload.is_some() {
                return Err(invalid(
                    "give either [workload] or [graph] operations, not both".into(),
                ));
            }
            workload = Some(Arc::new(
                crate::workload::load::read_operations_file(ops)
                    .map_err(|e| invalid(format!("graph.operations: {e}")))?,
            ));
        }
        if top_query.is_some() && workload.is_some() {
            return Err(invalid(
                "give either [query] or [workload] (or [graph] operations), not both (a configuration may still have its own query)"
                    .into(),
            ));
        }
        if !graph.lab {
            for (key, args) in [
                ("services.user_service", &file.services.user_service),
                ("services.post_service", &file.services.post_service),
            ] {
                if !args.is_empty() {
                    return Err(invalid(format!(
                        "{key}: this experiment brings its own graph ([graph] or [[services.subgraph]]); user-service and post-service are not started"
                    )));
                }
            }
        }
        let file_error_rate = file
            .max_error_rate
            .map(|r| error_rate(r, "max_error_rate"))
            .transpose()
            .map_err(invalid)?;
        for (key, args) in [
            ("services.gateway", &file.services.gateway),
            ("services.user_service", &file.services.user_service),
            ("services.post_service", &file.services.post_service),
        ] {
            if let Some(flag) = runner_owned(args) {
                return Err(invalid(format!(
                    "{key} passes {flag}, which the runner sets itself"
                )));
            }
            if args.iter().any(|a| a.contains(REDIS_PLACEHOLDER)) {
                return Err(invalid(format!(
                    "{key} uses {REDIS_PLACEHOLDER}: only a configuration with redis = true may"
                )));
            }
            if args.iter().any(|a| a.contains(REDIS_CLUSTER_PLACEHOLDER)) {
                return Err(invalid(format!(
                    "{key} uses {REDIS_CLUSTER_PLACEHOLDER}: only a configuration with redis = \"cluster\" may"
                )));
            }
        }
        let dir_text = base_dir.display().to_string();
        let with_common = |common: &[String], own: Vec<String>| -> Vec<String> {
            common
                .iter()
                .chain(&own)
                .map(|a| a.replace(DIR_PLACEHOLDER, &dir_text))
                .collect()
        };

        let run = RunSpec {
            rounds: match file.run.rounds {
                None => None,
                Some(n) if (1..=1000).contains(&n) => Some(n as u32),
                Some(n) => return Err(invalid(format!("run.rounds = {n}: must be 1 to 1000"))),
            },
            duration: file
                .run
                .duration
                .map(|d| parse_duration(&d).map_err(|e| invalid(format!("run.duration: {e}"))))
                .transpose()?,
            warmup: file
                .run
                .warmup
                .map(|d| {
                    parse_duration_or_zero(&d).map_err(|e| invalid(format!("run.warmup: {e}")))
                })
                .transpose()?,
        };
        let profile = ProfileSpec {
            enabled: file.profile.enabled.unwrap_or(true),
            hz: match file.profile.hz {
                None => DEFAULT_PROFILE_HZ,
                Some(hz) if (1..=1000).contains(&hz) => hz as u32,
                Some(hz) => return Err(invalid(format!("profile.hz = {hz}: must be 1 to 1000"))),
            },
            tool: match file.profile.tool.as_deref() {
                None | Some("auto") => ProfileTool::Auto,
                Some("perf") => ProfileTool::Perf,
                Some("endpoint") => ProfileTool::Endpoint,
                Some(other) => {
                    return Err(invalid(format!(
                        "profile.tool = {other:?}: use auto, perf or endpoint"
                    )))
                }
            },
        };
        let defaults = resolve_load(&file.load, None, "load").map_err(invalid)?;

        if file.configs.is_empty() {
            return Err(invalid(
                "no [[config]] entries: an experiment needs at least one configuration".into(),
            ));
        }
        let mut configs = Vec::with_capacity(file.configs.len());
        for (i, c) in file.configs.into_iter().enumerate() {
            let at = format!("config #{} ({:?})", i + 1, c.name);
            if c.name.is_empty()
                || !c
                    .name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'))
            {
                return Err(invalid(format!(
                    "{at}: name must be non-empty and use only letters, digits, '-', '_' and '.' (it names files)"
                )));
            }
            if configs.iter().any(|k: &ConfigSpec| k.name == c.name) {
                return Err(invalid(format!("{at}: the name is used twice")));
            }
            for (key, args) in [
                ("gateway", &c.gateway),
                ("user_service", &c.user_service),
                ("post_service", &c.post_service),
            ] {
                if let Some(flag) = runner_owned(args) {
                    return Err(invalid(format!(
                        "{at}: {key} passes {flag}, which the runner sets itself"
                    )));
                }
            }
            let load =
                resolve_load(&c.load, Some(&defaults), &format!("{at}: load")).map_err(invalid)?;
            let own_query = c.query.is_some();
            let (query, config_workload) = match c.query {
                Some(q) => (
                    Some(resolve_query(q, &format!("{at}: query"), &base_dir).map_err(invalid)?),
                    None,
                ),
                None if workload.is_some() => (None, workload.clone()),
                None => (
                    Some(top_query.clone().ok_or_else(|| {
                        invalid(format!(
                            "{at} has no query of its own and the file has no top-level [query] or [workload]"
                        ))
                    })?),
                    None,
                ),
            };
            let (redis, redis_cluster) = match &c.redis {
                None | Some(RedisChoice::Server(false)) => (false, false),
                Some(RedisChoice::Server(true)) => (true, false),
                Some(RedisChoice::Named(name)) if name == "cluster" => (false, true),
                Some(RedisChoice::Named(other)) => {
                    return Err(invalid(format!(
                        "{at}: redis = {other:?}: expected true, false or \"cluster\""
                    )))
                }
            };
            for (key, args) in [
                ("user_service", &c.user_service),
                ("post_service", &c.post_service),
            ] {
                for placeholder in [REDIS_PLACEHOLDER, REDIS_CLUSTER_PLACEHOLDER] {
                    if args.iter().any(|a| a.contains(placeholder)) {
                        return Err(invalid(format!(
                            "{at}: {key} uses {placeholder}, which only gateway arguments may use"
                        )));
                    }
                }
            }
            if !redis_cluster
                && c.gateway
                    .iter()
                    .any(|a| a.contains(REDIS_CLUSTER_PLACEHOLDER))
            {
                return Err(invalid(format!(
                    "{at}: gateway uses {REDIS_CLUSTER_PLACEHOLDER} but the configuration does not say redis = \"cluster\""
                )));
            }
            if !redis && c.gateway.iter().any(|a| a.contains(REDIS_PLACEHOLDER)) {
                return Err(invalid(format!(
                    "{at}: gateway uses {REDIS_PLACEHOLDER} but the configuration does not say redis = true"
                )));
            }
            let proxied: Vec<String> = graph.started().map(|(_, s)| s.network.clone()).collect();
            let network = NetworkSpec::resolve(c.network.unwrap_or_default(), &at, redis, &proxied)
                .map_err(invalid)?;
            if !graph.lab {
                for (key, args) in [
                    ("user_service", &c.user_service),
                    ("post_service", &c.post_service),
                ] {
                    if !args.is_empty() {
                        return Err(invalid(format!(
                            "{at}: {key}: this experiment brings its own graph; give a subgraph's arguments in subgraphs = {{ NAME = [...] }}"
                        )));
                    }
                }
            }
            if let Some(unknown) = c
                .subgraphs
                .keys()
                .find(|k| graph.lab || !graph.started().any(|(n, _)| n == k.as_str()))
            {
                let started: Vec<&str> = graph.started().map(|(n, _)| n).collect();
                return Err(invalid(format!(
                    "{at}: subgraphs.{unknown}: not a [[services.subgraph]] the runner starts ({})",
                    if graph.lab {
                        "the lab's own graph takes user_service and post_service".to_string()
                    } else {
                        started.join(", ")
                    }
                )));
            }
            for (name, args) in &c.subgraphs {
                if let Some(flag) = runner_owned(args) {
                    return Err(invalid(format!(
                        "{at}: subgraphs.{name} passes {flag}, which the runner sets itself"
                    )));
                }
                for placeholder in [REDIS_PLACEHOLDER, REDIS_CLUSTER_PLACEHOLDER] {
                    if args.iter().any(|a| a.contains(placeholder)) {
                        return Err(invalid(format!(
                            "{at}: subgraphs.{name} uses {placeholder}, which only gateway arguments may use"
                        )));
                    }
                }
            }
            let check = c.check.unwrap_or(true);
            let max_error_rate = match c.max_error_rate {
                Some(r) => Some(error_rate(r, &format!("{at}: max_error_rate")).map_err(invalid)?),
                None => file_error_rate.or(check.then_some(DEFAULT_MAX_ERROR_RATE)),
            };
            let gateways = match c.gateways {
                None => 1,
                Some(n) if (1..=MAX_GATEWAYS).contains(&n) => n as usize,
                Some(n) => {
                    return Err(invalid(format!(
                        "{at}: gateways = {n}: must be 1 to {MAX_GATEWAYS}"
                    )))
                }
            };
            if load.connections < gateways {
                return Err(invalid(format!(
                    "{at}: gateways = {gateways} needs at least as many connections (load.connections = {})",
                    load.connections
                )));
            }
            let user_service_args = with_common(&file.services.user_service, c.user_service);
            let post_service_args = with_common(&file.services.post_service, c.post_service);
            let subgraph_args: BTreeMap<String, Vec<String>> = if graph.lab {
                [
                    ("user".to_string(), user_service_args.clone()),
                    ("post".to_string(), post_service_args.clone()),
                ]
                .into()
            } else {
                graph
                    .started()
                    .map(|(name, started)| {
                        let own = c.subgraphs.get(name).cloned().unwrap_or_default();
                        (name.to_string(), with_common(&started.args, own))
                    })
                    .collect()
            };
            configs.push(ConfigSpec {
                name: c.name,
                description: c.description,
                gateway_args: with_common(&file.services.gateway, c.gateway),
                user_service_args,
                post_service_args,
                load,
                query,
                workload: config_workload,
                own_query,
                redis,
                redis_cluster,
                gateways,
                baseline: c.baseline,
                check,
                network,
                graph: graph.clone(),
                subgraph_args,
                max_error_rate,
            });
        }
        let baseline = file.baseline.unwrap_or_else(|| configs[0].name.clone());
        if !configs.iter().any(|c| c.name == baseline) {
            return Err(invalid(format!(
                "baseline {baseline:?} is not the name of a configuration"
            )));
        }
        for c in &configs {
            if let Some(own) = &c.baseline {
                if !configs.iter().any(|o| o.name == *own) {
                    return Err(invalid(format!(
                        "config {:?}: baseline {own:?} is not the name of a configuration",
                        c.name
                    )));
                }
            }
        }
        let name = file.name.unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "experiment".into())
        });
        Ok(Experiment {
            name,
            description: file.description,
            baseline,
            query: top_query,
            workload,
            run,
            profile,
            configs,
            graph,
        })
    }
}

/// A `max_error_rate` value: a share of the answers, from 0 to 1 (1: never stop).
fn error_rate(value: f64, at: &str) -> Result<f64, String> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!(
            "{at} = {value}: must be a share of the answers from 0 to 1 (1: never stop)"
        ))
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

/// The first argument that is a flag the runner sets itself (`--listen`, `--listen=…`).
fn runner_owned(args: &[String]) -> Option<&String> {
    args.iter().find(|a| {
        RUNNER_OWNED_FLAGS
            .iter()
            .any(|f| *a == f || a.starts_with(&format!("{f}=")))
    })
}

/// A `[load]` table over its defaults (the file's `[load]`, then the built-in ones).
fn resolve_load(
    load: &LoadFile,
    defaults: Option<&LoadSpec>,
    at: &str,
) -> Result<LoadSpec, String> {
    let connections = match load.connections {
        None => defaults.map_or(DEFAULT_CONNECTIONS, |d| d.connections),
        Some(n) if (1..=1_000_000).contains(&n) => n as usize,
        Some(n) => return Err(format!("{at}.connections = {n}: must be 1 to 1000000")),
    };
    let threads = match load.threads {
        None => defaults.map_or(DEFAULT_THREADS, |d| d.threads),
        Some(n) if (1..=4096).contains(&n) => n as usize,
        Some(n) => return Err(format!("{at}.threads = {n}: must be 1 to 4096")),
    };
    let rate = match load.rate {
        None => defaults.and_then(|d| d.rate),
        Some(r) if r.is_finite() && r > 0.0 => Some(r),
        Some(r) => {
            return Err(format!(
                "{at}.rate = {r}: must be a positive number of requests per second"
            ))
        }
    };
    let timeout = match &load.timeout {
        None => defaults.map_or(DEFAULT_TIMEOUT, |d| d.timeout),
        Some(t) => parse_duration(t).map_err(|e| format!("{at}.timeout: {e}"))?,
    };
    Ok(LoadSpec {
        connections,
        threads,
        rate,
        timeout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
[query]
document = "{ me { id } }"
expected = '{"data":{"me":{"id":"u1"}}}'

[[config]]
name = "plain"
"#;

    fn parse(text: &str) -> Result<Experiment, ExperimentError> {
        Experiment::parse(text, Path::new("exp.toml"))
    }

    fn error(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn minimal_file_gets_defaults() {
        let e = parse(MINIMAL).unwrap();
        assert_eq!(e.name, "exp");
        assert_eq!(e.baseline, "plain");
        assert_eq!(e.configs[0].query.as_ref().unwrap().path, "/graphql");
        assert_eq!(e.query.as_ref(), e.configs[0].query.as_ref());
        assert!(!e.configs[0].own_query && !e.configs[0].redis);
        assert_eq!(e.configs[0].gateways, 1);
        assert_eq!(
            e.configs[0].query.as_ref().unwrap().expected,
            serde_json::json!({"data": {"me": {"id": "u1"}}})
        );
        assert_eq!(e.configs.len(), 1);
        let load = &e.configs[0].load;
        assert_eq!((load.connections, load.threads, load.rate), (100, 1, None));
        assert_eq!(load.timeout, Duration::from_secs(10));
        assert_eq!(
            e.profile,
            ProfileSpec {
                enabled: true,
                hz: 99,
                tool: ProfileTool::Auto,
            }
        );
        assert_eq!(e.run, RunSpec::default());
    }

    #[test]
    fn configs_override_the_load_table_and_keep_their_arguments() {
        let e = parse(
            r#"
name = "ttl"
baseline = "b"
[query]
document = "query($n: Int) { topPosts(count: $n) { pid } }"
variables = { n = 2 }
expected = '{"data":{"topPosts":[]}}'
headers = ["authorization: Bearer u1"]
[load]
connections = 50
timeout = "2s"
[run]
rounds = 5
duration = "3s"
warmup = "0s"
[profile]
hz = 49
[[config]]
name = "a"
gateway = ["--ttl", "1"]
[[config]]
name = "b"
post_service = ["--delay-ms", "5"]
load = { rate = 500.0, threads = 2 }
"#,
        )
        .unwrap();
        assert_eq!(e.name, "ttl");
        assert_eq!(e.baseline, "b");
        let query = e.query.as_ref().unwrap();
        assert_eq!(query.variables, Some(serde_json::json!({"n": 2})));
        assert_eq!(
            query.body(),
            r#"{"query":"query($n: Int) { topPosts(count: $n) { pid } }","variables":{"n":2}}"#
        );
        assert_eq!(e.configs[0].gateway_args, ["--ttl", "1"]);
        assert_eq!(e.configs[0].load.connections, 50);
        assert_eq!(e.configs[0].load.rate, None);
        assert_eq!(e.configs[1].post_service_args, ["--delay-ms", "5"]);
        assert_eq!(e.configs[1].load.rate, Some(500.0));
        assert_eq!(e.configs[1].load.threads, 2);
        assert_eq!(e.configs[1].load.connections, 50);
        assert_eq!(e.configs[1].load.timeout, Duration::from_secs(2));
        assert_eq!(
            e.run,
            RunSpec {
                rounds: Some(5),
                duration: Some(Duration::from_secs(3)),
                warmup: Some(Duration::ZERO)
            }
        );
        assert_eq!(e.profile.hz, 49);
    }

    #[test]
    fn bad_files_get_clear_errors() {
        let cases: &[(&str, &str)] = &[
            (
                "[query]\ndocument = \"{a}\"\n[[config]]\nname = \"a\"\n",
                "query: needs expected or expected_file",
            ),
            (
                &MINIMAL.replace("[[config]]\nname = \"plain\"\n", ""),
                "at least one configuration",
            ),
            (
                &format!("{MINIMAL}[[config]]\nname = \"plain\"\n"),
                "used twice",
            ),
            (&MINIMAL.replace("plain", "has space"), "name must be"),
            (
                &MINIMAL.replace(r#"'{"data":{"me":{"id":"u1"}}}'"#, "'{nope'"),
                "query.expected is not JSON",
            ),
            (
                &format!("baseline = \"other\"\n{MINIMAL}"),
                "baseline \"other\"",
            ),
            (
                &format!("{MINIMAL}gateway = [\"--listen\", \"1.2.3.4:1\"]\n"),
                "--listen, which the runner sets",
            ),
            (
                &format!("{MINIMAL}load = {{ connections = 0 }}\n"),
                "load.connections = 0",
            ),
            (
                &format!("{MINIMAL}load = {{ rate = -5.0 }}\n"),
                "load.rate = -5",
            ),
            (
                &format!("{MINIMAL}load = {{ timeout = \"soon\" }}\n"),
                "load.timeout",
            ),
            (
                &format!("{MINIMAL}colour = \"red\"\n"),
                "unknown field `colour`",
            ),
            (&format!("[run]\nrounds = 0\n{MINIMAL}"), "run.rounds = 0"),
            (
                &format!("[run]\nduration = \"0s\"\n{MINIMAL}"),
                "run.duration",
            ),
            (
                &format!("[profile]\nhz = 5000\n{MINIMAL}"),
                "profile.hz = 5000",
            ),
            ("this is not toml", "exp.toml"),
        ];
        for (text, expected) in cases {
            let message = error(text);
            assert!(
                message.contains(expected),
                "expected {expected:?} in: {message}"
            );
            assert!(
                message.starts_with("exp.toml"),
                "the file is named: {message}"
            );
        }
    }

    #[test]
    fn configurations_can_be_selected() {
        let text = format!("{MINIMAL}[[config]]\nname = \"b\"\n[[config]]\nname = \"c\"\n");
        let names = |e: &Experiment| e.configs.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        let mut e = parse(&text).unwrap();
        e.select(&[], &["b".into()]).unwrap();
        assert_eq!(names(&e), ["plain", "c"]);
        let mut e = parse(&text).unwrap();
        e.select(&["plain".into(), "c".into()], &[]).unwrap();
        assert_eq!(names(&e), ["plain", "c"]);
        let mut e = parse(&text).unwrap();
        let err = e.select(&[], &["nope".into()]).unwrap_err();
        assert!(
            err.starts_with("--skip: \"nope\" is not a configuration"),
            "{err}"
        );
        let mut e = parse(&text).unwrap();
        let err = e.select(&[], &["plain".into()]).unwrap_err();
        assert!(
            err.contains("\"b\" is measured against \"plain\", which would not run"),
            "{err}"
        );
    }

    #[test]
    fn a_configuration_may_name_its_own_baseline() {
        let e = parse(&format!(
            "{MINIMAL}\n[[config]]\nname = \"on\"\nbaseline = \"off\"\n\n[[config]]\nname = \"off\"\n"
        ))
        .unwrap();
        assert_eq!(e.configs[1].baseline.as_deref(), Some("off"));
        assert_eq!(e.configs[0].baseline, None);
        let err = parse(&format!(
            "{MINIMAL}\n[[config]]\nname = \"on\"\nbaseline = \"nope\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("baseline \"nope\" is not the name of a configuration"),
            "{err}"
        );
    }

    #[test]
    fn a_configuration_may_bring_its_own_query() {
        let e = parse(&format!(
            r#"{MINIMAL}
[[config]]
name = "flood"
query = {{ document = "{{ getPost(pid: \"p{{{{n}}}}\") {{ pid }} }}", expected = '{{"data":{{"getPost":null}}}}', unique_literals = true, headers = ["x-a: b"] }}
"#
        ))
        .unwrap();
        let (plain, flood) = (&e.configs[0], &e.configs[1]);
        assert!(!plain.own_query && flood.own_query);
        assert_eq!(plain.query.as_ref().unwrap().document, "{ me { id } }");
        assert_eq!(
            flood.query.as_ref().unwrap().document,
            r#"{ getPost(pid: "p{{n}}") { pid } }"#
        );
        assert_eq!(
            flood.query.as_ref().unwrap().expected,
            serde_json::json!({"data": {"getPost": null}})
        );
        assert!(flood.query.as_ref().unwrap().unique_literals);
        assert_eq!(flood.query.as_ref().unwrap().headers, ["x-a: b"]);
        // The answer check reads {{n}} as 0.
        assert_eq!(
            flood.query.as_ref().unwrap().check_body(),
            r#"{"query":"{ getPost(pid: \"p0\") { pid } }"}"#
        );

        // Without a top-level [query], every configuration needs its own.
        let own_only = r#"
[[config]]
name = "a"
query = { document = "{ a }", expected = '{"data":{"a":1}}' }
[[config]]
name = "b"
query = { document = "{ b }", expected = '{"data":{"b":2}}', path = "/gql" }
"#;
        let e = parse(own_only).unwrap();
        assert!(e.query.is_none());
        assert_eq!(e.configs[1].query.as_ref().unwrap().path, "/gql");
        let message = error(&format!("{own_only}[[config]]\nname = \"c\"\n"));
        assert!(
            message.contains("config #3 (\"c\") has no query of its own")
                && message.contains("no top-level [query]"),
            "{message}"
        );
    }

    #[test]
    fn query_files_are_read_next_to_the_experiment_file() {
        let dir = std::env::temp_dir().join(format!("loadgen-exp-files-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("q")).unwrap();
        let fields: Vec<String> = (0..1000).map(|i| format!("f{i}: pid")).collect();
        let document = format!("{{ getPost(pid: \"p1\") {{ {} }} }}\n", fields.join(" "));
        std::fs::write(dir.join("q/wide.graphql"), &document).unwrap();
        std::fs::write(
            dir.join("q/wide.json"),
            r#"{"data":{"getPost":{"f0":"p1"}}}"#,
        )
        .unwrap();
        let text = r#"
[query]
document_file = "q/wide.graphql"
expected_file = "q/wide.json"
[[config]]
name = "wide"
[[config]]
name = "missing"
query = { document_file = "q/nope.graphql", expected = '{}' }
"#;
        let message = Experiment::parse(text, &dir.join("exp.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains(
                "config #2 (\"missing\"): query.document_file \"q/nope.graphql\": cannot read"
            ),
            "{message}"
        );
        let text = text.replace("q/nope.graphql", "q/wide.graphql");
        let e = Experiment::parse(&text, &dir.join("exp.toml")).unwrap();
        assert_eq!(e.configs[0].query.as_ref().unwrap().document, document);
        assert_eq!(e.configs[1].query.as_ref().unwrap().document, document);
        assert_eq!(
            e.configs[0].query.as_ref().unwrap().expected,
            serde_json::json!({"data": {"getPost": {"f0": "p1"}}})
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn redis_and_gateways_keys() {
        let e = parse(&format!(
            r#"{MINIMAL}
[[config]]
name = "shared"
redis = true
gateways = 2
gateway = ["--storage", "redis", "--redis", "{{redis}}"]
"#
        ))
        .unwrap();
        let (plain, shared) = (&e.configs[0], &e.configs[1]);
        assert_eq!((plain.redis, plain.gateways), (false, 1));
        assert_eq!((shared.redis, shared.gateways), (true, 2));
        assert_eq!(shared.gateway_args[3], "{redis}");
        assert!(!shared.redis_cluster && !plain.redis_cluster);
        let e = parse(&format!(
            r#"{MINIMAL}
[[config]]
name = "cluster"
redis = "cluster"
gateway = ["--storage", "redis", "--redis-cluster", "{{redis-cluster}}"]
"#
        ))
        .unwrap();
        let cluster = &e.configs[1];
        assert!(cluster.redis_cluster && !cluster.redis);
        assert_eq!(cluster.gateway_args[3], "{redis-cluster}");
    }

    #[test]
    fn bad_query_redis_and_gateways_values_are_named() {
        let cases: &[(&str, &str)] = &[
            ("gateways = 0", "config #1 (\"plain\"): gateways = 0: must be 1 to 16"),
            ("gateways = 17", "gateways = 17: must be 1 to 16"),
            ("gateways = \"two\"", "gateways"),
            ("redis = \"yes\"", "redis = \"yes\": expected true, false or \"cluster\""),
            (
                "redis = true\ngateway = [\"--redis-cluster\", \"{redis-cluster}\"]",
                "gateway uses {redis-cluster} but the configuration does not say redis = \"cluster\"",
            ),
            (
                "redis = \"cluster\"\ngateway = [\"--redis\", \"{redis}\"]",
                "gateway uses {redis} but the configuration does not say redis = true",
            ),
            (
                "gateway = [\"--redis\", \"{redis}\"]",
                "gateway uses {redis} but the configuration does not say redis = true",
            ),
            (
                "redis = true\npost_service = [\"{redis}\"]",
                "post_service uses {redis}, which only gateway arguments may use",
            ),
            (
                "query = { document = \"{ a }\" }",
                "config #1 (\"plain\"): query: needs expected or expected_file",
            ),
            (
                "query = { expected = '{}' }",
                "query: needs document or document_file",
            ),
            (
                "query = { document = \"{ a }\", document_file = \"a.graphql\", expected = '{}' }",
                "either document or document_file, not both",
            ),
            (
                "query = { document = \"{ a }\", expected = '{}', expected_file = \"a.json\" }",
                "either expected or expected_file, not both",
            ),
            (
                "query = { document = \"{ a }\", expected = '{}', unique_literals = true }",
                "query.unique_literals = true, but neither the document nor the variables hold {{n}}",
            ),
            (
                "query = { document = \"{ a }\", expected = 'nope' }",
                "config #1 (\"plain\"): query.expected is not JSON",
            ),
            (
                "query = { document = \"{ a }\", expected = '{}', colour = 1 }",
                "unknown field `colour`",
            ),
        ];
        for (line, expected) in cases {
            let message = error(&format!("{MINIMAL}{line}\n"));
            assert!(
                message.contains(expected),
                "{line}: expected {expected:?} in: {message}"
            );
            assert!(message.starts_with("exp.toml"), "{message}");
        }
    }

    #[test]
    fn the_redis_experiment_is_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/redis.toml");
        let e = Experiment::load(&path).unwrap();
        let names: Vec<&str> = e.configs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "memory",
                "redis",
                "redis-no-autopipeline",
                "layered",
                "layered-2-gateways"
            ]
        );
        assert_eq!(e.baseline, "memory");
        let seed = Experiment::load(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/seed.toml"),
        )
        .unwrap();
        for c in &e.configs {
            assert_eq!(c.query, seed.configs[0].query, "{}: the seed query", c.name);
            assert_eq!((c.load.connections, c.load.threads), (100, 1), "{}", c.name);
            let ttl = c.gateway_args.iter().position(|a| a == "--ttl");
            assert_eq!(
                ttl.map(|i| c.gateway_args[i + 1].as_str()),
                Some("10"),
                "{}: --ttl 10",
                c.name
            );
            assert_eq!(c.redis, c.name != "memory", "{}", c.name);
        }
        assert_eq!(e.configs[4].gateways, 2);
        assert!(e.configs[..4].iter().all(|c| c.gateways == 1));
        assert_eq!(
            e.configs[2].gateway_args,
            [
                "--ttl",
                "10",
                "--storage",
                "redis",
                "--redis",
                "{redis}",
                "--redis-autopipeline",
                "false"
            ]
        );
        assert_eq!(
            e.configs[3].gateway_args,
            ["--ttl", "10", "--storage", "layered", "--redis", "{redis}"]
        );
    }

    #[test]
    fn the_redis_cluster_experiment_is_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments");
        let e = Experiment::load(&dir.join("redis-cluster.toml")).unwrap();
        let seed = Experiment::load(&dir.join("seed.toml")).unwrap();
        let names: Vec<&str> = e.configs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["redis", "redis-cluster", "layered", "layered-cluster"]
        );
        assert_eq!(e.baseline, "redis");
        for c in &e.configs {
            let cluster = c.name.ends_with("-cluster");
            assert_eq!(
                (c.redis, c.redis_cluster),
                (!cluster, cluster),
                "{}",
                c.name
            );
            assert_eq!(c.query, seed.configs[0].query, "{}: the seed query", c.name);
            let (flag, placeholder) = if cluster {
                ("--redis-cluster", REDIS_CLUSTER_PLACEHOLDER)
            } else {
                ("--redis", REDIS_PLACEHOLDER)
            };
            let storage = if c.name.starts_with("layered") {
                "layered"
            } else {
                "redis"
            };
            assert_eq!(
                c.gateway_args,
                ["--ttl", "10", "--storage", storage, flag, placeholder],
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn every_experiment_file_of_the_repository_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments");
        let mut loaded = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                if let Err(e) = Experiment::load(&path) {
                    panic!("{}: {e:#}", path.display());
                }
                loaded += 1;
            }
        }
        assert!(
            loaded >= 10,
            "only {loaded} experiment files in {}",
            dir.display()
        );
    }

    #[test]
    fn the_seed_experiment_is_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/seed.toml");
        let e = Experiment::load(&path).unwrap();
        let names: Vec<&str> = e.configs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["no-cache", "ttl-0", "ttl-1", "ttl-10"]);
        assert_eq!(e.baseline, "no-cache");
        assert!(e.configs.iter().all(|c| c.load.connections == 100));
        // Every configuration runs the gateway on one worker thread (docs/cpu-and-peers.md, "Worker threads").
        assert_eq!(
            e.configs[2].gateway_args,
            ["--worker-threads", "1", "--ttl", "1"]
        );
        assert!(e
            .configs
            .iter()
            .all(|c| c.gateway_args[..2] == ["--worker-threads", "1"]));
        assert_eq!(
            e.query.as_ref().unwrap().expected,
            serde_json::json!({"data":{"me":{"id":"u1","name":"John","nickname":"John","topPosts":[{"pid":"p1","author":{"id":"u1"}},{"pid":"p3","author":{"id":"u1"}}]},"topPosts":[{"pid":"p1"},{"pid":"p2"}]}})
        );
    }
}
