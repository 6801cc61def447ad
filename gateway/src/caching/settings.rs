//! How the gateway caches: the settings from its flags (`--ttl`, `--stale`,
//! `--storage`, `--redis`, `--redis-cluster`, `--invalidation`, `--strategy`, `--cache-eviction`, ...)
//! and the `--policy` file of overrides per `Type.field`.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use cache_core::storage::{Eviction, RedisStorage, RedisStorageBuilder};
use cache_core::{strategies, NamedStrategy};
use serde::Deserialize;

use crate::answer::piece::Piece;

/// Where cache entries live (`--storage`, or a policy's `storage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StorageKind {
    /// In this process (moka), bounded by `--cache-max-entries`.
    Memory,
    /// In Redis only, shared by every gateway on it.
    Redis,
    /// A short-lived in-process L1 over Redis; invalidations reach every L1 through
    /// a Redis channel.
    Layered,
}

impl StorageKind {
    pub fn parse(s: &str) -> Result<StorageKind, String> {
        match s {
            "memory" => Ok(StorageKind::Memory),
            "redis" => Ok(StorageKind::Redis),
            "layered" => Ok(StorageKind::Layered),
            other => Err(format!(
                "{other:?} is not a storage; use memory, redis or layered"
            )),
        }
    }

    /// The name `--storage` takes.
    pub fn name(self) -> &'static str {
        match self {
            StorageKind::Memory => "memory",
            StorageKind::Redis => "redis",
            StorageKind::Layered => "layered",
        }
    }

    pub fn needs_redis(self) -> bool {
        self != StorageKind::Memory
    }
}

/// Which Redis the `redis` and `layered` storages use: one server (`--redis`) or a
/// Redis Cluster (`--redis-cluster`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// `redis://host:port[/db]`.
    Single(String),
    /// The cluster's seed nodes, each `redis://host:port`.
    Cluster(Vec<String>),
}

impl RedisTarget {
    /// The flag and value it came from, for error messages (`--redis redis://…`).
    pub fn describe(&self) -> String {
        match self {
            RedisTarget::Single(url) => format!("--redis {url}"),
            RedisTarget::Cluster(seeds) => format!("--redis-cluster {}", seeds.join(",")),
        }
    }

    /// A store builder for this target (the caller sets the rest and builds).
    pub fn store_builder(&self) -> RedisStorageBuilder {
        match self {
            RedisTarget::Single(url) => RedisStorage::builder(url.as_str()),
            RedisTarget::Cluster(seeds) => RedisStorage::cluster_builder(seeds.iter().cloned()),
        }
    }

    /// Parses `--redis-cluster URL[,URL…]`: at least one seed, each `redis://host:port`,
    /// no database (a cluster has only database 0).
    pub fn parse_cluster(text: &str) -> Result<RedisTarget, String> {
        let seeds: Vec<String> = text.split(',').map(|s| s.trim().to_string()).collect();
        for seed in &seeds {
            let Some(rest) = seed.strip_prefix("redis://") else {
                return Err(format!(
                    "--redis-cluster {text:?}: {seed:?} is not redis://HOST:PORT (seeds are separated by commas)"
                ));
            };
            let address = rest.trim_end_matches('/');
            let port = address
                .rsplit_once(':')
                .map(|(host, port)| (host, port.parse::<u16>()));
            if address.contains('/') || !matches!(port, Some((host, Ok(_))) if !host.is_empty()) {
                return Err(format!(
                    "--redis-cluster {text:?}: {seed:?} is not redis://HOST:PORT (a cluster has no database number)"
                ));
            }
        }
        Ok(RedisTarget::Cluster(seeds))
    }
}

/// How to reach Redis, for the `redis` and `layered` storages.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// One server or a cluster.
    pub target: RedisTarget,
    /// Batch the gets of one scheduling turn into one `MGET` (`--redis-autopipeline`).
    pub auto_pipeline: bool,
    /// How long the layered store's L1 keeps an entry at most.
    pub l1_ttl: Duration,
    /// Most entries the layered store's L1 keeps.
    pub l1_max_entries: u64,
    /// Longest wait for one Redis round trip before it counts as a failure (a miss,
    /// and a step towards opening the store's breaker) (`--redis-timeout-ms`).
    pub command_timeout: Duration,
}

impl RedisSettings {
    /// A store on this Redis with these settings (auto-pipelining, the command
    /// timeout); the error names the flag that gave the target.
    pub fn store(&self) -> Result<RedisStorage, String> {
        self.target
            .store_builder()
            .auto_pipeline(self.auto_pipeline)
            .command_timeout(self.command_timeout)
            .build()
            .map_err(|e| format!("{}: {e}", self.target.describe()))
    }
}

/// How the gateway caches, from `--ttl`, `--stale`, `--policy` and friends.
#[derive(Debug, Clone)]
pub struct CacheSettings {
    /// Where entries live unless a policy says otherwise.
    pub storage: StorageKind,
    /// Required when any storage in use needs Redis.
    pub redis: Option<RedisSettings>,
    /// Default time an entry stays fresh; zero keeps nothing (dedupe only).
    pub ttl: Duration,
    /// Default stale-while-revalidate window after `ttl`.
    pub stale: Duration,
    /// Most entries the memory store keeps.
    pub max_entries: u64,
    /// Log a hits/misses/dedupes table this often.
    pub report_interval: Option<Duration>,
    /// Overrides per `Type.field`.
    pub policies: PolicyFile,
    /// Whether a mutation's result invalidates the entries that refer to its entities
    /// (`--invalidation on`, the default). Off, entries live until their ttl whatever
    /// is written: mercurius-cache without references, for comparison.
    pub invalidation: bool,
    /// The strategies every cached field goes through, in order (`--strategy`,
    /// repeatable), unless its policy lists its own.
    pub strategies: Vec<NamedStrategy<Piece>>,
    /// Which entry the memory store evicts when full (`--cache-eviction`).
    pub eviction: Eviction,
    /// Each entry carries its namespace as a reference, so that `POST /invalidate` can
    /// drop a field's entries (on with `--admin-listen`; [`super::invalidation`]).
    pub namespace_references: bool,
}

/// Builds each of `specs` (`NAME[:PARAM=VALUE,...]`) from cache-core's registry; the
/// error names `what` (the flag or policy field) and lists the catalogue.
pub fn build_strategies(
    specs: &[impl AsRef<str>],
    what: &str,
) -> Result<Vec<NamedStrategy<Piece>>, String> {
    specs
        .iter()
        .map(|spec| {
            strategies::parse_and_build::<Piece>(spec.as_ref())
                .map_err(|e| format!("{what} {:?}: {e}", spec.as_ref()))
        })
        .collect()
}

/// The `--policy` file: overrides per `Type.field`.
///
/// ```toml
/// [policy."Query.me"]
/// ttl = 30                         # seconds fresh
/// stale = 5                        # seconds served stale while one refresh runs
/// key = { headers = ["authorization"] }   # one entry per caller (extendKey)
///
/// [policy."Query.topPosts"]
/// key = { args = ["count"] }       # only these arguments form the key
/// references = ["Feed:top"]        # extra references on every entry
///
/// [policy."User.topPosts"]
/// skip = true                      # never cached, never deduplicated
///
/// [policy."Mutation.createUser"]
/// invalidate = ["Feed:top", "User:*"]   # dropped after every createUser
///
/// [policy."Query.getPost"]
/// strategies = ["origin-ttl", "stale-if-error:window=30s"]   # replaces --strategy here
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    #[serde(default)]
    pub policy: HashMap<String, FieldPolicy>,
    /// Where it was read from, for messages (`None`: built in the process).
    #[serde(skip)]
    pub path: Option<std::path::PathBuf>,
}

/// Overrides for one `Type.field`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldPolicy {
    pub ttl: Option<f64>,
    pub stale: Option<f64>,
    #[serde(default)]
    pub skip: bool,
    #[serde(default)]
    pub key: KeyPolicy,
    /// References added to every entry of this field.
    #[serde(default)]
    pub references: Vec<String>,
    /// For mutations: patterns invalidated after every call (`User:*` works).
    #[serde(default)]
    pub invalidate: Vec<String>,
    /// Where this field's entries live (`memory`, `redis`, `layered`); `--storage`
    /// when absent.
    pub storage: Option<String>,
    /// This field's strategies (`NAME[:PARAM=VALUE,...]`, in order), replacing
    /// `--strategy`'s list; `[]` runs none. `--strategy`'s list when absent.
    pub strategies: Option<Vec<String>>,
}

/// Which parts of a call form its key.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyPolicy {
    /// Only these arguments (root fields); all of them when absent.
    pub args: Option<Vec<String>>,
    /// Request headers whose values join the key (e.g. `authorization`).
    #[serde(default)]
    pub headers: Vec<String>,
}

impl PolicyFile {
    /// Read and check a policy file.
    pub fn load(path: &Path) -> Result<PolicyFile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--policy {}: {e}", path.display()))?;
        let mut file: PolicyFile =
            toml::from_str(&text).map_err(|e| format!("--policy {}: {e}", path.display()))?;
        file.path = Some(path.to_path_buf());
        for (name, rule) in &file.policy {
            if !name.contains('.') {
                return Err(format!(
                    "--policy {}: [policy.\"{name}\"] must name a Type.field",
                    path.display()
                ));
            }
            for (what, v) in [("ttl", rule.ttl), ("stale", rule.stale)] {
                if v.is_some_and(|s| Duration::try_from_secs_f64(s).is_err()) {
                    return Err(format!(
                        "--policy {}: {name}.{what} must be a non-negative number",
                        path.display()
                    ));
                }
            }
            if let Some(storage) = rule.storage.as_deref() {
                StorageKind::parse(storage)
                    .map_err(|e| format!("--policy {}: {name}.storage: {e}", path.display()))?;
            }
            if let Some(specs) = &rule.strategies {
                build_strategies(
                    specs,
                    &format!("--policy {}: {name}.strategies", path.display()),
                )?;
            }
        }
        Ok(file)
    }

    /// `--policy FILE`, as messages name it.
    pub fn describe(&self) -> String {
        match &self.path {
            Some(path) => format!("--policy {}", path.display()),
            None => "--policy".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_policy_file_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("policy.example.toml");
        let file = PolicyFile::load(&path).unwrap();
        assert_eq!(file.policy["Query.me"].key.headers, ["authorization"]);
        assert_eq!(file.policy["Query.topPosts"].stale, Some(5.0));
        assert_eq!(file.policy["Mutation.createUser"].invalidate, ["Feed:top"]);
    }
    #[test]
    fn bad_policy_files_name_the_problem() {
        let dir = std::env::temp_dir().join(format!("gw-policy-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (text, needle) in [
            ("[policy.me]\nttl = 1\n", "must name a Type.field"),
            (
                "[policy.\"Query.me\"]\nttl = -1\n",
                "ttl must be a non-negative number",
            ),
            (
                "[policy.\"Query.me\"]\nstorage = \"disk\"\n",
                "not a storage; use memory, redis or layered",
            ),
            ("[policy.\"Query.me\"]\nttl_seconds = 1\n", "unknown field"),
            (
                "[policy.\"Query.me\"]\nstrategies = [\"early-refrsh\"]\n",
                "Query.me.strategies \"early-refrsh\": there is no strategy named",
            ),
            (
                "[policy.\"Query.me\"]\nstrategies = [\"early-refresh:beta=x\"]\n",
                "expected a non-negative number",
            ),
            ("not toml [", "--policy"),
        ] {
            let path = dir.join("p.toml");
            std::fs::write(&path, text).unwrap();
            let err = PolicyFile::load(&path).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
        assert!(PolicyFile::load(&dir.join("missing.toml"))
            .unwrap_err()
            .contains("--policy"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
