//! An experiment file as written: the TOML tables and keys serde reads, every table
//! with `deny_unknown_fields` so that a misspelt key is an error. Nothing here is
//! checked or defaulted; `parse` does that.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::matrix::builds::BuildFile;
use crate::matrix::graph::{GraphFile, SubgraphServiceFile};
use crate::matrix::network::NetworkFile;
use crate::matrix::query::QueryFile;
use crate::workload::spec::WorkloadFile;

/// The file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExperimentFile {
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) description: Option<String>,
    #[serde(default)]
    pub(super) baseline: Option<String>,
    #[serde(default)]
    pub(super) query: Option<QueryFile>,
    /// Instead of one query: a mix of operations (see `crate::workload::spec`).
    #[serde(default)]
    pub(super) workload: Option<WorkloadFile>,
    /// Someone else's graph: a supergraph, subgraphs at URLs, an operations file.
    #[serde(default)]
    pub(super) graph: Option<GraphFile>,
    /// The share of answers with errors past which the run stops (every
    /// configuration's default; `check = false` ones have no limit unless this says).
    #[serde(default)]
    pub(super) max_error_rate: Option<f64>,
    /// Arguments every configuration passes before its own.
    #[serde(default)]
    pub(super) services: ServicesFile,
    #[serde(default)]
    pub(super) load: LoadFile,
    #[serde(default)]
    pub(super) run: RunFile,
    #[serde(default)]
    pub(super) profile: ProfileFile,
    #[serde(default, rename = "config")]
    pub(super) configs: Vec<ConfigFile>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LoadFile {
    pub(super) connections: Option<i64>,
    pub(super) threads: Option<i64>,
    pub(super) rate: Option<f64>,
    pub(super) timeout: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ServicesFile {
    #[serde(default)]
    pub(super) gateway: Vec<String>,
    #[serde(default)]
    pub(super) user_service: Vec<String>,
    #[serde(default)]
    pub(super) post_service: Vec<String>,
    /// Subgraphs the runner starts instead of the lab's two.
    #[serde(default)]
    pub(super) subgraph: Vec<SubgraphServiceFile>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RunFile {
    pub(super) rounds: Option<i64>,
    pub(super) duration: Option<String>,
    pub(super) warmup: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProfileFile {
    pub(super) enabled: Option<bool>,
    pub(super) hz: Option<i64>,
    pub(super) tool: Option<String>,
}

/// `redis = true | false | "cluster"` in a `[[config]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum RedisChoice {
    Server(bool),
    Named(String),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConfigFile {
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: Option<String>,
    #[serde(default)]
    pub(super) gateway: Vec<String>,
    #[serde(default)]
    pub(super) user_service: Vec<String>,
    #[serde(default)]
    pub(super) post_service: Vec<String>,
    #[serde(default)]
    pub(super) load: LoadFile,
    /// This configuration's own query, replacing the top-level `[query]`.
    #[serde(default)]
    pub(super) query: Option<QueryFile>,
    /// Start a private redis-server for this configuration (`true`: `{redis}` in its
    /// gateway arguments becomes its URL) or a private three-master Redis Cluster
    /// (`"cluster"`: `{redis-cluster}` becomes its seed URLs).
    #[serde(default)]
    pub(super) redis: Option<RedisChoice>,
    /// Gateway instances to start and load round robin (default 1).
    #[serde(default)]
    pub(super) gateways: Option<i64>,
    /// An edge cache the runner starts in front of the gateway (`"varnish"`: Debian's
    /// Varnish with the lab's VCL; `{edge}` in its gateway arguments becomes its purge
    /// URL). The load then goes through it.
    #[serde(default)]
    pub(super) edge: Option<String>,
    /// The configuration this one's ratios are taken against (default: the file's
    /// `baseline`); for experiments made of pairs, such as cache on/off per size.
    #[serde(default)]
    pub(super) baseline: Option<String>,
    /// Check the answer before and after the window (default true). `false` for a
    /// configuration with injected faults, whose answers may carry errors by design.
    #[serde(default)]
    pub(super) check: Option<bool>,
    /// Services put behind a `loadgen netproxy` with a round-trip time ([`super::network`]).
    #[serde(default)]
    pub(super) network: Option<NetworkFile>,
    /// Extra arguments per subgraph of `[[services.subgraph]]`, by name.
    #[serde(default)]
    pub(super) subgraphs: BTreeMap<String, Vec<String>>,
    /// This configuration's error limit (over the file's `max_error_rate`).
    #[serde(default)]
    pub(super) max_error_rate: Option<f64>,
    /// The gateway build it runs, when not the one beside loadgen.
    #[serde(default)]
    pub(super) build: Option<BuildFile>,
    /// A peer gateway run in place of the lab's (`loadgen peers` lists them).
    #[serde(default)]
    pub(super) peer: Option<String>,
    /// The peer's cache settings, in its own terms (`cache = { ttl = 0 }`).
    #[serde(default)]
    pub(super) cache: Option<toml::Table>,
    /// A gateway the runner does not start, by URL (`http://HOST:PORT/PATH`).
    #[serde(default)]
    pub(super) url: Option<String>,
    /// Why this configuration's answers are expected to differ from the expected
    /// answer: a difference is then recorded and reported instead of stopping the run.
    #[serde(default)]
    pub(super) expected_difference: Option<String>,
}
