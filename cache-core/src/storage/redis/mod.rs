//! The Redis back end: entries shared between processes.
//!
//! [`RedisStorage`] is a `Storage<Bytes>`; wrap it in
//! [`Encoded`](super::Encoded) with a codec to store any `V`
//! (`Encoded<RedisStorage, JsonCodec>`), or put a memory tier in front of it
//! with [`LayeredStorage`](super::LayeredStorage).
//!
//! This file is the store: its configuration, the round trip every command takes
//! (breaker, timeout, counters), reads and writes. Beside it, one file per role:
//! [`batcher`] (auto-pipelined reads), [`invalidation`] (removing entries by reference,
//! key or prefix), [`gc`] (the reference sets' garbage collection and its Lua) and
//! [`stats`] (the counters and their Prometheus text). The circuit breaker is
//! [`crate::breaker`], shared with any other client of a remote backend.
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
//! refused by the open breaker or the full queue, breaker trips and state.
//!
//! # Limits
//!
//! - Needs Redis 7.0 or later (`PEXPIRE … NX|GT`).
//! - Invalidation is not atomic with a concurrent `set` in another process:
//!   a value fetched before the invalidation may land after it. The cache's
//!   race check covers the fetches of its own process only.
//! - No Redis Cluster (the GC script reads keys it was not given).

mod batcher;
mod gc;
mod invalidation;
mod stats;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, RedisResult};

use self::batcher::{Batcher, BatcherLimits};
pub use self::gc::{GcMode, GcReport};
use self::stats::Counts;
pub use self::stats::RedisStats;
use super::{Entry, Envelope, Removals, Storage, StorageFuture, StorageResult, Stored};
use crate::breaker::{Breaker, BreakerSettings};
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
    /// The store was built outside a tokio runtime.
    #[error("RedisStorage must be built inside a tokio runtime")]
    NoRuntime,
}

/// Configures a [`RedisStorage`].
#[derive(Clone, Debug)]
pub struct RedisStorageBuilder {
    url: String,
    prefix: String,
    auto_pipeline: bool,
    batcher: BatcherLimits,
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
        self.batcher.max_batch = keys.max(1);
        self
    }

    /// The most gets waiting for the batcher (default 4096); a get that finds the
    /// queue full is refused at once (a miss for the cache) and counted.
    pub fn queue_capacity(mut self, gets: usize) -> Self {
        self.batcher.queue = gets.max(1);
        self
    }

    /// The most auto-pipelined `MGET`s in flight at once (default 32); past it the
    /// batcher waits and the queue fills.
    pub fn batches_in_flight(mut self, batches: usize) -> Self {
        self.batcher.in_flight = batches.max(1);
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
            breaker: Breaker::new(BreakerSettings {
                consecutive_failures: self.breaker_threshold,
                error_ratio: None,
                open_for: self.breaker_cooldown,
                probes: 1,
            }),
            counts: Counts::default(),
        });
        let batcher = self
            .auto_pipeline
            .then(|| Batcher::start(Arc::clone(&core), &runtime, self.batcher));
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
    /// The auto-pipelining batcher (when on). Dropping it ends its task.
    batcher: Option<Batcher>,
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

impl RedisStorage {
    /// Configures a store for `url` (`redis://127.0.0.1:6379`).
    pub fn builder(url: impl Into<String>) -> RedisStorageBuilder {
        RedisStorageBuilder {
            url: url.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            auto_pipeline: true,
            batcher: BatcherLimits {
                max_batch: DEFAULT_MAX_BATCH,
                queue: DEFAULT_QUEUE_CAPACITY,
                in_flight: DEFAULT_BATCHES_IN_FLIGHT,
            },
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
        core.counts.snapshot(&core.breaker)
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
        StorageFuture::boxed(async move { self.inner.core.clear().await })
    }

    fn read_in_flight(&self) -> bool {
        true
    }
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

    /// Runs one round trip of `commands` commands through the breaker, the
    /// timeout and the counters.
    async fn run<T>(
        &self,
        commands: u64,
        round_trip: impl Future<Output = RedisResult<T>>,
    ) -> StorageResult<T> {
        let Ok(permit) = self.breaker.admit() else {
            self.counts.rejected.fetch_add(1, Ordering::Relaxed);
            return Err(StorageError::backend(RedisFault::BreakerOpen));
        };
        self.counts.commands.fetch_add(commands, Ordering::Relaxed);
        self.counts.round_trips.fetch_add(1, Ordering::Relaxed);
        match tokio::time::timeout(self.timeout, round_trip).await {
            Ok(Ok(value)) => {
                permit.succeed();
                Ok(value)
            }
            Ok(Err(error)) => {
                self.counts.errors.fetch_add(1, Ordering::Relaxed);
                if is_transport(&error) {
                    permit.fail();
                } else {
                    permit.succeed();
                }
                Err(StorageError::backend(error))
            }
            Err(_) => {
                self.counts.errors.fetch_add(1, Ordering::Relaxed);
                self.counts.timeouts.fetch_add(1, Ordering::Relaxed);
                permit.fail();
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
