//! Resolver caching: every resolver that fetches from a subgraph, wrapped in cache-core.
//!
//! This is mercurius-cache's `all: true` in Rust. Two kinds of resolver call fetch:
//!
//! - a **root field** (`Query.me`, `Query.topPosts(count: 2)`): one entry per call,
//!   keyed by the namespace `Type.field`, the arguments and the sub-selection sent;
//! - an **entity field** (`User.topPosts` on `u1`): one entry per parent, keyed by the
//!   namespace, the parent's representation (its key fields) and the selection. The
//!   batcher still sends all of a level's misses in one `_entities` call; a parent
//!   whose entry is stored, or whose fetch another request already has in flight,
//!   never joins it.
//!
//! Concurrent identical calls share one fetch through cache-core's dedupe table, across
//! client requests; with `--ttl 0` that is all the cache does (the talk's "0 s TTL").
//!
//! **Invalidation needs no configuration.** Every subgraph object of an entity type is
//! fetched with its `__typename` and key fields, so each entry carries references such
//! as `User:u1` and `Post:p1`. A mutation's result names the entities it touched; they
//! are invalidated before the mutation's response is sent, so the next read is fresh.
//! Policies can add references and invalidations that keys cannot see.
//!
//! **Per-user safety.** By default a request carrying `authorization` skips the cache
//! (counted as a skip). A policy may instead put headers into the key
//! (`key.headers = ["authorization"]`), mercurius-cache's `extendKey`.
//!
//! **Errors are never stored**: a failed fetch is not stored, and a response that
//! carries GraphQL errors is shared only with the callers that were waiting for it.
//!
//! **Where entries live.** One cache-core cache per storage kind in use (a `Tier`):
//! `--storage memory` (moka), `redis` (shared by every gateway on that Redis) or
//! `layered` (a short-lived moka L1 over Redis, told of other gateways' invalidations
//! over a Redis channel). A policy's `storage` puts one field in another tier; an
//! invalidation goes to every tier. `redis` and `layered` are not mixed in one gateway:
//! they would share Redis's keys, and one's invalidation would empty the other's
//! entries without telling its L1s.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_graphql_value::ConstValue;
use bytes::Bytes;
use cache_core::storage::{Codec, Encoded, LayeredStorage, RedisStats, RedisStorage};
use cache_core::{
    Cache, CacheError, Fetched, KeyParts, Namespace, Policy, ReportTask, StorageError,
};
use reqwest::header::{HeaderMap, HeaderValue};
use serde::Deserialize;

use crate::supergraph::KEY_ALIAS_PREFIX;
use crate::upstream::{FetchError, UpstreamResponse};

/// What the cache stores: a subgraph response for one resolver call.
pub type Cached = Arc<UpstreamResponse>;

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

/// How to reach Redis, for the `redis` and `layered` storages.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// `redis://host:port[/db]`.
    pub url: String,
    /// Batch the gets of one scheduling turn into one `MGET` (`--redis-autopipeline`).
    pub auto_pipeline: bool,
    /// How long the layered store's L1 keeps an entry at most.
    pub l1_ttl: Duration,
    /// Most entries the layered store's L1 keeps.
    pub l1_max_entries: u64,
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
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    #[serde(default)]
    pub policy: HashMap<String, FieldPolicy>,
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
        let file: PolicyFile =
            toml::from_str(&text).map_err(|e| format!("--policy {}: {e}", path.display()))?;
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
        }
        Ok(file)
    }
}

/// One namespace's cache handle and rule.
#[derive(Clone)]
struct Slot {
    /// Which of the [`Tier`]s holds this namespace's entries.
    tier: usize,
    namespace: Namespace<Cached>,
    rule: Arc<FieldPolicy>,
}

/// One cache-core cache over one kind of storage. The gateway has one tier per
/// storage kind in use: `--storage`'s, plus any that a policy names.
struct Tier {
    kind: StorageKind,
    cache: Cache<Cached>,
    /// The Redis store behind a `redis` or `layered` tier, for its counters.
    redis: Option<RedisStorage>,
    layered: Option<LayeredStorage<Cached>>,
    _report: Option<ReportTask>,
}

/// The gateway's resolver cache.
pub struct ResolverCache {
    /// `tiers[0]` is `--storage`'s.
    tiers: Vec<Tier>,
    settings: CacheSettings,
    slots: RwLock<HashMap<Arc<str>, Slot>>,
}

/// Subgraph responses as Redis keeps them: the JSON of their `data` (field order
/// kept). A response that carries errors is never stored, so errors need no encoding.
struct ResponseCodec;

impl Codec<Cached> for ResponseCodec {
    fn encode(&self, value: &Cached) -> Result<Bytes, StorageError> {
        serde_json::to_vec(&value.data)
            .map(Bytes::from)
            .map_err(StorageError::codec)
    }

    fn decode(&self, bytes: &[u8]) -> Result<Cached, StorageError> {
        let data: Option<ConstValue> =
            serde_json::from_slice(bytes).map_err(StorageError::codec)?;
        Ok(Arc::new(UpstreamResponse {
            data,
            errors: Vec::new(),
        }))
    }
}

impl Tier {
    /// Must be called inside a tokio runtime (Redis stores run a task; a report
    /// interval starts one).
    fn build(kind: StorageKind, settings: &CacheSettings) -> Result<Tier, String> {
        let builder = Cache::builder().ttl(settings.ttl).stale(settings.stale);
        let redis = match kind {
            StorageKind::Memory => None,
            _ => {
                let r = settings
                    .redis
                    .as_ref()
                    .ok_or_else(|| format!("storage {} needs --redis URL", kind.name()))?;
                let store = RedisStorage::builder(r.url.as_str())
                    .auto_pipeline(r.auto_pipeline)
                    .build()
                    .map_err(|e| format!("--redis {}: {e}", r.url))?;
                Some(store)
            }
        };
        let mut layered = None;
        let cache = match (kind, &redis) {
            (StorageKind::Redis, Some(store)) => builder
                .storage(Encoded::new(store.clone(), ResponseCodec))
                .build(),
            (StorageKind::Layered, Some(store)) => {
                let r = settings.redis.as_ref().expect("checked above");
                let l1 = LayeredStorage::builder()
                    .l1_ttl(r.l1_ttl)
                    .l1_max_entries(r.l1_max_entries)
                    .build_redis(store.clone(), ResponseCodec);
                layered = Some(l1.clone());
                builder.storage(l1).build()
            }
            _ => builder.max_entries(settings.max_entries).build(),
        };
        let report = settings
            .report_interval
            .and_then(|every| cache.log_every(every).ok());
        Ok(Tier {
            kind,
            cache,
            redis,
            layered,
            _report: report,
        })
    }
}

/// A call's inputs beyond the namespace: what the key is made of.
pub struct CallKey<'a> {
    /// The parent's representation (entity calls).
    pub parent: Option<&'a str>,
    /// The field's arguments (root calls).
    pub args: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// The sub-selection sent.
    pub selection: &'a str,
    pub headers: &'a HeaderMap,
}

impl ResolverCache {
    /// Must be called inside a tokio runtime. Fails when a storage in use needs
    /// Redis and `settings.redis` is absent or its URL malformed; a Redis that is
    /// down is not an error (the cache then fetches, and counts storage errors).
    pub fn new(settings: CacheSettings) -> Result<ResolverCache, String> {
        let mut kinds = vec![settings.storage];
        for rule in settings.policies.policy.values() {
            if let Some(kind) = rule.storage.as_deref().map(StorageKind::parse) {
                let kind = kind?;
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
        }
        // Both Redis kinds would share Redis's keys and reference sets, and one's
        // invalidation would empty the other's without telling its L1s.
        if kinds.contains(&StorageKind::Redis) && kinds.contains(&StorageKind::Layered) {
            return Err(
                "--storage and --policy: redis and layered cannot be mixed in one gateway (they would share Redis's keys); use one of them"
                    .into(),
            );
        }
        let tiers = kinds
            .into_iter()
            .map(|kind| Tier::build(kind, &settings))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ResolverCache {
            tiers,
            settings,
            slots: RwLock::new(HashMap::new()),
        })
    }

    /// Prometheus text: the per-namespace counters (`gateway_cache_*_total`), and
    /// with Redis in use its commands and round trips (`gateway_redis_*`, the talk's
    /// expansion factor once divided by requests) and the layered store's L1/L2 hits.
    pub fn prometheus(&self) -> String {
        // One series per namespace, summed over the tiers that counted it.
        let mut stats = cache_core::StatsSnapshot::default();
        for tier in &self.tiers {
            for ns in tier.cache.stats().namespaces {
                match stats
                    .namespaces
                    .iter_mut()
                    .find(|n| n.namespace == ns.namespace)
                {
                    Some(sum) => sum.merge(&ns),
                    None => stats.namespaces.push(ns),
                }
            }
        }
        stats
            .namespaces
            .sort_by(|a, b| a.namespace.cmp(&b.namespace));
        let mut out = stats.to_prometheus("gateway_cache");
        let redis: Vec<RedisStats> = self
            .tiers
            .iter()
            .filter_map(|t| t.redis.as_ref().map(RedisStorage::stats))
            .collect();
        if !redis.is_empty() {
            let sum = redis.iter().fold(RedisStats::default(), |a, b| RedisStats {
                commands: a.commands + b.commands,
                round_trips: a.round_trips + b.round_trips,
                keys_read: a.keys_read + b.keys_read,
                errors: a.errors + b.errors,
                timeouts: a.timeouts + b.timeouts,
                rejected: a.rejected + b.rejected,
                breaker_open: a.breaker_open || b.breaker_open,
                breaker_trips: a.breaker_trips + b.breaker_trips,
            });
            out.push_str(&sum.to_prometheus("gateway_redis"));
        }
        for tier in &self.tiers {
            if let Some(layered) = &tier.layered {
                let l = layered.stats();
                crate::metrics::family(
                    &mut out,
                    "counter",
                    "gateway_cache_layer_hits_total",
                    "Layered storage: reads answered by the in-process L1 or by Redis (L2).",
                    [("layer=\"l1\"", l.l1_hits), ("layer=\"l2\"", l.l2_hits)],
                );
                crate::metrics::family(
                    &mut out,
                    "counter",
                    "gateway_cache_invalidation_messages_total",
                    "Layered storage: invalidations published to and received from other gateways.",
                    [
                        ("direction=\"published\"", l.published),
                        ("direction=\"received\"", l.received),
                    ],
                );
                crate::metrics::family(
                    &mut out,
                    "gauge",
                    "gateway_cache_invalidation_subscribed",
                    "Layered storage: 1 while subscribed to other gateways' invalidations.",
                    [("", u64::from(l.subscribed))],
                );
            }
        }
        out
    }

    /// Where `--storage`'s entries live.
    pub fn storage(&self) -> StorageKind {
        self.tiers[0].kind
    }

    fn slot(&self, name: &str) -> Slot {
        if let Some(slot) = self
            .slots
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
        {
            return slot.clone();
        }
        let rule = Arc::new(
            self.settings
                .policies
                .policy
                .get(name)
                .cloned()
                .unwrap_or_default(),
        );
        let policy = Policy::new()
            .ttl(rule.ttl.map_or(self.settings.ttl, Duration::from_secs_f64))
            .stale(
                rule.stale
                    .map_or(self.settings.stale, Duration::from_secs_f64),
            );
        let kind = rule
            .storage
            .as_deref()
            .and_then(|s| StorageKind::parse(s).ok());
        let tier = kind
            .and_then(|k| self.tiers.iter().position(|t| t.kind == k))
            .unwrap_or(0);
        let slot = Slot {
            tier,
            namespace: self.tiers[tier].cache.namespace_with(name, policy),
            rule,
        };
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        slots.entry(Arc::from(name)).or_insert(slot).clone()
    }

    /// The response for a resolver call in `namespace`: stored, shared with a call in
    /// flight, or fetched by `fetch`.
    pub async fn get_or_fetch<F, Fut>(
        &self,
        namespace: &str,
        call: CallKey<'_>,
        fetch: F,
    ) -> Result<Cached, FetchError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Cached, FetchError>> + Send + 'static,
    {
        let slot = self.slot(namespace);
        let rule = &slot.rule;
        let identified = rule
            .key
            .headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("authorization"));
        if rule.skip || (call.headers.contains_key(reqwest::header::AUTHORIZATION) && !identified) {
            return self.tiers[slot.tier]
                .cache
                .bypass(&slot.namespace, fetch)
                .await
                .map_err(unwrap_error);
        }
        // Only a policy that picks arguments pays for a filtered copy.
        let picked: Option<serde_json::Map<String, serde_json::Value>> =
            match (call.args, &rule.key.args) {
                (Some(all), Some(only)) => Some(
                    all.iter()
                        .filter(|(k, _)| only.contains(k))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
                _ => None,
            };
        let args = picked.as_ref().or(call.args);
        // Header values (extendKey) join the selection part of the key.
        let selection: std::borrow::Cow<'_, str> = if rule.key.headers.is_empty() {
            call.selection.into()
        } else {
            let mut text = call.selection.to_string();
            for header in &rule.key.headers {
                text.push('\u{0}');
                text.push_str(
                    call.headers
                        .get(header.as_str())
                        .and_then(|v: &HeaderValue| v.to_str().ok())
                        .unwrap_or(""),
                );
            }
            text.into()
        };
        let key = {
            let selection: &str = &selection;
            let mut parts = KeyParts::new().selection(&selection);
            if let Some(parent) = &call.parent {
                parts = parts.parent(parent);
            }
            if let Some(args) = &args {
                parts = parts.args(args);
            }
            slot.namespace.key(&parts)
        };
        let extra = rule.references.clone();
        self.tiers[slot.tier]
            .cache
            .get_or_fetch(key, &slot.namespace, move || async move {
                let response = fetch().await?;
                let mut references = extra;
                if let Some(data) = &response.data {
                    collect_references(data, &mut references);
                }
                let failed = !response.errors.is_empty();
                let mut fetched = Fetched::new(response).references(references);
                if failed {
                    // Shared with whoever waited for it, never kept.
                    fetched = fetched.ttl(Duration::ZERO).stale(Duration::ZERO);
                }
                Ok::<_, FetchError>(fetched)
            })
            .await
            .map_err(unwrap_error)
    }

    /// After a mutation in `namespace` answered `response`: drop every entry that
    /// refers to an entity in the result, plus the policy's own invalidations.
    pub async fn after_mutation(&self, namespace: &str, response: &UpstreamResponse) {
        if !self.settings.invalidation {
            return;
        }
        let mut patterns = self.slot(namespace).rule.invalidate.clone();
        if let Some(data) = &response.data {
            collect_references(data, &mut patterns);
        }
        if patterns.is_empty() {
            return;
        }
        // Every tier: an entity may be cached in any of them. A failure (Redis down)
        // is logged and counted by the store; the memory tiers are dropped anyway.
        for tier in &self.tiers {
            if let Err(e) = tier.cache.invalidate(patterns.clone()).await {
                tracing::warn!("cache invalidation after {namespace} failed: {e}");
            }
        }
    }
}

fn unwrap_error(error: CacheError) -> FetchError {
    match error {
        CacheError::Fetch(inner) => match inner.downcast_ref::<FetchError>() {
            Some(fetch) => fetch.clone(),
            None => FetchError::Unavailable {
                subgraph: "cache".into(),
                detail: inner.to_string(),
            },
        },
        other => FetchError::Unavailable {
            subgraph: "cache".into(),
            detail: other.to_string(),
        },
    }
}

/// `Type:key` for every object in `value` that came with its `__typename` and key
/// fields (the planner asks for both on every entity), e.g. `User:u1`, `Post:p1`.
pub fn collect_references(value: &ConstValue, out: &mut Vec<String>) {
    match value {
        ConstValue::Object(map) => {
            if let Some(ConstValue::String(ty)) = map.get("__typename") {
                let mut key = String::new();
                for (name, v) in map {
                    if name.starts_with(KEY_ALIAS_PREFIX) {
                        if !key.is_empty() {
                            key.push(',');
                        }
                        match v {
                            ConstValue::String(s) => key.push_str(s),
                            other => key.push_str(&other.to_string()),
                        }
                    }
                }
                if !key.is_empty() {
                    let reference = format!("{ty}:{key}");
                    if !out.contains(&reference) {
                        out.push(reference);
                    }
                }
            }
            for v in map.values() {
                collect_references(v, out);
            }
        }
        ConstValue::List(items) => items.iter().for_each(|v| collect_references(v, out)),
        _ => {}
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

    #[test]
    fn references_come_from_typename_and_keys() {
        let data: ConstValue = serde_json::from_str::<serde_json::Value>(
            r#"{"me":{"name":"John","__typename":"User","_gw_k_id":"u1","topPosts":[{"pid":"p1","__typename":"Post","_gw_k_pid":"p1"}]}}"#,
        )
        .map(|v| ConstValue::from_json(v).unwrap())
        .unwrap();
        let mut refs = Vec::new();
        collect_references(&data, &mut refs);
        assert_eq!(refs, ["User:u1", "Post:p1"]);
    }
}
