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
//! **How a fetch becomes a call** (its namespace's slot, its key): `calls`. **How
//! calls are resolved** (hits, joined flights, one fetch for the misses, what is
//! kept of a fetched piece): `fetching`. **Where entries live**: `tiers`. **What is
//! configured**: `settings`, and what is refused because one setting would silently
//! cancel another: `conflicts`.
//! **Whole requests** (coalescing, the response strategy): [`requests`].
//!
//! The executor ([`crate::execute`]) asks this layer for a [`Call`] per fetch (the
//! key, or a bypass), then hands a batch of calls and one fetch closure to
//! [`ResolverCache::fetch`], which runs cache-core's `get_or_fetch_many`: hits come
//! back at once, calls in flight elsewhere are joined, and the closure is asked once
//! for all the misses (one subgraph request).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, RwLock};

mod callers;
mod calls;
mod conflicts;
pub mod edge;
mod fetching;
pub mod invalidation;
mod references;
pub mod requests;
mod settings;
mod tiers;

pub use calls::Call;
pub use conflicts::{check_flags, check_policy_against, TUNING_FLAGS};
pub use references::collect as collect_references;

pub use settings::{
    build_strategies, CacheSettings, FieldPolicy, KeyPolicy, PolicyFile, RedisSettings,
    RedisTarget, StorageKind,
};

use crate::answer::piece::Piece;
use crate::fast_map::FastMap;
use calls::Slot;
use tiers::Tier;

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

    /// Drop the entries holding a reference that matches `patterns` (every entry when
    /// `None`), in every tier; how many were dropped. A tier that fails (Redis down)
    /// fails the whole, after the others were dropped.
    pub async fn drop_entries(&self, patterns: Option<Vec<String>>) -> Result<u64, String> {
        let mut dropped = 0;
        let mut failed = None;
        for tier in &self.tiers {
            let result = match &patterns {
                Some(p) => tier.cache.invalidate(p.clone()).await,
                None => tier.cache.clear().await,
            };
            match result {
                Ok(n) => dropped += n,
                Err(e) => failed = Some(format!("the {} tier: {e}", tier.kind.name())),
            }
        }
        failed.map_or(Ok(dropped), Err)
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
        // is logged and counted by the store; the other tiers are dropped anyway.
        if let Err(e) = self.drop_entries(Some(patterns)).await {
            tracing::warn!("cache invalidation after {namespace} failed: {e}");
        }
    }
}
