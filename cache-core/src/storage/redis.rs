//! The Redis back end: entries shared between processes.
//!
//! [`RedisStorage`] is a `Storage<Bytes>`; wrap it in
//! [`Encoded`](super::Encoded) with a codec to store any `V`
//! (`Encoded<RedisStorage, JsonCodec>`), or put a memory tier in front of it
//! with [`LayeredStorage`](super::LayeredStorage).
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
//! # Operations
//!
//! - `get`: `GET`; `get_many`: one `MGET`. With auto-pipelining (the
//!   default) each `get` goes to a batcher task through a channel. The
//!   batcher wakes on the first request, yields once so the other callers of
//!   the same scheduling turn can queue theirs, drains the channel and
//!   sends one `MGET` for the lot (at most `max_batch` keys), answering each
//!   caller through a oneshot. It does not wait for that `MGET`: the next
//!   turn's batch can go out while it is in flight (the connection is
//!   multiplexed).
//! - `set`: one pipeline of `SET` plus, per reference, `SADD` and the two
//!   `PEXPIRE`s.
//! - `invalidate`: an exact reference reads its set (`SMEMBERS`); a prefix
//!   `User:*` finds its sets with `SCAN MATCH gcl:r:User:* COUNT 1000`
//!   (never `KEYS`). Then one pipeline per 512 entries reads each entry's
//!   head (`GETRANGE 0 274`: the namespace, for the per-namespace count)
//!   and `UNLINK`s it, and `SREM` takes the members out of their sets (not
//!   `DEL` of the set, so a member added meanwhile by another process is
//!   kept).
//! - `delete`: the same for one key. Its reference-set memberships are left
//!   to expiry or [`gc`](RedisStorage::gc) (the references are not stored
//!   with the entry).
//! - `clear`: `SCAN MATCH gcl:*` and the same removal, never `FLUSHDB`.
//! - Removals are counted per namespace from the entry heads. A namespace
//!   longer than 256 bytes is counted as `(unknown)`.
//! - [`gc`](RedisStorage::gc) drops members whose entry is gone: per set, a
//!   Lua script checks and removes them atomically (`EVAL`, so a member
//!   re-added between the check and the removal is not lost).
//!
//! # Faults
//!
//! A cache call never fails because of Redis: a failed read is a miss and
//! a failed write "not stored" (the cache counts both as storage errors).
//! This module keeps the failures cheap:
//! - the connection is a `redis::aio::ConnectionManager`, created lazily:
//!   building the store does not touch the network, and a Redis that is
//!   down at start is just a failing store until it comes up. The manager
//!   reconnects by itself after a lost connection;
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
//! refused by the open breaker, breaker trips and state.
//!
//! # Limits
//!
//! - Needs Redis 7.0 or later (`PEXPIRE … NX|GT`).
//! - Invalidation is not atomic with a concurrent `set` in another process:
//!   a value fetched before the invalidation may land after it. The cache's
//!   race check covers the fetches of its own process only.
//! - The GC script reads keys it was not given in `KEYS`: fine on a single
//!   Redis, not on Redis Cluster (which this store does not support).

use std::fmt::Write as _;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, RedisResult, Value};
use tokio::sync::{mpsc, oneshot};

use super::codec::{envelope_head_len, envelope_namespace};
use super::{Entry, Envelope, Removals, Storage, StorageFuture, StorageResult, Stored};
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

/// How many keys `SCAN` is asked to look at per call.
const SCAN_COUNT: usize = 1000;
/// Entries removed per pipeline.
const REMOVE_CHUNK: usize = 512;
/// Reference sets read per pipeline.
const SET_CHUNK: usize = 256;
/// The longest namespace read back from an entry's head.
const MAX_HEAD_NAMESPACE: usize = 256;
/// The longest ttl given to Redis (100 years): Redis refuses expiry times
/// that overflow its clock.
const MAX_TTL_MILLIS: u64 = 100 * 365 * 24 * 3600 * 1000;
/// Where removals of an entry whose namespace could not be read are counted.
const UNKNOWN_NAMESPACE: &str = "(unknown)";

/// Removes the members of one reference set whose entry is gone. `KEYS[1]`
/// is the set, `ARGV[1]` the entry-key prefix. Returns `{members, removed}`.
const GC_SCRIPT: &str = r#"
local members = redis.call('SMEMBERS', KEYS[1])
local removed = 0
for _, member in ipairs(members) do
  if redis.call('EXISTS', ARGV[1] .. member) == 0 then
    redis.call('SREM', KEYS[1], member)
    removed = removed + 1
  end
end
return {#members, removed}
"#;

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
    /// The store's batcher task is gone (its runtime shut down).
    #[error("redis batcher stopped")]
    BatcherStopped,
    /// The store was built outside a tokio runtime.
    #[error("RedisStorage must be built inside a tokio runtime")]
    NoRuntime,
}

/// Which garbage collection [`RedisStorage::gc`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcMode {
    /// One `SCAN` step of about `chunk` keys, from the cursor the store kept
    /// from the previous lazy call (a pass ends when the returned cursor is
    /// 0, and the next call starts a new one).
    Lazy {
        /// The `COUNT` hint of the `SCAN` step.
        chunk: usize,
    },
    /// A full pass over every reference set.
    Strict,
}

/// What one [`RedisStorage::gc`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Reference sets examined.
    pub scanned_sets: u64,
    /// Members of those sets examined.
    pub scanned_members: u64,
    /// Members removed because their entry is gone.
    pub removed_members: u64,
    /// Sets that lost every member (Redis deletes an empty set).
    pub removed_sets: u64,
    /// The `SCAN` cursor after the call: 0 when a pass is complete.
    pub cursor: u64,
}

/// The counters of a [`RedisStorage`], as of one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedisStats {
    /// Redis commands sent (an `MGET` counts 1, a pipeline of k counts k).
    pub commands: u64,
    /// Round trips (a single command, an `MGET` or a pipeline counts 1).
    pub round_trips: u64,
    /// Keys asked for by `get` and `get_many`.
    pub keys_read: u64,
    /// Round trips that failed (error reply, transport error or timeout).
    pub errors: u64,
    /// Of those, the ones that timed out.
    pub timeouts: u64,
    /// Calls refused at once by the open breaker (no network).
    pub rejected: u64,
    /// Whether the breaker is open or half-open now.
    pub breaker_open: bool,
    /// How many times the breaker opened.
    pub breaker_trips: u64,
}

impl RedisStats {
    /// Prometheus text exposition, metric names starting with `prefix`
    /// (`graphql_cache_redis` gives `graphql_cache_redis_commands_total`).
    pub fn to_prometheus(&self, prefix: &str) -> String {
        let mut out = String::new();
        let counters = [
            ("commands", "Redis commands sent.", self.commands),
            ("round_trips", "Redis round trips.", self.round_trips),
            ("keys_read", "Keys asked of Redis by gets.", self.keys_read),
            ("errors", "Redis round trips that failed.", self.errors),
            (
                "timeouts",
                "Redis round trips that timed out.",
                self.timeouts,
            ),
            (
                "rejected",
                "Calls refused by the open breaker.",
                self.rejected,
            ),
            (
                "breaker_trips",
                "Times the breaker opened.",
                self.breaker_trips,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP {prefix}_{name}_total {help}");
            let _ = writeln!(out, "# TYPE {prefix}_{name}_total counter");
            let _ = writeln!(out, "{prefix}_{name}_total {value}");
        }
        let _ = writeln!(
            out,
            "# HELP {prefix}_breaker_open Whether the Redis breaker is open."
        );
        let _ = writeln!(out, "# TYPE {prefix}_breaker_open gauge");
        let _ = writeln!(out, "{prefix}_breaker_open {}", u8::from(self.breaker_open));
        out
    }
}

/// Configures a [`RedisStorage`].
#[derive(Clone, Debug)]
pub struct RedisStorageBuilder {
    url: String,
    prefix: String,
    auto_pipeline: bool,
    max_batch: usize,
    timeout: Duration,
    breaker_threshold: u32,
    breaker_cooldown: Duration,
}

impl RedisStorageBuilder {
    /// The prefix of every key this store writes (default `gcl:`). Stores
    /// with the same prefix on one Redis share entries.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Whether concurrent `get`s are batched into one `MGET` (default on).
    /// Off, each `get` is its own `GET` round trip (still on the one
    /// multiplexed connection).
    pub fn auto_pipeline(mut self, on: bool) -> Self {
        self.auto_pipeline = on;
        self
    }

    /// The most keys one auto-pipelined `MGET` carries (default 512).
    pub fn max_batch(mut self, keys: usize) -> Self {
        self.max_batch = keys.max(1);
        self
    }

    /// The timeout of one round trip (default 250 ms).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Open the breaker after `threshold` consecutive failures (default 5;
    /// at least 1), for `cooldown` (default 1 s).
    pub fn breaker(mut self, threshold: u32, cooldown: Duration) -> Self {
        self.breaker_threshold = threshold.max(1);
        self.breaker_cooldown = cooldown;
        self
    }

    /// The store. Must run inside a tokio runtime (the batcher is a task);
    /// fails only on a malformed URL or without a runtime. It does not
    /// connect: the first call does, and a Redis that is down is a failing
    /// store, not an error here.
    pub fn build(self) -> Result<RedisStorage, StorageError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| StorageError::backend(RedisFault::NoRuntime))?;
        let client = redis::Client::open(self.url.as_str()).map_err(StorageError::backend)?;
        let config = ConnectionManagerConfig::new()
            // One attempt per (re)connection: the breaker paces the retries.
            .set_number_of_retries(0)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(1))
            .set_connection_timeout(Some(self.timeout.max(Duration::from_secs(1))));
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(StorageError::backend)?;
        let core = Arc::new(Core {
            conn,
            entry_prefix: format!("{}e:", self.prefix),
            ref_prefix: format!("{}r:", self.prefix),
            prefix: self.prefix,
            timeout: self.timeout,
            breaker: Breaker::new(self.breaker_threshold, self.breaker_cooldown),
            counts: Counts::default(),
        });
        let batcher = self.auto_pipeline.then(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            runtime.spawn(batcher(Arc::clone(&core), rx, self.max_batch));
            tx
        });
        Ok(RedisStorage {
            inner: Arc::new(RedisInner {
                core,
                client,
                batcher,
                gc_cursor: Mutex::new(0),
            }),
        })
    }
}

/// The Redis back end. Cheap to clone: clones share the connection, the
/// batcher, the breaker and the counters.
#[derive(Clone)]
pub struct RedisStorage {
    inner: Arc<RedisInner>,
}

struct RedisInner {
    core: Arc<Core>,
    client: redis::Client,
    /// To the batcher task (auto-pipelining on). Dropping it ends the task.
    batcher: Option<mpsc::UnboundedSender<GetRequest>>,
    /// Where the next lazy GC step starts.
    gc_cursor: Mutex<u64>,
}

/// What the batcher task shares with the store.
struct Core {
    conn: ConnectionManager,
    prefix: String,
    entry_prefix: String,
    ref_prefix: String,
    timeout: Duration,
    breaker: Breaker,
    counts: Counts,
}

#[derive(Default)]
struct Counts {
    commands: AtomicU64,
    round_trips: AtomicU64,
    keys_read: AtomicU64,
    errors: AtomicU64,
    timeouts: AtomicU64,
    rejected: AtomicU64,
}

struct GetRequest {
    key: CacheKey,
    reply: oneshot::Sender<StorageResult<Option<Stored<Bytes>>>>,
}

impl RedisStorage {
    /// Configures a store for `url` (`redis://127.0.0.1:6379`).
    pub fn builder(url: impl Into<String>) -> RedisStorageBuilder {
        RedisStorageBuilder {
            url: url.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            auto_pipeline: true,
            max_batch: DEFAULT_MAX_BATCH,
            timeout: DEFAULT_COMMAND_TIMEOUT,
            breaker_threshold: DEFAULT_BREAKER_THRESHOLD,
            breaker_cooldown: DEFAULT_BREAKER_COOLDOWN,
        }
    }

    /// A store for `url` with the defaults (see [`RedisStorageBuilder`]).
    pub fn new(url: impl Into<String>) -> Result<Self, StorageError> {
        Self::builder(url).build()
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.core.prefix
    }

    /// The counters now.
    pub fn stats(&self) -> RedisStats {
        let core = &self.inner.core;
        let c = &core.counts;
        RedisStats {
            commands: c.commands.load(Ordering::Relaxed),
            round_trips: c.round_trips.load(Ordering::Relaxed),
            keys_read: c.keys_read.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
            timeouts: c.timeouts.load(Ordering::Relaxed),
            rejected: c.rejected.load(Ordering::Relaxed),
            breaker_open: core.breaker.is_open(),
            breaker_trips: core.breaker.trips.load(Ordering::Relaxed),
        }
    }

    /// One `PING` round trip (through the breaker and the timeout): whether
    /// Redis answers now.
    pub async fn ping(&self) -> Result<(), StorageError> {
        let core = &self.inner.core;
        let mut conn = core.conn.clone();
        core.run(1, async move {
            redis::cmd("PING").query_async::<()>(&mut conn).await
        })
        .await
    }

    /// Makes the next lazy [`gc`](Self::gc) start at `cursor` (a cursor an
    /// earlier [`GcReport`] returned, perhaps in another process: `gateway
    /// redis-gc --cursor N` continues a pass this way).
    pub fn resume_gc_at(&self, cursor: u64) {
        *self.inner.gc_cursor.lock() = cursor;
    }

    /// Removes reference-set members whose entry is gone (expired, deleted,
    /// evicted), and so the sets left empty. See [`GcMode`].
    pub async fn gc(&self, mode: GcMode) -> Result<GcReport, StorageError> {
        let core = &self.inner.core;
        let pattern = format!("{}*", glob_escape(&core.ref_prefix));
        let mut report = GcReport::default();
        match mode {
            GcMode::Lazy { chunk } => {
                let start = *self.inner.gc_cursor.lock();
                let (cursor, sets) = core.scan(start, &pattern, chunk.max(1)).await?;
                core.gc_sets(&sets, &mut report).await?;
                *self.inner.gc_cursor.lock() = cursor;
                report.cursor = cursor;
            }
            GcMode::Strict => {
                let mut cursor = 0;
                loop {
                    let (next, sets) = core.scan(cursor, &pattern, SCAN_COUNT).await?;
                    core.gc_sets(&sets, &mut report).await?;
                    cursor = next;
                    if cursor == 0 {
                        break;
                    }
                }
            }
        }
        Ok(report)
    }

    /// Invalidates like [`Storage::invalidate`] and also returns the keys
    /// of the entries it removed (for a layered store to tell its peers).
    pub async fn invalidate_keys(
        &self,
        patterns: &[ReferencePattern],
    ) -> Result<(Removals, Vec<CacheKey>), StorageError> {
        self.inner.core.invalidate(patterns).await
    }

    /// `PUBLISH channel payload`, through the breaker and the timeout.
    pub async fn publish(&self, channel: &str, payload: &[u8]) -> Result<(), StorageError> {
        let core = &self.inner.core;
        let mut conn = core.conn.clone();
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(channel).arg(payload);
        core.run(1, async move { cmd.query_async::<()>(&mut conn).await })
            .await
    }

    /// The client, for a pub/sub connection of its own.
    pub(crate) fn client(&self) -> &redis::Client {
        &self.inner.client
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
                let mut conn = core.conn.clone();
                let mut cmd = redis::cmd("GET");
                cmd.arg(core.entry_key(key));
                let found = core
                    .run(1, async move {
                        cmd.query_async::<Option<Vec<u8>>>(&mut conn).await
                    })
                    .await?;
                return found.map(open).transpose();
            };
            let (reply, answer) = oneshot::channel();
            batcher
                .send(GetRequest { key, reply })
                .map_err(|_| StorageError::backend(RedisFault::BatcherStopped))?;
            answer
                .await
                .unwrap_or_else(|_| Err(StorageError::backend(RedisFault::BatcherStopped)))
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
            let mut pipe = redis::pipe();
            pipe.cmd("SET")
                .arg(core.entry_key(key))
                .arg(&value[..])
                .arg("PX")
                .arg(millis)
                .ignore();
            let mut commands = 1;
            for reference in entry.references.iter() {
                let set = core.ref_key(reference.as_str());
                pipe.cmd("SADD").arg(&set).arg(&member).ignore();
                // NX gives a new set its ttl, GT lengthens an older one's.
                pipe.cmd("PEXPIRE").arg(&set).arg(millis).arg("NX").ignore();
                pipe.cmd("PEXPIRE").arg(&set).arg(millis).arg("GT").ignore();
                commands += 3;
            }
            let mut conn = core.conn.clone();
            core.run(
                commands,
                async move { pipe.query_async::<()>(&mut conn).await },
            )
            .await
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
        StorageFuture::boxed(async move {
            let core = &self.inner.core;
            let pattern = format!("{}*", glob_escape(&core.prefix));
            let mut removals = Removals::new();
            let mut cursor = 0;
            loop {
                let (next, keys) = core.scan(cursor, &pattern, SCAN_COUNT).await?;
                let (entries, others): (Vec<String>, Vec<String>) = keys
                    .into_iter()
                    .partition(|k| k.starts_with(&core.entry_prefix));
                core.remove_entries(&entries, &mut removals).await?;
                if !others.is_empty() {
                    let mut cmd = redis::cmd("UNLINK");
                    cmd.arg(&others);
                    let mut conn = core.conn.clone();
                    core.run(1, async move { cmd.query_async::<()>(&mut conn).await })
                        .await?;
                }
                cursor = next;
                if cursor == 0 {
                    return Ok(removals);
                }
            }
        })
    }

    fn read_in_flight(&self) -> bool {
        true
    }
}

/// Reads an entry's envelope.
fn open(bytes: Vec<u8>) -> StorageResult<Stored<Bytes>> {
    Envelope::open(Bytes::from(bytes)).map(|envelope| envelope.stored)
}

/// Batches the `get`s queued in one scheduling turn into one `MGET`.
async fn batcher(core: Arc<Core>, mut requests: mpsc::UnboundedReceiver<GetRequest>, max: usize) {
    while let Some(first) = requests.recv().await {
        // Let the other tasks of this turn queue their gets.
        tokio::task::yield_now().await;
        let mut batch = vec![first];
        while batch.len() < max {
            match requests.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        let core = Arc::clone(&core);
        tokio::spawn(async move {
            let keys: Vec<CacheKey> = batch.iter().map(|r| r.key).collect();
            match core.mget(keys).await {
                Ok(found) => {
                    for (request, slot) in batch.into_iter().zip(found) {
                        let _ = request.reply.send(slot.map(open).transpose());
                    }
                }
                Err(error) => {
                    for request in batch {
                        let _ = request.reply.send(Err(error.clone()));
                    }
                }
            }
        });
    }
}

impl Core {
    fn entry_key(&self, key: CacheKey) -> String {
        format!("{}{key}", self.entry_prefix)
    }

    fn ref_key(&self, reference: &str) -> String {
        format!("{}{reference}", self.ref_prefix)
    }

    /// Runs one round trip of `commands` commands through the breaker, the
    /// timeout and the counters.
    async fn run<T>(
        &self,
        commands: u64,
        round_trip: impl Future<Output = RedisResult<T>>,
    ) -> StorageResult<T> {
        if !self.breaker.admit() {
            self.counts.rejected.fetch_add(1, Ordering::Relaxed);
            return Err(StorageError::backend(RedisFault::BreakerOpen));
        }
        self.counts.commands.fetch_add(commands, Ordering::Relaxed);
        self.counts.round_trips.fetch_add(1, Ordering::Relaxed);
        match tokio::time::timeout(self.timeout, round_trip).await {
            Ok(Ok(value)) => {
                self.breaker.success();
                Ok(value)
            }
            Ok(Err(error)) => {
                self.counts.errors.fetch_add(1, Ordering::Relaxed);
                if is_transport(&error) {
                    self.breaker.failure();
                } else {
                    self.breaker.success();
                }
                Err(StorageError::backend(error))
            }
            Err(_) => {
                self.counts.errors.fetch_add(1, Ordering::Relaxed);
                self.counts.timeouts.fetch_add(1, Ordering::Relaxed);
                self.breaker.failure();
                Err(StorageError::backend(RedisFault::Timeout(self.timeout)))
            }
        }
    }

    /// One `MGET` of `keys`.
    async fn mget(
        &self,
        keys: impl IntoIterator<Item = CacheKey>,
    ) -> StorageResult<Vec<Option<Vec<u8>>>> {
        let mut cmd = redis::cmd("MGET");
        let mut n = 0u64;
        for key in keys {
            cmd.arg(self.entry_key(key));
            n += 1;
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        self.counts.keys_read.fetch_add(n, Ordering::Relaxed);
        let mut conn = self.conn.clone();
        self.run(1, async move {
            cmd.query_async::<Vec<Option<Vec<u8>>>>(&mut conn).await
        })
        .await
    }

    /// One `SCAN` step.
    async fn scan(
        &self,
        cursor: u64,
        pattern: &str,
        count: usize,
    ) -> StorageResult<(u64, Vec<String>)> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        let mut conn = self.conn.clone();
        self.run(1, async move {
            cmd.query_async::<(u64, Vec<String>)>(&mut conn).await
        })
        .await
    }

    /// Unlinks `entries` (full entry keys), counting each removed one under
    /// the namespace read from its head.
    async fn remove_entries(
        &self,
        entries: &[String],
        removals: &mut Removals,
    ) -> StorageResult<()> {
        let head_end = envelope_head_len(MAX_HEAD_NAMESPACE) - 1;
        for chunk in entries.chunks(REMOVE_CHUNK) {
            let mut pipe = redis::pipe();
            for key in chunk {
                pipe.cmd("GETRANGE").arg(key).arg(0).arg(head_end);
                pipe.cmd("UNLINK").arg(key);
            }
            let mut conn = self.conn.clone();
            let replies = self
                .run(2 * chunk.len() as u64, async move {
                    pipe.query_async::<Vec<Value>>(&mut conn).await
                })
                .await?;
            for pair in replies.chunks(2) {
                let [head, Value::Int(removed)] = pair else {
                    continue;
                };
                if *removed > 0 {
                    let head = match head {
                        Value::BulkString(bytes) => bytes.as_slice(),
                        _ => &[],
                    };
                    let namespace = envelope_namespace(head).unwrap_or(UNKNOWN_NAMESPACE);
                    removals.record(&Arc::from(namespace));
                }
            }
        }
        Ok(())
    }

    async fn invalidate(
        &self,
        patterns: &[ReferencePattern],
    ) -> StorageResult<(Removals, Vec<CacheKey>)> {
        let mut sets = Vec::new();
        for pattern in patterns {
            match pattern {
                ReferencePattern::Exact(reference) => sets.push(self.ref_key(reference.as_str())),
                ReferencePattern::Prefix(prefix) => {
                    let glob = format!("{}{}*", glob_escape(&self.ref_prefix), glob_escape(prefix));
                    let mut cursor = 0;
                    loop {
                        let (next, found) = self.scan(cursor, &glob, SCAN_COUNT).await?;
                        sets.extend(found);
                        cursor = next;
                        if cursor == 0 {
                            break;
                        }
                    }
                }
            }
        }
        sets.sort_unstable();
        sets.dedup();
        let mut removals = Removals::new();
        let mut removed_keys = Vec::new();
        for chunk in sets.chunks(SET_CHUNK) {
            let mut pipe = redis::pipe();
            for set in chunk {
                pipe.cmd("SMEMBERS").arg(set);
            }
            let mut conn = self.conn.clone();
            let members = self
                .run(chunk.len() as u64, async move {
                    pipe.query_async::<Vec<Vec<String>>>(&mut conn).await
                })
                .await?;
            let mut keys: Vec<CacheKey> = members
                .iter()
                .flatten()
                .filter_map(|member| CacheKey::from_hex(member))
                .collect();
            keys.sort_unstable();
            keys.dedup();
            let entries: Vec<String> = keys.iter().map(|k| self.entry_key(*k)).collect();
            self.remove_entries(&entries, &mut removals).await?;
            removed_keys.extend(keys);
            let mut pipe = redis::pipe();
            let mut commands = 0;
            for (set, members) in chunk.iter().zip(&members) {
                if !members.is_empty() {
                    pipe.cmd("SREM").arg(set).arg(members).ignore();
                    commands += 1;
                }
            }
            if commands > 0 {
                let mut conn = self.conn.clone();
                self.run(
                    commands,
                    async move { pipe.query_async::<()>(&mut conn).await },
                )
                .await?;
            }
        }
        Ok((removals, removed_keys))
    }

    /// Runs the GC script on each of `sets` in one pipeline.
    async fn gc_sets(&self, sets: &[String], report: &mut GcReport) -> StorageResult<()> {
        if sets.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for set in sets {
            pipe.cmd("EVAL")
                .arg(GC_SCRIPT)
                .arg(1)
                .arg(set)
                .arg(&self.entry_prefix);
        }
        let mut conn = self.conn.clone();
        let results = self
            .run(sets.len() as u64, async move {
                pipe.query_async::<Vec<(u64, u64)>>(&mut conn).await
            })
            .await?;
        for (members, removed) in results {
            report.scanned_sets += 1;
            report.scanned_members += members;
            report.removed_members += removed;
            if members > 0 && removed == members {
                report.removed_sets += 1;
            }
        }
        Ok(())
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

/// The circuit breaker: closed, open until a deadline, or half-open with
/// one probe out.
///
/// A `parking_lot` mutex around a small state, taken for a few
/// instructions per round trip and never across an `.await`.
struct Breaker {
    threshold: u32,
    cooldown: Duration,
    state: Mutex<BreakerState>,
    trips: AtomicU64,
}

#[derive(Clone, Copy)]
enum BreakerState {
    Closed {
        failures: u32,
    },
    Open {
        until: Instant,
    },
    /// One probe was let through at `since`. If its caller went away
    /// without a verdict, another probe goes after a further cool-down.
    HalfOpen {
        since: Instant,
    },
}

impl Breaker {
    fn new(threshold: u32, cooldown: Duration) -> Self {
        Self {
            threshold,
            cooldown,
            state: Mutex::new(BreakerState::Closed { failures: 0 }),
            trips: AtomicU64::new(0),
        }
    }

    /// Whether a call may go to the network now.
    fn admit(&self) -> bool {
        let mut state = self.state.lock();
        let probe_at = match *state {
            BreakerState::Closed { .. } => return true,
            BreakerState::Open { until } => until,
            BreakerState::HalfOpen { since } => since + self.cooldown,
        };
        let now = Instant::now();
        if now < probe_at {
            return false;
        }
        *state = BreakerState::HalfOpen { since: now };
        true
    }

    fn success(&self) {
        *self.state.lock() = BreakerState::Closed { failures: 0 };
    }

    fn failure(&self) {
        let mut state = self.state.lock();
        let open = match *state {
            BreakerState::Closed { failures } => {
                let failures = failures + 1;
                *state = BreakerState::Closed { failures };
                failures >= self.threshold
            }
            BreakerState::HalfOpen { .. } => true,
            // A call admitted before the breaker opened: already open.
            BreakerState::Open { .. } => false,
        };
        if open {
            *state = BreakerState::Open {
                until: Instant::now() + self.cooldown,
            };
            self.trips.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn is_open(&self) -> bool {
        !matches!(*self.state.lock(), BreakerState::Closed { .. })
    }
}
