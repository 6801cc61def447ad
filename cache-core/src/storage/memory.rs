//! The in-memory back end, built on moka.
//!
//! Entries live in a `moka::sync::Cache` keyed by [`CacheKey`] (hashed by
//! folding, not re-hashed). Reads need no future, so every method answers
//! with [`StorageFuture::ready`]. Each entry expires when the retention `set`
//! was given ends: the end of its stale window, or later when a strategy
//! keeps it to serve in place of a failed fetch (moka's per-entry `Expiry`);
//! freshness is the cache's business.
//!
//! The size bound is a count of entries, or bytes through a weigher. moka
//! applies it during its maintenance, which runs as writes accumulate: in
//! between, the weighted size can overshoot the bound. After
//! [`run_pending_tasks`](MemoryStorage::run_pending_tasks) it holds.
//!
//! Which entry goes when the bound is reached is the [`Eviction`] policy:
//! moka's TinyLFU (the default: a new entry is admitted only if it is asked
//! for more often than the entry it would evict) or plain LRU. This is a
//! setting of the store, not a strategy hook: it decides among entries the
//! store already holds, where strategies decide per call.
//!
//! References are indexed in a [`ReferenceIndex`]. moka's eviction listener
//! (which runs for size evictions, expiry, removal and replacement) unindexes
//! the dropped entry and tells the observers about size evictions and
//! expiry. The listener takes the index lock, so this module never holds
//! that lock while it calls into moka.
//!
//! The cache does not use moka's `get_with` to coalesce fetches: its own
//! in-flight table does, the same way for every back end, including remote
//! ones and `ttl = 0`, where nothing reaches the storage at all.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use moka::notification::RemovalCause;
use moka::sync::Cache as MokaCache;
use moka::Expiry;
use parking_lot::RwLock;

use super::{
    deadline_after, Entry, EvictionCause, EvictionObserver, Removals, Storage, StorageFuture,
    StorageResult, Stored,
};
use crate::key::{CacheKey, PrehashedKeys};
use crate::references::{Reference, ReferenceIndex, ReferencePattern};

/// The default bound: 10 000 entries.
pub const DEFAULT_MAX_ENTRIES: u64 = 10_000;

/// Which entry the memory store evicts when it is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Eviction {
    /// moka's default: LRU eviction behind a TinyLFU admission filter (a
    /// count-min sketch of recent popularity). A new entry that is asked
    /// for less often than the LRU victim is not kept, so one-off keys
    /// cannot flush popular ones.
    #[default]
    TinyLfu,
    /// Least recently used: every new entry is kept, and the entry unused
    /// the longest goes.
    Lru,
}

impl Eviction {
    /// Every policy, as the command line names them.
    pub const ALL: [Eviction; 2] = [Eviction::Lru, Eviction::TinyLfu];

    /// The policy named `name` (`lru`, `tinylfu`).
    pub fn parse(name: &str) -> Result<Eviction, String> {
        Eviction::ALL
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| format!("{name:?} is not an eviction policy; use lru or tinylfu"))
    }

    /// Its name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Eviction::Lru => "lru",
            Eviction::TinyLfu => "tinylfu",
        }
    }

    /// One line on what it does.
    pub const fn summary(self) -> &'static str {
        match self {
            Eviction::Lru => "evict the least recently used entry; every new entry is admitted",
            Eviction::TinyLfu => {
                "LRU behind a frequency filter: a new entry is admitted only if asked for more often than the victim (moka's default)"
            }
        }
    }

    fn moka(self) -> moka::policy::EvictionPolicy {
        match self {
            Eviction::Lru => moka::policy::EvictionPolicy::lru(),
            Eviction::TinyLfu => moka::policy::EvictionPolicy::tiny_lfu(),
        }
    }
}

struct MemEntry<V> {
    value: V,
    fresh_until: Instant,
    stale_until: Instant,
    /// When the store drops it (at or after `stale_until`).
    expires_at: Instant,
    fetched_in: Duration,
    references: Arc<[Reference]>,
    namespace: Arc<str>,
    id: u64,
}

/// One namespace's entries in a [`MemoryStorage`], from [`MemoryStorage::held`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub namespace: Arc<str>,
    pub entries: u64,
    /// The entries' values as weighed, plus their bookkeeping.
    pub bytes: u64,
}

/// What the eviction listener needs; kept apart from the moka cache so the
/// listener does not own the cache that owns it.
#[derive(Default)]
struct Shared {
    index: ReferenceIndex,
    observers: RwLock<Vec<EvictionObserver>>,
}

/// Stores of one key take the same stripe (see `set`).
const STORE_STRIPES: usize = 64;

struct MemoryInner<V> {
    entries: MokaCache<CacheKey, Arc<MemEntry<V>>, PrehashedKeys>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    stores: [parking_lot::Mutex<()>; STORE_STRIPES],
}

/// The in-memory back end. Cheap to clone: clones share the entries.
pub struct MemoryStorage<V> {
    inner: Arc<MemoryInner<V>>,
}

impl<V> Clone for MemoryStorage<V> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

type Weigher<V> = Arc<dyn Fn(&V) -> u32 + Send + Sync>;

enum Bound<V> {
    Entries(u64),
    Bytes(u64, Weigher<V>),
}

/// Configures a [`MemoryStorage`].
pub struct MemoryStorageBuilder<V> {
    bound: Bound<V>,
    eviction: Eviction,
}

impl<V: Clone + Send + Sync + 'static> MemoryStorageBuilder<V> {
    /// Keep at most `max` entries.
    pub fn max_entries(mut self, max: u64) -> Self {
        self.bound = Bound::Entries(max);
        self
    }

    /// Keep at most `max` bytes, weighing each entry as `weigher(value)`
    /// plus the entry's own bookkeeping (its struct, key and references).
    /// moka's internal per-entry overhead is not counted.
    pub fn max_bytes(
        mut self,
        max: u64,
        weigher: impl Fn(&V) -> u32 + Send + Sync + 'static,
    ) -> Self {
        self.bound = Bound::Bytes(max, Arc::new(weigher));
        self
    }

    /// Which entry goes when the store is full (default [`Eviction::TinyLfu`]).
    pub fn eviction(mut self, eviction: Eviction) -> Self {
        self.eviction = eviction;
        self
    }

    /// The store.
    pub fn build(self) -> MemoryStorage<V> {
        let shared = Arc::new(Shared::default());
        let listener_shared = Arc::clone(&shared);
        let builder = MokaCache::builder()
            .eviction_policy(self.eviction.moka())
            .expire_after(RetainAsAsked)
            .eviction_listener(move |key: Arc<CacheKey>, entry: Arc<MemEntry<V>>, cause| {
                listener_shared
                    .index
                    .remove(*key, entry.id, &entry.references);
                let cause = match cause {
                    RemovalCause::Size => EvictionCause::Size,
                    RemovalCause::Expired => EvictionCause::Expired,
                    RemovalCause::Explicit | RemovalCause::Replaced => return,
                };
                for observer in listener_shared.observers.read().iter() {
                    observer(&entry.namespace, cause);
                }
            });
        let entries = match self.bound {
            Bound::Entries(max) => builder.max_capacity(max).build_with_hasher(PrehashedKeys),
            Bound::Bytes(max, weigher) => builder
                .max_capacity(max)
                .weigher(move |_key, entry: &Arc<MemEntry<V>>| {
                    weigher(&entry.value).saturating_add(bookkeeping::<V>(entry))
                })
                .build_with_hasher(PrehashedKeys),
        };
        MemoryStorage {
            inner: Arc::new(MemoryInner {
                entries,
                shared,
                next_id: AtomicU64::new(1),
                stores: std::array::from_fn(|_| parking_lot::Mutex::new(())),
            }),
        }
    }
}

fn bookkeeping<V>(entry: &MemEntry<V>) -> u32 {
    let references: usize = entry
        .references
        .iter()
        .map(|r| r.as_str().len() + std::mem::size_of::<Reference>())
        .sum();
    let total = std::mem::size_of::<MemEntry<V>>() + std::mem::size_of::<CacheKey>() + references;
    u32::try_from(total).unwrap_or(u32::MAX)
}

struct RetainAsAsked;

impl<V> Expiry<CacheKey, Arc<MemEntry<V>>> for RetainAsAsked {
    fn expire_after_create(
        &self,
        _key: &CacheKey,
        entry: &Arc<MemEntry<V>>,
        created_at: Instant,
    ) -> Option<Duration> {
        Some(entry.expires_at.saturating_duration_since(created_at))
    }

    fn expire_after_update(
        &self,
        _key: &CacheKey,
        entry: &Arc<MemEntry<V>>,
        updated_at: Instant,
        _duration_until_expiry: Option<Duration>,
    ) -> Option<Duration> {
        Some(entry.expires_at.saturating_duration_since(updated_at))
    }
}

impl<V: Clone> MemEntry<V> {
    fn stored(&self) -> Stored<V> {
        Stored {
            value: self.value.clone(),
            fresh_until: self.fresh_until,
            stale_until: self.stale_until,
            fetched_in: self.fetched_in,
        }
    }
}

impl<V: Clone + Send + Sync + 'static> MemoryStorage<V> {
    /// A store bounded to [`DEFAULT_MAX_ENTRIES`] entries.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// Configures a store.
    pub fn builder() -> MemoryStorageBuilder<V> {
        MemoryStorageBuilder {
            bound: Bound::Entries(DEFAULT_MAX_ENTRIES),
            eviction: Eviction::default(),
        }
    }

    /// Runs moka's pending maintenance now: evictions for the size bound,
    /// expiry, and the eviction listener. The bound holds after it.
    pub fn run_pending_tasks(&self) {
        self.inner.entries.run_pending_tasks();
    }

    /// The total weight (entries, or bytes with a weigher) as of the last
    /// maintenance.
    pub fn weighted_size(&self) -> u64 {
        self.inner.entries.weighted_size()
    }

    /// The number of entries as of the last maintenance.
    pub fn entry_count(&self) -> u64 {
        self.inner.entries.entry_count()
    }

    /// The number of (reference, key) pairs indexed.
    pub fn indexed_references(&self) -> usize {
        self.inner.shared.index.len()
    }

    /// What the store holds now, per namespace (sorted by name): its entries and
    /// their bytes, each entry weighed as `weigh(value)` plus its bookkeeping (as
    /// [`max_bytes`](MemoryStorageBuilder::max_bytes) counts it). Walks every entry:
    /// for reports, not for the request path.
    pub fn held(&self, weigh: impl Fn(&V) -> usize) -> Vec<Held> {
        let mut held: Vec<Held> = Vec::new();
        for (_, entry) in self.inner.entries.iter() {
            let bytes = (weigh(&entry.value) + bookkeeping::<V>(&entry) as usize) as u64;
            match held.iter_mut().find(|h| *h.namespace == *entry.namespace) {
                Some(h) => {
                    h.entries += 1;
                    h.bytes += bytes;
                }
                None => held.push(Held {
                    namespace: Arc::clone(&entry.namespace),
                    entries: 1,
                    bytes,
                }),
            }
        }
        held.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        held
    }

    /// The entry under `key`, read at once.
    pub(crate) fn lookup(&self, key: CacheKey) -> Option<Stored<V>> {
        self.inner.entries.get(&key).map(|entry| entry.stored())
    }

    fn remove(&self, key: CacheKey, removals: &mut Removals) {
        if let Some(entry) = self.inner.entries.remove(&key) {
            removals.record(&entry.namespace);
        }
    }
}

impl<V: Clone + Send + Sync + 'static> Default for MemoryStorage<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Clone + Send + Sync + 'static> Storage<V> for MemoryStorage<V> {
    fn name(&self) -> &'static str {
        "memory"
    }

    #[inline]
    fn get(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Option<Stored<V>>>> {
        let found = self.inner.entries.get(&key).map(|entry| entry.stored());
        StorageFuture::ready(Ok(found))
    }

    fn get_many<'a>(
        &'a self,
        keys: &'a [CacheKey],
    ) -> StorageFuture<'a, StorageResult<Vec<Option<Stored<V>>>>> {
        let found = keys
            .iter()
            .map(|key| self.inner.entries.get(key).map(|entry| entry.stored()))
            .collect();
        StorageFuture::ready(Ok(found))
    }

    fn set(
        &self,
        key: CacheKey,
        entry: Entry<V>,
        ttl: Duration,
    ) -> StorageFuture<'_, StorageResult<()>> {
        // moka expires the entry when its retention ends, never before its
        // stale window does.
        let expires_at = deadline_after(Instant::now(), ttl).max(entry.stale_until);
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        // Two stores of one key (fetches of different invalidation epochs can
        // overlap) must index and insert in the same order: otherwise the entry
        // that lands last could be the one whose references the other's
        // replacement just unindexed, and no invalidation would find it. The
        // eviction listener takes only the index lock, so holding a stripe
        // across moka's insert cannot deadlock.
        let _stripe = self.inner.stores[(key.as_u128() as usize) % STORE_STRIPES].lock();
        self.inner.shared.index.insert(key, id, &entry.references);
        self.inner.entries.insert(
            key,
            Arc::new(MemEntry {
                value: entry.value,
                fresh_until: entry.fresh_until,
                stale_until: entry.stale_until,
                expires_at,
                fetched_in: entry.fetched_in,
                references: entry.references,
                namespace: entry.namespace,
                id,
            }),
        );
        StorageFuture::ready(Ok(()))
    }

    fn delete(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Removals>> {
        let mut removals = Removals::new();
        self.remove(key, &mut removals);
        StorageFuture::ready(Ok(removals))
    }

    fn invalidate<'a>(
        &'a self,
        patterns: &'a [ReferencePattern],
    ) -> StorageFuture<'a, StorageResult<Removals>> {
        // Collect under the index lock, remove after: removal runs the
        // eviction listener, which takes the same lock.
        let keys = self.inner.shared.index.matching(patterns);
        let mut removals = Removals::new();
        for key in keys {
            self.remove(key, &mut removals);
        }
        StorageFuture::ready(Ok(removals))
    }

    fn clear(&self) -> StorageFuture<'_, StorageResult<Removals>> {
        let mut removals = Removals::new();
        let now = Instant::now();
        for (_, entry) in self.inner.entries.iter() {
            if entry.expires_at > now {
                removals.record(&entry.namespace);
            }
        }
        self.inner.entries.invalidate_all();
        self.inner.shared.index.clear();
        StorageFuture::ready(Ok(removals))
    }

    fn observe_evictions(&self, observer: EvictionObserver) {
        self.inner.shared.observers.write().push(observer);
    }
}
