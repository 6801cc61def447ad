//! The Redis back end: entries shared between processes.
//!
//! [`RedisStorage`] is a `Storage<Bytes>`; wrap it in
//! [`Encoded`](super::Encoded) with a codec to store any `V`
//! (`Encoded<RedisStorage, JsonCodec>`), or put a memory tier in front of it
//! with [`LayeredStorage`](super::LayeredStorage).
//!
//! The store talks to one Redis ([`RedisStorage::builder`]) or to a Redis Cluster
//! ([`RedisStorage::cluster_builder`], given seed nodes).
//!
//! This file is the store: its reads and writes. Beside it, one file per role:
//! [`builder`] (its configuration), [`connection`] (one server or a cluster, and the
//! round trip every command takes: breaker, timeout, counters), [`batcher`]
//! (auto-pipelined reads), [`invalidation`] (removing entries by reference, key or
//! prefix), [`gc`] (the reference sets' garbage collection) and [`stats`] (the
//! counters and their Prometheus text). The circuit breaker is [`crate::breaker`],
//! shared with any other client of a remote backend.
//!
//! # Layout in Redis
//!
//! With the default prefix `gcl:`:
//! - `gcl:e:<key>` (the key as 32 hex digits) holds one entry as an
//!   [`Envelope`]: version, fresh and stale deadlines in wall-clock
//!   milliseconds, namespace, encoded value. No JSON wrapping. It is written
//!   with `SET … PX <ttl + stale>`, so Redis drops it when it can no longer
//!   be served.
//! - `gcl:r:<reference>` is a set of the keys (32 hex digits) of the entries
//!   carrying that reference. Each `set` adds its key with `SADD` and gives
//!   the set at least the entry's lifetime with `PEXPIRE … NX` then
//!   `PEXPIRE … GT` (Redis 7.0 or later), so a set outlives every entry it
//!   names and then goes away by itself.
//! - Members whose entry expired or was replaced stay in their sets until
//!   the set expires, an invalidation removes them, or [`RedisStorage::gc`]
//!   runs. They are harmless: invalidating them deletes nothing (or an
//!   entry that was re-stored under the same key, which is a conservative
//!   over-invalidation).
//!
//! # On a Redis Cluster
//!
//! The keys carry no hash tag, deliberately: each entry `gcl:e:<key>` hashes by its own
//! key, so the entries spread over all 16384 slots and so over every master, and each
//! reference set `gcl:r:<reference>` hashes by its own name, so it sits in a slot of
//! its own, usually on another master than the entries it names. No command, pipeline or
//! script ever names keys of two slots; what needs both sides goes in steps of one-slot
//! groups ([`connection`]):
//! - `set`: `SET` of the entry on its slot, then, per reference, `SADD` + the two
//!   `PEXPIRE`s on the set's slot (concurrently across sets; the entry first, which GC
//!   relies on);
//! - `invalidate`: `SMEMBERS` of each set, then `GETRANGE` + `UNLINK` per entry on the
//!   entry's slot, then `SREM` on each set's slot. A prefix finds its sets by `SCAN` on
//!   every master in turn;
//! - `gc`: `SMEMBERS`, `EXISTS` per member's entry, `SREM` of the dead ones, and a
//!   re-check that puts back a member whose entry was stored meanwhile (see [`gc`]; the
//!   former Lua script read entry keys it was not given, which a cluster refuses);
//! - reads: one `MGET`, which the cluster client splits per slot (see [`connection`]
//!   for why that beats the alternatives).
//!
//! Hash-tagging an entry with its references is impossible (an entry has several, and a
//! reference names many entries), and tagging everything alike (`{gcl}`) would put the
//! whole cache on one master. A prefix with braces (`{gcl}:`) does exactly that, if one
//! wants it. The invalidation channel is a classic pub/sub channel, which the cluster
//! bus broadcasts to every node (see [`LayeredStorage`](super::LayeredStorage)).
//!
//! # Operations
//!
//! - `get`: `GET`; `get_many`: one `MGET`. With auto-pipelining (the
//!   default) each `get` is queued for the [`batcher`], which sends the gets of
//!   one scheduling turn as one `MGET`; its queue and its `MGET`s in flight are
//!   bounded, and a `get` that finds the queue full is refused at once (a miss).
//! - `set`: one pipeline of `SET` plus, per reference, `SADD` and the two
//!   `PEXPIRE`s.
//! - `invalidate`, `delete`, `clear`: see [`invalidation`]. A `delete` leaves the
//!   key's reference-set memberships to expiry or [`gc`](RedisStorage::gc) (the
//!   references are not stored with the entry); `clear` never runs `FLUSHDB`.
//! - Removals are counted per namespace from the entry heads. A namespace
//!   longer than 256 bytes is counted as `(unknown)`.
//!
//! # Faults
//!
//! A cache call never fails because of Redis: a failed read is a miss and
//! a failed write "not stored" (the cache counts both as storage errors).
//! This module keeps the failures cheap:
//! - the connection is a `redis::aio::ConnectionManager` (on a cluster, the
//!   cluster client's connection), created lazily: building the store does
//!   not touch the network, and a Redis that is down at start is just a
//!   failing store until it comes up. Both reconnect by themselves after a
//!   lost connection (the cluster client also re-reads the slot map);
//! - every round trip has a timeout (default 250 ms);
//! - a circuit breaker: after `threshold` consecutive transport failures or
//!   timeouts (default 5) it opens for `cooldown` (default 1 s), during
//!   which calls fail at once without touching the network. Then one call
//!   is let through as a probe: success closes the breaker, failure opens
//!   it again. A server error reply (e.g. `WRONGTYPE`) proves the server is
//!   reachable and does not count as a failure.
//!
//! # Counting
//!
//! [`RedisStorage::stats`] gives atomic counters: commands (a pipeline of k
//! commands counts k; an `MGET` of n keys counts 1), round trips (a
//! pipeline or an `MGET` counts 1), keys read, errors, timeouts, calls
//! refused by the open breaker or the full queue, breaker trips and state.
//!
//! # Limits
//!
//! - Needs Redis 7.0 or later (`PEXPIRE … NX|GT`). Tested with 7.0 and a
//!   three-master cluster without replicas.
//! - Invalidation is not atomic with a concurrent `set` in another process:
//!   a value fetched before the invalidation may land after it. The cache's
//!   race check covers the fetches of its own process only.
//! - On a cluster, a write with references and an invalidation take one request per
//!   slot they touch (concurrent, so about one round trip per step), where one server
//!   takes one pipeline; a master that is down fails the calls that touch its slots
//!   (misses and "not stored", as with a single Redis that is down), and the breaker
//!   is the store's, not per master.

mod batcher;
mod builder;
mod connection;
mod gc;
mod invalidation;
mod stats;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use redis::RedisError;

use self::batcher::Batcher;
pub use self::builder::RedisStorageBuilder;
use self::connection::{Connection, Group};
pub use self::gc::{GcMode, GcReport};
use self::stats::Counts;
pub use self::stats::RedisStats;
use super::{Entry, Envelope, Removals, Storage, StorageFuture, StorageResult, Stored};
use crate::breaker::Breaker;
use crate::error::StorageError;
use crate::key::CacheKey;
use crate::references::ReferencePattern;

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "gcl:";
/// The default timeout of one round trip.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_millis(250);
/// The default number of consecutive failures that opens the breaker.
pub const DEFAULT_BREAKER_THRESHOLD: u32 = 5;
/// The default time the breaker stays open before a probe.
pub const DEFAULT_BREAKER_COOLDOWN: Duration = Duration::from_secs(1);
/// The default bound on the keys of one auto-pipelined `MGET`.
pub const DEFAULT_MAX_BATCH: usize = 512;
/// The default bound on the gets waiting for the batcher.
pub const DEFAULT_QUEUE_CAPACITY: usize = 4096;
/// The default bound on the batcher's `MGET`s in flight.
pub const DEFAULT_BATCHES_IN_FLIGHT: usize = 32;

/// How many keys `SCAN` is asked to look at per call.
const SCAN_COUNT: usize = 1000;
/// The longest ttl given to Redis (100 years): Redis refuses expiry times
/// that overflow its clock.
const MAX_TTL_MILLIS: u64 = 100 * 365 * 24 * 3600 * 1000;

/// Why a Redis call failed without a reply from Redis. Wrapped in
/// [`StorageError::Backend`]; reach it with `downcast_ref`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RedisFault {
    /// The circuit breaker is open: the call did not touch the network.
    #[error("redis circuit breaker open")]
    BreakerOpen,
    /// No reply within the command timeout.
    #[error("redis command timed out after {0:?}")]
    Timeout(Duration),
    /// The auto-pipelining queue is full: the get was refused without waiting.
    #[error("redis auto-pipelining queue full")]
    QueueFull,
    /// The store's batcher task is gone (its runtime shut down).
    #[error("redis batcher stopped")]
    BatcherStopped,
    /// A cluster store was configured without a seed node.
    #[error("redis cluster needs at least one seed node")]
    NoSeeds,
    /// The store was built outside a tokio runtime.
    #[error("RedisStorage must be built inside a tokio runtime")]
    NoRuntime,
}

/// The Redis back end. Cheap to clone: clones share the connection, the
/// batcher, the breaker and the counters.
#[derive(Clone)]
pub struct RedisStorage {
    inner: Arc<RedisInner>,
}

struct RedisInner {
    core: Arc<Core>,
    /// One client per seed (one server: its client), for pub/sub connections.
    clients: Vec<redis::Client>,
    /// The auto-pipelining batcher (when on). Dropping it ends its task.
    batcher: Option<Batcher>,
    /// Where the next lazy GC step starts.
    gc_cursor: Mutex<u64>,
}

/// What the batcher task shares with the store.
struct Core {
    conn: Connection,
    prefix: String,
    entry_prefix: String,
    ref_prefix: String,
    timeout: Duration,
    breaker: Breaker,
    counts: Counts,
}

impl RedisStorage {
    /// A store for `url` with the defaults (see [`RedisStorageBuilder`]).
    pub fn new(url: impl Into<String>) -> Result<Self, StorageError> {
        Self::builder(url).build()
    }

    /// Whether the store talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.inner.core.is_cluster()
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.core.prefix
    }

    /// The counters now.
    pub fn stats(&self) -> RedisStats {
        let core = &self.inner.core;
        core.counts.snapshot(&core.breaker)
    }

    /// One `PING` round trip (through the breaker and the timeout): whether
    /// Redis answers now.
    pub async fn ping(&self) -> Result<(), StorageError> {
        self.inner.core.command(redis::cmd("PING")).await
    }

    /// Invalidates like [`Storage::invalidate`] and also returns the keys
    /// of the entries it removed (for a layered store to tell its peers).
    pub async fn invalidate_keys(
        &self,
        patterns: &[ReferencePattern],
    ) -> Result<(Removals, Vec<CacheKey>), StorageError> {
        self.inner.core.invalidate(patterns).await
    }

    /// `PUBLISH channel payload`, through the breaker and the timeout. On a cluster
    /// the client sends it to the master of the channel name's slot, and the cluster
    /// bus forwards a classic `PUBLISH` to every node, so a subscriber on any node
    /// hears it.
    pub async fn publish(&self, channel: &str, payload: &[u8]) -> Result<(), StorageError> {
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(channel).arg(payload);
        self.inner.core.command(cmd).await
    }

    /// Clients to subscribe through, in the order to try them: one server's own; on a
    /// cluster, the masters it reports now (when it answers), then the seeds.
    pub(crate) async fn pubsub_clients(&self) -> Vec<redis::Client> {
        let mut clients = Vec::new();
        if let Ok(masters) = self.inner.core.masters().await {
            for master in masters {
                let url = format!("redis://{}:{}", master.host, master.port);
                clients.extend(redis::Client::open(url).ok());
            }
        }
        clients.extend(self.inner.clients.iter().cloned());
        clients
    }
}

impl Storage<Bytes> for RedisStorage {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn get(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Option<Stored<Bytes>>>> {
        StorageFuture::boxed(async move {
            let core = &self.inner.core;
            let Some(batcher) = &self.inner.batcher else {
                core.counts.keys_read.fetch_add(1, Ordering::Relaxed);
                let mut cmd = redis::cmd("GET");
                cmd.arg(core.entry_key(key));
                let found: Option<Vec<u8>> = core.command(cmd).await?;
                return found.map(open).transpose();
            };
            batcher.get(core, key).await
        })
    }

    fn get_many<'a>(
        &'a self,
        keys: &'a [CacheKey],
    ) -> StorageFuture<'a, StorageResult<Vec<Option<Stored<Bytes>>>>> {
        StorageFuture::boxed(async move {
            let found = self.inner.core.mget(keys.iter().copied()).await?;
            found
                .into_iter()
                .map(|slot| slot.map(open).transpose())
                .collect()
        })
    }

    fn set(
        &self,
        key: CacheKey,
        entry: Entry<Bytes>,
        ttl: Duration,
    ) -> StorageFuture<'_, StorageResult<()>> {
        StorageFuture::boxed(async move {
            let core = &self.inner.core;
            let value = Envelope::seal(&entry);
            let millis = u64::try_from(ttl.as_millis())
                .unwrap_or(u64::MAX)
                .clamp(1, MAX_TTL_MILLIS);
            let member = key.to_string();
            let mut store = redis::cmd("SET");
            store
                .arg(core.entry_key(key))
                .arg(&value[..])
                .arg("PX")
                .arg(millis);
            let references: Vec<Group> = entry
                .references
                .iter()
                .map(|reference| {
                    add_to_set(
                        &core.ref_key(reference.as_str()),
                        &[member.as_str()],
                        millis,
                    )
                })
                .collect();
            // The entry first: GC relies on an entry existing before it joins its sets.
            core.exchange(vec![vec![vec![store]], references]).await?;
            Ok(())
        })
    }

    fn delete(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Removals>> {
        StorageFuture::boxed(async move {
            let core = &self.inner.core;
            let mut removals = Removals::new();
            core.remove_entries(&[core.entry_key(key)], &mut removals)
                .await?;
            Ok(removals)
        })
    }

    fn invalidate<'a>(
        &'a self,
        patterns: &'a [ReferencePattern],
    ) -> StorageFuture<'a, StorageResult<Removals>> {
        StorageFuture::boxed(async move {
            let (removals, _) = self.inner.core.invalidate(patterns).await?;
            Ok(removals)
        })
    }

    fn clear(&self) -> StorageFuture<'_, StorageResult<Removals>> {
        StorageFuture::boxed(async move { self.inner.core.clear().await })
    }

    fn read_in_flight(&self) -> bool {
        true
    }
}

/// `SADD set members…` and the set's ttl: at least `millis` from now (one slot).
fn add_to_set(set: &str, members: &[&str], millis: u64) -> Group {
    let mut add = redis::cmd("SADD");
    add.arg(set).arg(members);
    // NX gives a new set its ttl, GT lengthens an older one's.
    let mut new = redis::cmd("PEXPIRE");
    new.arg(set).arg(millis).arg("NX");
    let mut longer = redis::cmd("PEXPIRE");
    longer.arg(set).arg(millis).arg("GT");
    vec![add, new, longer]
}

/// Reads an entry's envelope.
fn open(bytes: Vec<u8>) -> StorageResult<Stored<Bytes>> {
    Envelope::open(Bytes::from(bytes)).map(|envelope| envelope.stored)
}

impl Core {
    fn entry_key(&self, key: CacheKey) -> String {
        format!("{}{key}", self.entry_prefix)
    }

    fn ref_key(&self, reference: &str) -> String {
        format!("{}{reference}", self.ref_prefix)
    }
}

/// Whether an error says Redis could not be reached (as opposed to an
/// error reply from a reachable server).
fn is_transport(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
        || error.is_unrecoverable_error()
}

/// `text` with the glob characters of `SCAN MATCH` escaped.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\' | '^' | '-') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
