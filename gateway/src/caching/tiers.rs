//! Where entries live: one cache-core cache per storage kind in use (a tier), and
//! how pieces are encoded for Redis.
//!
//! `--storage memory` is moka in the process (bounded by `--cache-max-entries`,
//! evicting as `--cache-eviction` says); `redis` is shared by every gateway on
//! that Redis; `layered` puts a short-lived moka L1 in front of Redis and hears of
//! other gateways' invalidations on a Redis channel. A policy's `storage` puts one
//! field in another tier. `redis` and `layered` are never mixed in one gateway: they
//! would share Redis's keys, and one's invalidation would empty the other's entries
//! without telling its L1s.

use bytes::Bytes;
use cache_core::storage::{
    Codec, Encoded, Held, LayeredStorage, MemoryStorage, RedisStats, RedisStorage,
};
use cache_core::{Cache, ReportTask, StorageError};

use super::settings::{CacheSettings, StorageKind};
use crate::answer::piece::Piece;

/// One cache-core cache over one kind of storage.
pub struct Tier {
    pub kind: StorageKind,
    pub cache: Cache<Piece>,
    /// The Redis store behind a `redis` or `layered` tier, for its counters.
    pub redis: Option<RedisStorage>,
    pub layered: Option<LayeredStorage<Piece>>,
    /// The in-process store of a `memory` tier, for what it holds.
    pub memory: Option<MemoryStorage<Piece>>,
    _report: Option<ReportTask>,
}

/// Pieces as Redis keeps them: their value's JSON text, as the subgraph sent it. A
/// piece that carries errors is never stored, so errors need no encoding.
struct PieceCodec;

impl Codec<Piece> for PieceCodec {
    fn encode(&self, value: &Piece) -> Result<Bytes, StorageError> {
        Ok(Bytes::copy_from_slice(value.json()))
    }

    fn decode(&self, bytes: &[u8]) -> Result<Piece, StorageError> {
        Piece::from_json(Bytes::copy_from_slice(bytes)).map_err(StorageError::codec)
    }
}

impl Tier {
    /// Must be called inside a tokio runtime (Redis stores run a task; a report
    /// interval starts one).
    pub fn build(kind: StorageKind, settings: &CacheSettings) -> Result<Tier, String> {
        let builder = Cache::builder()
            .ttl(settings.ttl)
            .stale(settings.stale)
            // stale-if-error's answers are flagged in the response's extensions.
            .mark_served_stale(|piece: &Piece, stale_for| piece.served_stale(stale_for));
        let redis = match kind {
            StorageKind::Memory => None,
            _ => {
                let r = settings.redis.as_ref().ok_or_else(|| {
                    format!(
                        "storage {} needs --redis URL or --redis-cluster URL[,URL...]",
                        kind.name()
                    )
                })?;
                Some(r.store()?)
            }
        };
        let mut layered = None;
        let mut memory = None;
        let cache = match (kind, &redis, &settings.redis) {
            (StorageKind::Redis, Some(store), _) => builder
                .storage(Encoded::new(store.clone(), PieceCodec))
                .build(),
            (StorageKind::Layered, Some(store), Some(r)) => {
                let l1 = LayeredStorage::builder()
                    .l1_ttl(r.l1_ttl)
                    .l1_max_entries(r.l1_max_entries)
                    .build_redis(store.clone(), PieceCodec);
                layered = Some(l1.clone());
                builder.storage(l1).build()
            }
            _ => {
                let store = MemoryStorage::builder()
                    .max_entries(settings.max_entries)
                    .eviction(settings.eviction)
                    .build();
                memory = Some(store.clone());
                builder.storage(store).build()
            }
        };
        let report = settings
            .report_interval
            .and_then(|every| cache.log_every(every).ok());
        Ok(Tier {
            kind,
            cache,
            redis,
            layered,
            memory,
            _report: report,
        })
    }
}

/// `value` escaped for a Prometheus label.
pub fn label_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Prometheus text for the tiers: the per-namespace counters summed over tiers
/// (`gateway_cache_*_total`, with the strategies' decisions in
/// `gateway_cache_strategy_decisions_total`), what the memory tiers hold per namespace
/// (`gateway_cache_entries`, `gateway_cache_bytes`: each entry's piece, its share of the
/// tape it keeps alive included, and its bookkeeping), Redis's commands and round trips
/// (`gateway_redis_*`), and the layered store's L1/L2 hits and invalidation messages.
pub fn prometheus(tiers: &[Tier]) -> String {
    let mut stats = cache_core::StatsSnapshot::default();
    for tier in tiers {
        stats.merge(&tier.cache.stats());
    }
    let mut out = stats.to_prometheus("gateway_cache");
    let mut held: Vec<Held> = Vec::new();
    for store in tiers.iter().filter_map(|t| t.memory.as_ref()) {
        for h in store.held(Piece::heap_size) {
            match held.iter_mut().find(|k| k.namespace == h.namespace) {
                Some(k) => {
                    k.entries += h.entries;
                    k.bytes += h.bytes;
                }
                None => held.push(h),
            }
        }
    }
    if tiers.iter().any(|t| t.memory.is_some()) {
        // Every namespace the cache has seen, holding nothing or not (TTL 0 stores nothing).
        for ns in &stats.namespaces {
            if !held.iter().any(|h| *h.namespace == *ns.namespace) {
                held.push(Held {
                    namespace: ns.namespace.as_str().into(),
                    entries: 0,
                    bytes: 0,
                });
            }
        }
        held.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        let labelled = |pick: fn(&Held) -> u64| {
            held.iter()
                .map(move |h| {
                    (
                        format!("namespace=\"{}\"", label_value(&h.namespace)),
                        pick(h),
                    )
                })
                .collect::<Vec<_>>()
        };
        crate::server::metrics::family(
            &mut out,
            "gauge",
            "gateway_cache_entries",
            "Entries the in-process store holds now.",
            labelled(|h| h.entries),
        );
        crate::server::metrics::family(
            &mut out,
            "gauge",
            "gateway_cache_bytes",
            "Bytes the in-process store's entries hold now: each piece's heap (its tape) and the entry's bookkeeping.",
            labelled(|h| h.bytes),
        );
    }
    let redis: Vec<RedisStats> = tiers
        .iter()
        .filter_map(|t| t.redis.as_ref().map(RedisStorage::stats))
        .collect();
    if !redis.is_empty() {
        let sum = redis.iter().fold(RedisStats::default(), RedisStats::merge);
        out.push_str(&sum.to_prometheus("gateway_redis"));
    }
    for tier in tiers {
        if let Some(layered) = &tier.layered {
            let l = layered.stats();
            crate::server::metrics::family(
                &mut out,
                "counter",
                "gateway_cache_layer_hits_total",
                "Layered storage: reads answered by the in-process L1 or by Redis (L2).",
                [("layer=\"l1\"", l.l1_hits), ("layer=\"l2\"", l.l2_hits)],
            );
            crate::server::metrics::family(
                &mut out,
                "counter",
                "gateway_cache_invalidation_messages_total",
                "Layered storage: invalidations published to and received from other gateways.",
                [
                    ("direction=\"published\"", l.published),
                    ("direction=\"received\"", l.received),
                ],
            );
            crate::server::metrics::family(
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
