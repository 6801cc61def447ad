//! The storage interface: one async trait for every back end.
//!
//! [`Storage`] is what the cache reads and writes: batched gets, set with a
//! ttl, delete, and invalidation by reference pattern. It is shaped for a
//! remote store from the start:
//! - every method returns a future ([`StorageFuture`]), so a network round
//!   trip fits; a back end that answers at once (the memory one) returns
//!   [`StorageFuture::ready`], which costs no allocation, and a remote one
//!   returns [`StorageFuture::boxed`];
//! - `get_many` lets a remote store answer many keys in one round trip;
//! - entries carry their references and namespace, so the store can index
//!   them for `invalidate` and report what it dropped;
//! - values can travel as bytes: [`Encoded`] turns any `Storage<Bytes>` into
//!   a `Storage<V>` through a pluggable [`Codec`], and [`Envelope`] frames an
//!   entry with wall-clock deadlines for stores shared between processes.
//!
//! Back ends:
//! - [`MemoryStorage`] (moka), one process;
//! - [`RedisStorage`], a `Storage<Bytes>` shared between processes: wrap it
//!   as `Encoded<RedisStorage, JsonCodec>`. It frames entries with
//!   [`Envelope`], keeps references as Redis sets, batches concurrent gets
//!   into one `MGET` behind a bounded queue, and fails fast behind a circuit
//!   breaker (see its module docs for the layout and the fault handling);
//! - [`LayeredStorage`], a short-lived [`MemoryStorage`] in front of any
//!   store, usually the Redis one, with invalidations broadcast to the
//!   other processes over Redis pub/sub.
//!
//! A remote store says so with [`Storage::read_in_flight`]: the cache then
//! lets concurrent callers of one key share one read.
//!
//! Deadlines are [`Instant`]s in this process; a store that persists them
//! elsewhere converts them (as [`Envelope`] does).

mod codec;
mod layered;
mod memory;
mod redis;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

pub use self::redis::{
    GcMode, GcReport, RedisFault, RedisStats, RedisStorage, RedisStorageBuilder,
    DEFAULT_BATCHES_IN_FLIGHT, DEFAULT_BREAKER_COOLDOWN, DEFAULT_BREAKER_THRESHOLD,
    DEFAULT_COMMAND_TIMEOUT, DEFAULT_MAX_BATCH, DEFAULT_PREFIX, DEFAULT_QUEUE_CAPACITY,
};
pub use codec::{Codec, Encoded, Envelope, JsonCodec};
pub use layered::{
    LayeredStats, LayeredStorage, LayeredStorageBuilder, DEFAULT_L1_MAX_ENTRIES, DEFAULT_L1_TTL,
};
pub use memory::{Eviction, Held, MemoryStorage, MemoryStorageBuilder, DEFAULT_MAX_ENTRIES};

use crate::error::StorageError;
use crate::key::CacheKey;
use crate::references::{Reference, ReferencePattern};

/// `now + after`, or the farthest deadline this platform's clock can hold
/// when that overflows (a century or less).
pub(crate) fn deadline_after(now: Instant, after: Duration) -> Instant {
    if let Some(deadline) = now.checked_add(after) {
        return deadline;
    }
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    let mut cap = CENTURY;
    while !cap.is_zero() {
        if let Some(deadline) = now.checked_add(cap) {
            return deadline;
        }
        cap /= 2;
    }
    now
}

/// The result of a storage operation.
pub type StorageResult<T> = Result<T, StorageError>;

/// A storage operation's future: ready at once (no allocation) or boxed.
pub enum StorageFuture<'a, T> {
    /// Already answered.
    Ready(std::future::Ready<T>),
    /// Answered later (e.g. after a round trip).
    Pending(Pin<Box<dyn Future<Output = T> + Send + 'a>>),
}

impl<'a, T> StorageFuture<'a, T> {
    /// An answer available now.
    pub fn ready(value: T) -> Self {
        Self::Ready(std::future::ready(value))
    }

    /// An answer that needs `future` to run.
    pub fn boxed(future: impl Future<Output = T> + Send + 'a) -> Self {
        Self::Pending(Box::pin(future))
    }

    /// Transforms the answer, staying ready if it was.
    pub fn map<U>(self, f: impl FnOnce(T) -> U + Send + 'a) -> StorageFuture<'a, U>
    where
        T: 'a,
    {
        match self {
            Self::Ready(ready) => StorageFuture::ready(f(ready.into_inner())),
            Self::Pending(future) => StorageFuture::boxed(async move { f(future.await) }),
        }
    }
}

impl<T> Future for StorageFuture<'_, T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match self.get_mut() {
            Self::Ready(ready) => Pin::new(ready).poll(cx),
            Self::Pending(future) => future.as_mut().poll(cx),
        }
    }
}

/// What the cache asks a back end to keep.
#[derive(Clone, Debug)]
pub struct Entry<V> {
    /// The value (or its encoding).
    pub value: V,
    /// Until when the value is fresh.
    pub fresh_until: Instant,
    /// Until when it may be served stale. The store keeps it at least this
    /// long, and as long as `set`'s `ttl` says (a strategy may keep it past
    /// its stale window to serve it in place of a failed fetch).
    pub stale_until: Instant,
    /// How long the fetch that produced it took (early refresh weighs it).
    pub fetched_in: Duration,
    /// The references it carries, for `invalidate`.
    pub references: Arc<[Reference]>,
    /// The namespace it belongs to, for the counters.
    pub namespace: Arc<str>,
}

/// What a back end returns for a key.
#[derive(Clone, Debug)]
pub struct Stored<V> {
    /// The value.
    pub value: V,
    /// Until when it is fresh.
    pub fresh_until: Instant,
    /// Until when it may be served stale. A store may still return it
    /// after that (it was kept for recovery from a failed fetch): the cache
    /// then treats it as a miss.
    pub stale_until: Instant,
    /// How long the fetch that produced it took.
    pub fetched_in: Duration,
}

/// How many entries an operation dropped, per namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Removals {
    counts: Vec<(Arc<str>, u64)>,
}

impl Removals {
    /// Nothing dropped.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one dropped entry of `namespace`.
    pub fn record(&mut self, namespace: &Arc<str>) {
        self.record_many(namespace, 1);
    }

    /// Counts `n` dropped entries of `namespace`.
    pub fn record_many(&mut self, namespace: &Arc<str>, n: u64) {
        match self.counts.iter_mut().find(|(ns, _)| **ns == **namespace) {
            Some((_, count)) => *count += n,
            None => self.counts.push((Arc::clone(namespace), n)),
        }
    }

    /// Entries dropped in all.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|(_, n)| n).sum()
    }

    /// Entries dropped per namespace.
    pub fn per_namespace(&self) -> &[(Arc<str>, u64)] {
        &self.counts
    }
}

/// Why a back end dropped an entry on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionCause {
    /// To respect its size bound.
    Size,
    /// Its ttl and stale window ended.
    Expired,
}

/// Told of each entry a back end drops on its own: the entry's namespace and
/// why. It runs on whatever thread does the store's maintenance, so it must
/// be quick and must not block.
pub type EvictionObserver = Arc<dyn Fn(&str, EvictionCause) + Send + Sync>;

/// A storage back end.
///
/// The cache calls `get` on every lookup, `set` after a fetch it may keep,
/// and `invalidate`, `delete` and `clear` for the calls of the same names.
/// Implementations must be cheap to share (`Send + Sync`); the cache holds
/// one behind an `Arc`.
///
/// Consistency: the cache serialises its own `set` calls against
/// `invalidate`, `delete` and `clear` (see the `cache` module), so a store
/// need not make them atomic with respect to each other.
pub trait Storage<V: Send + 'static>: Send + Sync + 'static {
    /// A short name for reports (`"memory"`, `"redis"`).
    fn name(&self) -> &'static str {
        "custom"
    }

    /// The entry under `key`, if the store still has it. It may return an
    /// entry past its `stale_until`; the cache treats that as a miss.
    fn get(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Option<Stored<V>>>>;

    /// The entries under `keys`, in the same order. The default asks `get`
    /// for each in turn; a remote store should answer in one round trip.
    fn get_many<'a>(
        &'a self,
        keys: &'a [CacheKey],
    ) -> StorageFuture<'a, StorageResult<Vec<Option<Stored<V>>>>> {
        StorageFuture::boxed(async move {
            let mut found = Vec::with_capacity(keys.len());
            for key in keys {
                found.push(self.get(*key).await?);
            }
            Ok(found)
        })
    }

    /// Keeps `entry` under `key` for `ttl` from now (at least its ttl plus
    /// stale window; more when a strategy keeps it for recovery), replacing
    /// any entry there, and indexes its references.
    fn set(
        &self,
        key: CacheKey,
        entry: Entry<V>,
        ttl: Duration,
    ) -> StorageFuture<'_, StorageResult<()>>;

    /// Drops the entry under `key`.
    fn delete(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Removals>>;

    /// Drops every entry carrying a reference that matches any of
    /// `patterns`.
    fn invalidate<'a>(
        &'a self,
        patterns: &'a [ReferencePattern],
    ) -> StorageFuture<'a, StorageResult<Removals>>;

    /// Drops every entry.
    fn clear(&self) -> StorageFuture<'_, StorageResult<Removals>>;

    /// Registers `observer` to hear of entries the store drops on its own
    /// (size bound, expiry). Stores that cannot tell (a remote store evicts
    /// silently) keep the default, which ignores it.
    fn observe_evictions(&self, observer: EvictionObserver) {
        let _ = observer;
    }

    /// Whether a read costs enough (a round trip) that concurrent lookups of
    /// one key should share it. When `true`, the cache lets one caller per
    /// key read the store and hands its answer to every caller that arrives
    /// while the read is in flight. A store that answers at once (the memory
    /// one) keeps the default, `false`, and every caller reads it directly.
    fn read_in_flight(&self) -> bool {
        false
    }
}

impl<V: Send + 'static, S: Storage<V> + ?Sized> Storage<V> for Arc<S> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn get(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Option<Stored<V>>>> {
        (**self).get(key)
    }

    fn get_many<'a>(
        &'a self,
        keys: &'a [CacheKey],
    ) -> StorageFuture<'a, StorageResult<Vec<Option<Stored<V>>>>> {
        (**self).get_many(keys)
    }

    fn set(
        &self,
        key: CacheKey,
        entry: Entry<V>,
        ttl: Duration,
    ) -> StorageFuture<'_, StorageResult<()>> {
        (**self).set(key, entry, ttl)
    }

    fn delete(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Removals>> {
        (**self).delete(key)
    }

    fn invalidate<'a>(
        &'a self,
        patterns: &'a [ReferencePattern],
    ) -> StorageFuture<'a, StorageResult<Removals>> {
        (**self).invalidate(patterns)
    }

    fn clear(&self) -> StorageFuture<'_, StorageResult<Removals>> {
        (**self).clear()
    }

    fn observe_evictions(&self, observer: EvictionObserver) {
        (**self).observe_evictions(observer)
    }

    fn read_in_flight(&self) -> bool {
        (**self).read_in_flight()
    }
}
