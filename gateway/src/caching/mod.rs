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
//! For cache-core both are failed fetches (a piece with errors travels as the
//! error), so the strategies' `recover` sees them: `stale-if-error` may answer with
//! the expired entry instead, which the response then flags in its `extensions`.
//!
//! **Strategies** (`--strategy`, a policy's `strategies`) are cache-core's, built by
//! name from its registry; each field's list is part of its namespace's policy. The
//! fetch hands them what the subgraph said about its answer (`Cache-Control`) and
//! whether the key names the caller (its policy keys by `authorization` and the
//! request sent one), so `origin-ttl` can keep `private` answers per caller only.
//!
//! **Reuse across operations.** Every piece carries the origin of the operation that
//! fetched it ([`Piece::origin`]); a call answered with a piece another operation
//! fetched is counted per namespace (`gateway_cache_cross_operation_total`, `how` =
//! `hit` for a stored entry, `in_flight` for a fetch joined, or stored while the call
//! was on its way). Counting costs one integer compare per answer.
//!
//! **Where entries live**: `tiers`. **What is configured**: `settings`, and what
//! is refused because one setting would silently cancel another: `conflicts`.
//! **Whole requests** (coalescing, the response strategy): [`requests`].
//!
//! The executor ([`crate::execute`]) asks this layer for a [`Call`] per fetch (the
//! key, or a bypass), then hands a batch of calls and one fetch closure to
//! [`ResolverCache::fetch`], which runs cache-core's `get_or_fetch_many`: hits come
//! back at once, calls in flight elsewhere are joined, and the closure is asked once
//! for all the misses (one subgraph request).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use cache_core::{BatchCall, CacheError, CacheKey, Fetched, KeyParts, Namespace, Policy};

mod conflicts;
mod references;
pub mod requests;
mod settings;
mod tiers;

pub use conflicts::{check_flags, check_policy_against, TUNING_FLAGS};
pub use references::collect as collect_references;

pub use settings::{
    build_strategies, CacheSettings, FieldPolicy, KeyPolicy, PolicyFile, RedisSettings,
    RedisTarget, StorageKind,
};

use crate::answer::piece::Piece;
use crate::fast_map::FastMap;
use crate::plan::{EntityGroup, Fetch, Plan, RootFetch};
use crate::server::request::RequestInput;
use crate::upstream::FetchError;
use tiers::Tier;

/// One namespace's cache handle and rule, made once per namespace and shared (a
/// call holds it by one reference count).
struct Slot {
    /// Which of the [`Tier`]s holds this namespace's entries.
    tier: usize,
    namespace: Namespace<Piece>,
    rule: Arc<FieldPolicy>,
    /// Whether the key includes the caller's `authorization` (then calls carrying it
    /// are cached per caller instead of skipped).
    keyed_by_caller: bool,
    /// Calls of this namespace answered with a piece another operation fetched.
    crossed: Crossed,
}

/// One namespace's calls answered with another operation's piece.
#[derive(Default)]
struct Crossed {
    /// By a stored entry.
    hits: AtomicU64,
    /// By a fetch another operation had in flight (or stored meanwhile).
    in_flight: AtomicU64,
}

/// One fetch as the cache sees it: where it is counted and stored, its key
/// (`None`: it bypasses the cache), and whether that key names the caller.
pub struct Call {
    slot: Arc<Slot>,
    key: Option<CacheKey>,
    per_caller: bool,
}

/// What the cache must know of a call's fetched piece, beyond the piece: the
/// policy's extra references and whether the key names the caller.
#[derive(Clone)]
struct Keeping {
    rule: Arc<FieldPolicy>,
    per_caller: bool,
}

impl Call {
    fn keeping(&self) -> Keeping {
        Keeping {
            rule: self.slot.rule.clone(),
            per_caller: self.per_caller,
        }
    }
}

/// The gateway's resolver cache.
pub struct ResolverCache {
    /// `tiers[0]` is `--storage`'s.
    tiers: Vec<Tier>,
    settings: CacheSettings,
    slots: RwLock<FastMap<Arc<str>, Arc<Slot>>>,
}

impl ResolverCache {
    /// Must be called inside a tokio runtime. Fails when a storage in use needs
    /// Redis and `settings.redis` is absent or its URL malformed; a Redis that is
    /// down is not an error (the cache then fetches, and counts storage errors).
    pub fn new(settings: CacheSettings) -> Result<ResolverCache, String> {
        settings.check()?;
        let mut kinds = vec![settings.storage];
        for rule in settings.policies.policy.values() {
            if let Some(kind) = rule.storage.as_deref().map(StorageKind::parse) {
                let kind = kind?;
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
        }
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
            slots: RwLock::new(FastMap::default()),
        })
    }

    /// Prometheus text: the per-namespace counters (`gateway_cache_*_total`), and
    /// with Redis in use its commands and round trips and the layered store's hits.
    pub fn prometheus(&self) -> String {
        let mut out = tiers::prometheus(&self.tiers);
        let slots = self.slots.read().unwrap_or_else(|p| p.into_inner());
        let mut names: Vec<&Arc<str>> = slots.keys().collect();
        names.sort();
        crate::server::metrics::family(
            &mut out,
            "counter",
            "gateway_cache_cross_operation_total",
            "Calls answered with a piece another operation fetched: a stored entry (hit) or a fetch in flight (in_flight).",
            names.iter().flat_map(|name| {
                let crossed = &slots[*name].crossed;
                let name = tiers::label_value(name);
                [
                    (
                        format!("namespace=\"{name}\",how=\"hit\""),
                        crossed.hits.load(Relaxed),
                    ),
                    (
                        format!("namespace=\"{name}\",how=\"in_flight\""),
                        crossed.in_flight.load(Relaxed),
                    ),
                ]
            }),
        );
        out
    }

    /// Where `--storage`'s entries live.
    pub fn storage(&self) -> StorageKind {
        self.tiers[0].kind
    }

    fn slot(&self, name: &str) -> Arc<Slot> {
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
        // A field's own list was checked when the policy file loaded.
        let strategies = match &rule.strategies {
            Some(specs) => build_strategies(specs, name).unwrap_or_else(|e| {
                tracing::warn!("{e}");
                Vec::new()
            }),
            None => self.settings.strategies.clone(),
        };
        let policy = Policy::new()
            .ttl(rule.ttl.map_or(self.settings.ttl, Duration::from_secs_f64))
            .stale(
                rule.stale
                    .map_or(self.settings.stale, Duration::from_secs_f64),
            )
            .strategies(strategies);
        let kind = rule
            .storage
            .as_deref()
            .and_then(|s| StorageKind::parse(s).ok());
        let tier = kind
            .and_then(|k| self.tiers.iter().position(|t| t.kind == k))
            .unwrap_or(0);
        let keyed_by_caller = rule
            .key
            .headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("authorization"));
        let slot = Arc::new(Slot {
            tier,
            namespace: self.tiers[tier].cache.namespace_with(name, policy),
            rule,
            keyed_by_caller,
            crossed: Crossed::default(),
        });
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        slots.entry(Arc::from(name)).or_insert(slot).clone()
    }

    /// Whether a call of `slot` by this request must bypass the cache: the policy
    /// skips the field, or the caller sent credentials the key does not include.
    fn bypassed(slot: &Slot, input: &RequestInput) -> bool {
        slot.rule.skip || (input.authorization.is_some() && !slot.keyed_by_caller)
    }

    /// A call of `slot` by this request under `key`.
    fn call(slot: Arc<Slot>, key: Option<CacheKey>, input: &RequestInput) -> Call {
        let per_caller = key.is_some() && slot.keyed_by_caller && input.authorization.is_some();
        Call {
            slot,
            key,
            per_caller,
        }
    }

    /// The call for root field `root` (fetch `fetch` of `plan`): keyed by its
    /// namespace, its arguments (those the policy picks) and its sub-selection, with
    /// the values of the variables it uses and of the headers the policy names.
    pub fn root_call(
        &self,
        _plan: &Plan,
        fetch: &Fetch,
        root: &RootFetch,
        input: &RequestInput,
    ) -> Call {
        let slot = self.slot(&root.namespace);
        if Self::bypassed(&slot, input) {
            return Self::call(slot, None, input);
        }
        let constant = fetch.variables.is_empty() && slot.rule.key.headers.is_empty();
        if constant {
            if let Some(&key) = root.constant_key.get() {
                return Self::call(slot, Some(CacheKey::from_u128(key)), input);
            }
        }
        let args: serde_json::Map<String, serde_json::Value> = root
            .args
            .iter()
            .filter(|(name, _)| {
                slot.rule
                    .key
                    .args
                    .as_ref()
                    .is_none_or(|only| only.iter().any(|a| a == name.as_str()))
            })
            .filter_map(|(name, value)| Some((name.to_string(), input.resolve(value)?)))
            .collect();
        let selection = self.selection_part(&slot, &root.selection, &fetch.variables, input);
        let key = slot
            .namespace
            .key(&KeyParts::new().args(&args).selection(&selection.as_ref()));
        if constant {
            let _ = root.constant_key.set(key.as_u128());
        }
        Self::call(slot, Some(key), input)
    }

    /// The call for an entity of `group` (of fetch `fetch`), in `namespace` (its
    /// type's, [`EntityGroup::namespace`]), whose representation (its `__typename`, key fields and `@requires` inputs,
    /// as JSON) is `representation`: two callers whose required inputs differ never
    /// share an entry.
    pub fn entity_call(
        &self,
        fetch: &Fetch,
        group: &EntityGroup,
        namespace: &str,
        representation: &str,
        input: &RequestInput,
    ) -> Call {
        let slot = self.slot(namespace);
        if Self::bypassed(&slot, input) {
            return Self::call(slot, None, input);
        }
        let selection = self.selection_part(&slot, &group.selection, &fetch.variables, input);
        let key = slot.namespace.key(
            &KeyParts::new()
                .parent(&representation)
                .selection(&selection.as_ref()),
        );
        Self::call(slot, Some(key), input)
    }

    /// The selection text, followed by the values of the variables it uses and of
    /// the headers the policy keys by (mercurius-cache's `extendKey`).
    fn selection_part<'s>(
        &self,
        slot: &Slot,
        selection: &'s str,
        variables: &[async_graphql_value::Name],
        input: &RequestInput,
    ) -> std::borrow::Cow<'s, str> {
        if variables.is_empty() && slot.rule.key.headers.is_empty() {
            return selection.into();
        }
        let mut text = selection.to_string();
        for name in variables {
            // As the operation coerces it: two documents that declare different
            // defaults for an unsent variable get different entries.
            text.push('\u{0}');
            match input.coerced(name) {
                Some(value) => text.push_str(&value.to_string()),
                None => text.push('?'),
            }
        }
        for header in &slot.rule.key.headers {
            text.push('\u{0}');
            text.push_str(
                input
                    .headers
                    .get(header.as_str())
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or(""),
            );
        }
        text.into()
    }

    /// The stored piece for `call` by the operation `origin`, when the storage has it
    /// fresh and can answer at once (counted as a hit, and as a cross-operation hit
    /// when another operation stored it); `None` sends the call to
    /// [`ResolverCache::fetch`].
    /// `refresher` is asked for the call's fetch (as [`ResolverCache::fetch`] takes
    /// it) only when a strategy wants the hit refreshed early; it then runs in the
    /// background. Freshness is judged at `now`, one clock reading the caller takes
    /// for all the calls it looks up at once.
    pub fn hit_at<R, F, Fut>(
        &self,
        call: &Call,
        origin: u64,
        now: Instant,
        refresher: R,
    ) -> Option<Piece>
    where
        R: FnOnce() -> F,
        F: Fn(Vec<usize>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<Piece, FetchError>>> + Send + 'static,
    {
        let key = call.key?;
        let keeping = call.keeping();
        let piece =
            self.tiers[call.slot.tier]
                .cache
                .hit_at(key, &call.slot.namespace, now, move || {
                    single(refresher(), keeping)
                })?;
        if piece.origin != origin && piece.origin != 0 {
            call.slot.crossed.hits.fetch_add(1, Relaxed);
        }
        Some(piece)
    }

    /// Resolve `calls` of the operation `origin` together: hits at once, calls in
    /// flight elsewhere joined, and one run of `fetch` (given the indices of the calls
    /// it must answer) for every miss and bypass. A piece with errors is handed to
    /// whoever waited for it but never stored. A call answered with a piece another
    /// operation fetched is counted (`in_flight`).
    pub async fn fetch<F, Fut>(
        &self,
        calls: &[Call],
        origin: u64,
        fetch: F,
    ) -> Vec<Result<Piece, FetchError>>
    where
        F: Fn(Vec<usize>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<Piece, FetchError>>> + Send + 'static,
    {
        let answers = self.fetch_all(calls, fetch).await;
        for (call, answer) in calls.iter().zip(&answers) {
            if let Ok(piece) = answer {
                if piece.origin != origin && piece.origin != 0 {
                    call.slot.crossed.in_flight.fetch_add(1, Relaxed);
                }
            }
        }
        answers
    }

    /// [`ResolverCache::fetch`] without the counting.
    async fn fetch_all<F, Fut>(&self, calls: &[Call], fetch: F) -> Vec<Result<Piece, FetchError>>
    where
        F: Fn(Vec<usize>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<Piece, FetchError>>> + Send + 'static,
    {
        if let [call] = calls {
            // One call (every root field, and many waves): the single-key path.
            return vec![self.fetch_one(call, fetch).await];
        }
        let mut tiers: Vec<usize> = calls.iter().map(|c| c.slot.tier).collect();
        tiers.sort_unstable();
        tiers.dedup();
        if let [tier] = tiers[..] {
            // The usual case: every call in one tier, indices as they are.
            return self.fetch_tier(tier, calls, None, fetch).await;
        }
        let mut results: Vec<Option<Result<Piece, FetchError>>> =
            calls.iter().map(|_| None).collect();
        for tier in tiers {
            // The calls of this tier, by their index in `calls`.
            let mine: Arc<[usize]> = (0..calls.len())
                .filter(|&i| calls[i].slot.tier == tier)
                .collect();
            let subset: Vec<&Call> = mine.iter().map(|&i| &calls[i]).collect();
            let answers = self
                .fetch_tier(tier, &subset, Some(mine.clone()), fetch.clone())
                .await;
            for (&i, answer) in mine.iter().zip(answers) {
                results[i] = Some(answer);
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| answer(Err(CacheError::Aborted))))
            .collect()
    }

    /// [`ResolverCache::fetch`] for one call, through cache-core's single-key path.
    async fn fetch_one<F, Fut>(&self, call: &Call, fetch: F) -> Result<Piece, FetchError>
    where
        F: Fn(Vec<usize>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<Piece, FetchError>>> + Send + 'static,
    {
        let cache = &self.tiers[call.slot.tier].cache;
        let one = single(fetch, call.keeping());
        answer(match call.key {
            Some(key) => cache.get_or_fetch(key, &call.slot.namespace, one).await,
            None => cache.bypass(&call.slot.namespace, one).await,
        })
    }

    /// [`ResolverCache::fetch`] for calls of one tier; `map` turns their indices into
    /// the indices `fetch` knows (none: the same).
    async fn fetch_tier<C, F, Fut>(
        &self,
        tier: usize,
        calls: &[C],
        map: Option<Arc<[usize]>>,
        fetch: F,
    ) -> Vec<Result<Piece, FetchError>>
    where
        C: std::borrow::Borrow<Call>,
        F: Fn(Vec<usize>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<Piece, FetchError>>> + Send + 'static,
    {
        let batch: Vec<BatchCall<'_, Piece>> = calls
            .iter()
            .map(|c| {
                let c = c.borrow();
                match c.key {
                    Some(key) => BatchCall::Cached {
                        key,
                        namespace: &c.slot.namespace,
                    },
                    None => BatchCall::Bypass {
                        namespace: &c.slot.namespace,
                    },
                }
            })
            .collect();
        // Each call's policy references and caller, only when some call needs them.
        let keeping: Option<Arc<[Keeping]>> = calls
            .iter()
            .any(|c| !c.borrow().slot.rule.references.is_empty() || c.borrow().per_caller)
            .then(|| calls.iter().map(|c| c.borrow().keeping()).collect());
        let fetch_tier = move |local: Vec<usize>| {
            let (fetch, map, keeping) = (fetch.clone(), map.clone(), keeping.clone());
            async move {
                let asked = match &map {
                    Some(map) => local.iter().map(|&l| map[l]).collect(),
                    None => local.clone(),
                };
                let pieces = fetch(asked).await;
                local
                    .iter()
                    .zip(pieces)
                    .map(|(&l, piece)| {
                        let (refs, per_caller) = keeping.as_ref().map_or((&[][..], false), |k| {
                            (&k[l].rule.references[..], k[l].per_caller)
                        });
                        keep(piece, refs, per_caller)
                    })
                    .collect::<Vec<_>>()
            }
        };
        self.tiers[tier]
            .cache
            .get_or_fetch_many(&batch, fetch_tier)
            .await
            .into_iter()
            .map(answer)
            .collect()
    }

    /// After a mutation in `namespace` answered `piece`: drop every entry that refers
    /// to an entity in the result, plus the policy's own invalidations. Nothing with
    /// `--invalidation off`.
    pub async fn after_mutation(&self, namespace: &str, piece: &Piece) {
        if !self.settings.invalidation {
            return;
        }
        let mut patterns = self.slot(namespace).rule.invalidate.clone();
        if let Some(value) = piece.value() {
            references::collect(value, &mut patterns);
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

/// A fetch that failed, as cache-core sees it: the subgraph could not be asked, or
/// it answered with errors (the piece then goes to every waiter as it is, and is
/// never stored).
#[derive(Debug)]
enum Failed {
    Upstream(FetchError),
    Answer(Box<Piece>),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Upstream(e) => e.fmt(f),
            Failed::Answer(piece) => match piece.errors().first() {
                Some(e) => write!(f, "the subgraph answered with errors: {}", e.message),
                None => f.write_str("the subgraph answered with errors"),
            },
        }
    }
}

impl std::error::Error for Failed {}

/// A fetched piece as cache-core keeps it: with its references (the entities in it,
/// plus the policy's), the subgraph's `Cache-Control` and whether the key names the
/// caller; a failure when it carries errors.
fn keep(
    fetched: Result<Piece, FetchError>,
    extra: &[String],
    per_caller: bool,
) -> Result<Fetched<Piece>, Failed> {
    let piece = fetched.map_err(Failed::Upstream)?;
    if !piece.errors().is_empty() {
        return Err(Failed::Answer(Box::new(piece)));
    }
    let mut refs = extra.to_vec();
    if let Some(value) = piece.value() {
        references::collect(value, &mut refs);
    }
    let directives = piece.cache_control;
    Ok(Fetched::new(piece)
        .references(refs)
        .cache_control(directives)
        .keyed_by_caller(per_caller))
}

/// One call's fetch as cache-core runs it, boxed.
type OneFetch = std::pin::Pin<Box<dyn Future<Output = Result<Fetched<Piece>, Failed>> + Send>>;

/// The one-call fetch cache-core runs for a call, out of the executor's `fetch`.
fn single<F, Fut>(fetch: F, keeping: Keeping) -> impl FnOnce() -> OneFetch + Send + 'static
where
    F: Fn(Vec<usize>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Vec<Result<Piece, FetchError>>> + Send + 'static,
{
    move || {
        Box::pin(async move {
            let answer = fetch(vec![0]).await.pop().unwrap_or_else(|| {
                Err(FetchError::Unavailable {
                    subgraph: "cache".into(),
                    detail: "the fetch returned no answer".into(),
                })
            });
            keep(answer, &keeping.rule.references, keeping.per_caller)
        })
    }
}

/// What the executor gets for a call: the piece (one with errors included), or why
/// there is none.
fn answer(result: Result<Piece, CacheError>) -> Result<Piece, FetchError> {
    let error = match result {
        Ok(piece) => return Ok(piece),
        Err(error) => error,
    };
    if let CacheError::Fetch(inner) = &error {
        match inner.downcast_ref::<Failed>() {
            Some(Failed::Answer(piece)) => return Ok((**piece).clone()),
            Some(Failed::Upstream(fetch)) => return Err(fetch.clone()),
            None => {}
        }
    }
    Err(FetchError::Unavailable {
        subgraph: "cache".into(),
        detail: error.to_string(),
    })
}
