//! A memory tier (L1) in front of a shared store (L2, usually Redis), with
//! invalidations broadcast to the other processes over Redis pub/sub.
//!
//! [`LayeredStorage`] keeps a bounded [`MemoryStorage`] per process and a
//! shared L2 behind it:
//! - `get`: a fresh L1 entry answers at once, with no future to box.
//!   Otherwise L2 is asked, and what it has is copied into L1 for at most
//!   `l1_ttl` (default 1 s) and never past its own deadlines. If L2 fails,
//!   a stale L1 entry is still served; if L2 no longer has the entry, the
//!   L1 copy is dropped.
//! - `get_many`: L1 first, then one L2 `get_many` for the keys L1 could not
//!   answer fresh.
//! - `set`: both tiers (L1 capped at `l1_ttl`); L2's result is returned, so
//!   a Redis that is down still leaves a one-second L1 copy.
//! - `delete`, `invalidate`, `clear`: L2 first, then L1, then a message on
//!   the channel `<prefix>invalidate` so the other processes drop the same
//!   entries from their L1. L2's removals are what is reported.
//!
//! L1 entries copied from L2 do not know their references (the envelope in
//! Redis does not carry them), so L1 cannot match them against a pattern.
//! Instead the invalidating process asks Redis for the keys it removed
//! ([`RedisStorage::invalidate_keys`]) and drops exactly those keys from
//! every L1, its own included. A message names the sender (a random
//! instance id, so a process skips its own messages) and either those keys
//! or "clear" (for `clear`, or past 10 000 keys). Without a Redis bus
//! ([`LayeredStorageBuilder::build`]) the keys are not known and an
//! invalidation clears L1 instead.
//!
//! Concurrency choices:
//! - The subscriber is one task per store, on its own pub/sub connection
//!   (the multiplexed command connection cannot subscribe). It reconnects
//!   with a backoff of 100 ms doubling to 5 s, and clears L1 whenever it
//!   (re)subscribes or loses the connection, since messages sent in the gap
//!   are lost. It stops when the store is dropped.
//! - On a Redis Cluster the channel is a classic one (`SUBSCRIBE`/`PUBLISH`,
//!   not the sharded `SSUBSCRIBE`): the cluster bus forwards every `PUBLISH`
//!   to every node, so one subscription on any node hears all of them. The
//!   subscriber takes its node from the cluster's masters as the cluster
//!   reports them at each attempt, then from the seeds, one after another, so
//!   when its node goes away it subscribes on the next one.
//! - A `get` that read L2 just before another process's invalidation and
//!   copies the old value into L1 just after the message arrived keeps it
//!   for at most `l1_ttl`: that window is the price of the L1. So is the
//!   delivery delay of the message itself.
//!
//! The broadcast (the messages, publishing, the subscriber task) is `bus`; the
//! store and its builder are here.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::redis::RedisStorage;
use super::{
    Codec, Encoded, Entry, MemoryStorage, Removals, Storage, StorageFuture, StorageResult, Stored,
};
use crate::error::StorageError;
use crate::key::CacheKey;
use crate::references::ReferencePattern;

mod bus;

use bus::{Bus, Message, MAX_KEYS_PER_MESSAGE};

/// The default time an entry stays in L1.
pub const DEFAULT_L1_TTL: Duration = Duration::from_secs(1);
/// The default bound of L1, in entries.
pub const DEFAULT_L1_MAX_ENTRIES: u64 = 10_000;

/// The counters of a [`LayeredStorage`], as of one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayeredStats {
    /// Keys answered fresh by L1.
    pub l1_hits: u64,
    /// Keys answered by L2 (then copied into L1).
    pub l2_hits: u64,
    /// Keys neither tier had.
    pub misses: u64,
    /// Invalidation messages sent.
    pub published: u64,
    /// Invalidation messages that could not be sent.
    pub publish_errors: u64,
    /// Invalidation messages from other processes applied to L1.
    pub received: u64,
    /// Whether the subscriber is subscribed now.
    pub subscribed: bool,
}

#[derive(Default)]
struct Counts {
    l1_hits: AtomicU64,
    l2_hits: AtomicU64,
    misses: AtomicU64,
    published: AtomicU64,
    publish_errors: AtomicU64,
    received: AtomicU64,
    subscribed: AtomicBool,
    /// Bumped by every removal from L1 (delete, invalidate, clear, a peer's
    /// message). A read from L2 fills L1 only if no removal happened while it
    /// was in flight: otherwise it might copy a value that was just
    /// invalidated back into L1, fresh for up to `l1_ttl`.
    generation: AtomicU64,
}

/// Configures a [`LayeredStorage`].
pub struct LayeredStorageBuilder<V> {
    l1: Option<MemoryStorage<V>>,
    l1_max_entries: u64,
    l1_ttl: Duration,
}

impl<V: Clone + Send + Sync + 'static> LayeredStorageBuilder<V> {
    /// How long an entry stays in L1 at most (default 1 s).
    pub fn l1_ttl(mut self, ttl: Duration) -> Self {
        self.l1_ttl = ttl;
        self
    }

    /// Bound L1 to `max` entries (default 10 000).
    pub fn l1_max_entries(mut self, max: u64) -> Self {
        self.l1_max_entries = max;
        self.l1 = None;
        self
    }

    /// Use this memory store as L1 (e.g. one bounded by bytes).
    pub fn l1(mut self, l1: MemoryStorage<V>) -> Self {
        self.l1 = Some(l1);
        self
    }

    /// L1 over any `l2`, with no broadcast: invalidations reach this
    /// process's L1 only (and clear it, see the module docs).
    pub fn build(self, l2: impl Storage<V>) -> LayeredStorage<V> {
        self.assemble(Box::new(l2), None, Arc::default())
    }

    /// L1 over `redis` (values encoded with `codec`), with invalidations
    /// broadcast to and received from the other processes on the channel
    /// `<prefix>invalidate`. Must run inside a tokio runtime (the
    /// subscriber is a task); does not wait for Redis.
    pub fn build_redis<C: Codec<V>>(self, redis: RedisStorage, codec: C) -> LayeredStorage<V> {
        let counts = Arc::new(Counts::default());
        let l1 = self.l1.clone().unwrap_or_else(|| {
            MemoryStorage::builder()
                .max_entries(self.l1_max_entries)
                .build()
        });
        let bus = Bus::start(&redis, &l1, &counts);
        self.l1(l1)
            .assemble(Box::new(Encoded::new(redis, codec)), Some(bus), counts)
    }

    fn assemble(
        self,
        l2: Box<dyn Storage<V>>,
        bus: Option<Bus>,
        counts: Arc<Counts>,
    ) -> LayeredStorage<V> {
        let l1 = self.l1.unwrap_or_else(|| {
            MemoryStorage::builder()
                .max_entries(self.l1_max_entries)
                .build()
        });
        LayeredStorage {
            inner: Arc::new(LayeredInner {
                l1,
                l2,
                l1_ttl: self.l1_ttl,
                bus,
                counts,
                filled: Arc::from("l1"),
            }),
        }
    }
}

/// L1 memory over a shared L2. Cheap to clone: clones share both tiers.
pub struct LayeredStorage<V> {
    inner: Arc<LayeredInner<V>>,
}

impl<V> Clone for LayeredStorage<V> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct LayeredInner<V> {
    l1: MemoryStorage<V>,
    l2: Box<dyn Storage<V>>,
    l1_ttl: Duration,
    bus: Option<Bus>,
    counts: Arc<Counts>,
    /// The namespace of L1 copies of L2 entries (L1 reports to no one).
    filled: Arc<str>,
}

impl<V: Clone + Send + Sync + 'static> LayeredStorage<V> {
    /// Configures a layered store.
    pub fn builder() -> LayeredStorageBuilder<V> {
        LayeredStorageBuilder {
            l1: None,
            l1_max_entries: DEFAULT_L1_MAX_ENTRIES,
            l1_ttl: DEFAULT_L1_TTL,
        }
    }

    /// The default layered store over the Redis at `url` (default
    /// [`RedisStorage`] settings), values encoded with `codec`, with the
    /// invalidation broadcast. Inside a tokio runtime; does not wait for
    /// Redis.
    pub fn connect<C: Codec<V>>(url: &str, codec: C) -> Result<Self, StorageError> {
        Ok(Self::builder().build_redis(RedisStorage::new(url)?, codec))
    }

    /// The memory tier.
    pub fn l1(&self) -> &MemoryStorage<V> {
        &self.inner.l1
    }

    /// The Redis store under L2, if built with [`LayeredStorageBuilder::build_redis`].
    pub fn redis(&self) -> Option<&RedisStorage> {
        self.inner.bus.as_ref().map(|bus| &bus.redis)
    }

    /// The counters now.
    pub fn stats(&self) -> LayeredStats {
        let c = &self.inner.counts;
        LayeredStats {
            l1_hits: c.l1_hits.load(Ordering::Relaxed),
            l2_hits: c.l2_hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            published: c.published.load(Ordering::Relaxed),
            publish_errors: c.publish_errors.load(Ordering::Relaxed),
            received: c.received.load(Ordering::Relaxed),
            subscribed: c.subscribed.load(Ordering::Relaxed),
        }
    }

    /// Waits up to `limit` for the subscriber to be subscribed; whether it
    /// is. Messages sent before then do not reach this process.
    pub async fn wait_subscribed(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.inner.counts.subscribed.load(Ordering::Relaxed) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl<V: Clone + Send + Sync + 'static> LayeredInner<V> {
    fn l1_fresh(&self, key: CacheKey, now: Instant) -> Result<Stored<V>, Option<Stored<V>>> {
        match self.l1.lookup(key) {
            Some(stored) if now < stored.fresh_until => Ok(stored),
            other => Err(other),
        }
    }

    /// The removal generation, read before an L2 read (see `Counts::generation`).
    fn generation(&self) -> u64 {
        self.counts.generation.load(Ordering::Acquire)
    }

    /// Marks a removal from L1 (see `Counts::generation`).
    fn removed(&self) {
        self.counts.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Copies what L2 found into L1, for at most `l1_ttl`, unless L1 lost
    /// entries since `seen` (the generation before the read).
    fn fill(&self, key: CacheKey, stored: &Stored<V>, now: Instant, seen: u64) {
        if self.generation() != seen {
            return;
        }
        let cap = now + self.l1_ttl;
        if stored.stale_until.min(cap) <= now {
            return;
        }
        let entry = Entry {
            value: stored.value.clone(),
            fresh_until: stored.fresh_until.min(cap),
            stale_until: stored.stale_until.min(cap),
            fetched_in: stored.fetched_in,
            references: Arc::new([]),
            namespace: Arc::clone(&self.filled),
        };
        done(self.l1.set(key, entry, self.l1_ttl));
    }

    async fn publish(&self, message: Message<'_>) {
        if let Some(bus) = &self.bus {
            bus.publish(message, &self.counts).await;
        }
    }
}

impl<V: Clone + Send + Sync + 'static> Storage<V> for LayeredStorage<V> {
    fn name(&self) -> &'static str {
        "layered"
    }

    fn get(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Option<Stored<V>>>> {
        let inner = &*self.inner;
        let now = Instant::now();
        let local = match inner.l1_fresh(key, now) {
            Ok(fresh) => {
                inner.counts.l1_hits.fetch_add(1, Ordering::Relaxed);
                return StorageFuture::ready(Ok(Some(fresh)));
            }
            Err(local) => local,
        };
        let seen = inner.generation();
        StorageFuture::boxed(async move {
            match inner.l2.get(key).await {
                Ok(Some(stored)) => {
                    inner.counts.l2_hits.fetch_add(1, Ordering::Relaxed);
                    inner.fill(key, &stored, Instant::now(), seen);
                    Ok(Some(stored))
                }
                Ok(None) => {
                    // L2 is the reference: a stale L1 copy of an entry it
                    // no longer has (invalidated elsewhere) goes too.
                    if local.is_some() {
                        done(inner.l1.delete(key));
                    }
                    inner.counts.misses.fetch_add(1, Ordering::Relaxed);
                    Ok(None)
                }
                Err(error) => match local {
                    Some(stale) => Ok(Some(stale)),
                    None => Err(error),
                },
            }
        })
    }

    fn get_many<'a>(
        &'a self,
        keys: &'a [CacheKey],
    ) -> StorageFuture<'a, StorageResult<Vec<Option<Stored<V>>>>> {
        let inner = &*self.inner;
        let now = Instant::now();
        let mut found = Vec::with_capacity(keys.len());
        let mut ask = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            match inner.l1_fresh(*key, now) {
                Ok(fresh) => {
                    inner.counts.l1_hits.fetch_add(1, Ordering::Relaxed);
                    found.push(Some(fresh));
                }
                Err(local) => {
                    found.push(local);
                    ask.push(i);
                }
            }
        }
        if ask.is_empty() {
            return StorageFuture::ready(Ok(found));
        }
        let seen = inner.generation();
        StorageFuture::boxed(async move {
            let remote_keys: Vec<CacheKey> = ask.iter().map(|&i| keys[i]).collect();
            let remote = match inner.l2.get_many(&remote_keys).await {
                Ok(remote) => remote,
                Err(error) if found.iter().all(Option::is_none) => return Err(error),
                Err(_) => return Ok(found),
            };
            let now = Instant::now();
            for (&i, slot) in ask.iter().zip(remote) {
                match slot {
                    Some(stored) => {
                        inner.counts.l2_hits.fetch_add(1, Ordering::Relaxed);
                        inner.fill(keys[i], &stored, now, seen);
                        found[i] = Some(stored);
                    }
                    None => {
                        if found[i].take().is_some() {
                            done(inner.l1.delete(keys[i]));
                        }
                        inner.counts.misses.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            Ok(found)
        })
    }

    fn set(
        &self,
        key: CacheKey,
        entry: Entry<V>,
        ttl: Duration,
    ) -> StorageFuture<'_, StorageResult<()>> {
        let inner = &*self.inner;
        let cap = Instant::now() + inner.l1_ttl;
        let local = Entry {
            value: entry.value.clone(),
            fresh_until: entry.fresh_until.min(cap),
            stale_until: entry.stale_until.min(cap),
            fetched_in: entry.fetched_in,
            references: Arc::clone(&entry.references),
            namespace: Arc::clone(&entry.namespace),
        };
        done(inner.l1.set(key, local, ttl.min(inner.l1_ttl)));
        inner.l2.set(key, entry, ttl)
    }

    fn delete(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Removals>> {
        let inner = &*self.inner;
        StorageFuture::boxed(async move {
            let removed = inner.l2.delete(key).await;
            inner.removed();
            done(inner.l1.delete(key));
            let removals = removed?;
            inner.publish(Message::Keys(&[key])).await;
            Ok(removals)
        })
    }

    fn invalidate<'a>(
        &'a self,
        patterns: &'a [ReferencePattern],
    ) -> StorageFuture<'a, StorageResult<Removals>> {
        let inner = &*self.inner;
        StorageFuture::boxed(async move {
            let Some(bus) = &inner.bus else {
                let removed = inner.l2.invalidate(patterns).await;
                inner.removed();
                done(inner.l1.clear());
                return removed;
            };
            let result = bus.redis.invalidate_keys(patterns).await;
            inner.removed();
            let (removals, keys) = match result {
                Ok(done) => done,
                Err(error) => {
                    done(inner.l1.clear());
                    return Err(error);
                }
            };
            done(inner.l1.invalidate(patterns));
            for key in &keys {
                done(inner.l1.delete(*key));
            }
            if keys.len() > MAX_KEYS_PER_MESSAGE {
                inner.publish(Message::Clear).await;
            } else if !keys.is_empty() {
                inner.publish(Message::Keys(&keys)).await;
            }
            Ok(removals)
        })
    }

    fn clear(&self) -> StorageFuture<'_, StorageResult<Removals>> {
        let inner = &*self.inner;
        StorageFuture::boxed(async move {
            let removed = inner.l2.clear().await;
            inner.removed();
            done(inner.l1.clear());
            let removals = removed?;
            inner.publish(Message::Clear).await;
            Ok(removals)
        })
    }

    fn read_in_flight(&self) -> bool {
        true
    }
}

/// The answer of a memory-store call (they answer at once).
fn done<T>(future: StorageFuture<'_, T>) -> Option<T> {
    match future {
        StorageFuture::Ready(ready) => Some(ready.into_inner()),
        StorageFuture::Pending(_) => None,
    }
}
