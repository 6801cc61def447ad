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

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_graphql_value::ConstValue;
use cache_core::{Cache, CacheError, Fetched, KeyParts, Namespace, Policy, ReportTask};
use reqwest::header::{HeaderMap, HeaderValue};
use serde::Deserialize;

use crate::supergraph::KEY_ALIAS_PREFIX;
use crate::upstream::{FetchError, UpstreamResponse};

/// What the cache stores: a subgraph response for one resolver call.
pub type Cached = Arc<UpstreamResponse>;

/// How the gateway caches, from `--ttl`, `--stale`, `--policy` and friends.
#[derive(Debug, Clone)]
pub struct CacheSettings {
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
    /// Storage back end; `memory` is the only one so far.
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
            if let Some(storage) = rule.storage.as_deref().filter(|s| *s != "memory") {
                return Err(format!(
                    "--policy {}: {name}.storage = {storage:?}: only \"memory\" is available",
                    path.display()
                ));
            }
        }
        Ok(file)
    }
}

/// One namespace's cache handle and rule.
#[derive(Clone)]
struct Slot {
    namespace: Namespace<Cached>,
    rule: Arc<FieldPolicy>,
}

/// The gateway's resolver cache.
pub struct ResolverCache {
    cache: Cache<Cached>,
    settings: CacheSettings,
    slots: RwLock<HashMap<Arc<str>, Slot>>,
    _report: Option<ReportTask>,
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
    /// Must be called inside a tokio runtime when a report interval is set.
    pub fn new(settings: CacheSettings) -> ResolverCache {
        let cache = Cache::builder()
            .ttl(settings.ttl)
            .stale(settings.stale)
            .max_entries(settings.max_entries)
            .build();
        let report = settings
            .report_interval
            .and_then(|every| cache.log_every(every).ok());
        ResolverCache {
            cache,
            settings,
            slots: RwLock::new(HashMap::new()),
            _report: report,
        }
    }

    /// Prometheus text of the per-namespace counters (`gateway_cache_*_total`).
    pub fn prometheus(&self) -> String {
        self.cache.stats().to_prometheus("gateway_cache")
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
        let slot = Slot {
            namespace: self.cache.namespace_with(name, policy),
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
            return self
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
        self.cache
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
        let mut patterns = self.slot(namespace).rule.invalidate.clone();
        if let Some(data) = &response.data {
            collect_references(data, &mut patterns);
        }
        if patterns.is_empty() {
            return;
        }
        if let Err(e) = self.cache.invalidate(patterns).await {
            tracing::warn!("cache invalidation after {namespace} failed: {e}");
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
                "[policy.\"Query.me\"]\nstorage = \"redis\"\n",
                "only \"memory\"",
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
