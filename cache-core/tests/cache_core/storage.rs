//! The storage interface: the memory back end's bounds, codecs, batched
//! gets, and a failing back end.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cache_core::storage::{
    Codec, Encoded, Entry, Envelope, Eviction, JsonCodec, MemoryStorage, Removals, Storage,
    StorageFuture, StorageResult, Stored,
};
use cache_core::{Cache, CacheKey, Fetched, ReferencePattern, StorageError};
use serde_json::{json, Value};

use crate::support::stats_of;

#[tokio::test]
async fn storage_byte_bound_holds_after_pending_maintenance() {
    const MAX: u64 = 16 * 1024;
    let storage = MemoryStorage::<Arc<Vec<u8>>>::builder()
        .max_bytes(MAX, |v: &Arc<Vec<u8>>| v.len() as u32)
        .build();
    let cache: Cache<Arc<Vec<u8>>> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .storage(storage.clone())
        .build();
    let ns = cache.namespace("Query.blob");
    let mut keys = Vec::new();
    for i in 0..200u32 {
        let key = CacheKey::builder("Query.blob").args(&i).finish();
        keys.push(key);
        cache
            .get_or_fetch(key, &ns, || async {
                Ok::<_, Infallible>(Arc::new(vec![7u8; 512]))
            })
            .await
            .expect("value");
    }
    storage.run_pending_tasks();
    assert!(
        storage.weighted_size() <= MAX,
        "weighted size {} over the bound {MAX}",
        storage.weighted_size()
    );
    // Count what is really left, at the weigher's value alone (a lower bound
    // of the weight): it must fit too.
    let mut left = 0u64;
    for key in keys {
        if cache.peek(key).await.is_some() {
            left += 1;
        }
    }
    assert!(left > 0, "something is kept");
    assert!(left * 512 <= MAX, "{left} entries of 512 bytes kept");
    assert!(
        stats_of(&cache, "Query.blob").evictions > 0,
        "evictions counted"
    );
}

#[tokio::test]
async fn storage_entry_bound_holds_after_pending_maintenance() {
    let storage = MemoryStorage::<u32>::builder().max_entries(10).build();
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .storage(storage.clone())
        .build();
    let ns = cache.namespace("Query.n");
    for i in 0..100u32 {
        let key = CacheKey::builder("Query.n").args(&i).finish();
        cache
            .get_or_fetch(key, &ns, move || async move { Ok::<_, Infallible>(i) })
            .await
            .expect("value");
    }
    storage.run_pending_tasks();
    assert!(
        storage.entry_count() <= 10,
        "{} entries",
        storage.entry_count()
    );
}

#[tokio::test]
async fn storage_codec_values_round_trip_through_a_byte_store() {
    let bytes = MemoryStorage::<Bytes>::builder()
        .max_bytes(1 << 20, |b: &Bytes| b.len() as u32)
        .build();
    let cache: Cache<Value> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .storage(Encoded::new(bytes.clone(), JsonCodec))
        .build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args("u1").finish();
    let user = json!({"id": "u1", "name": "Ada", "tags": ["a", 1, null]});
    let fetched = user.clone();
    cache
        .get_or_fetch(key, &ns, move || async move {
            Ok::<_, Infallible>(Fetched::new(fetched).references(["User:u1"]))
        })
        .await
        .expect("value");
    // The byte store holds the JSON text.
    let raw = bytes.get(key).await.expect("read").expect("stored").value;
    assert_eq!(serde_json::from_slice::<Value>(&raw).expect("json"), user);
    // The cache decodes it on a hit.
    let hit = cache
        .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(Value::Null) })
        .await
        .expect("hit");
    assert_eq!(hit, user);
    assert_eq!(stats_of(&cache, "Query.user").hits, 1);
    // References pass through the adapter.
    assert_eq!(cache.invalidate("User:*").await.expect("invalidate"), 1);
    assert_eq!(cache.peek(key).await, None);
}

#[test]
fn storage_json_codec_reports_bad_bytes() {
    let decoded: Result<Value, StorageError> = JsonCodec.decode(b"{not json");
    assert!(matches!(decoded, Err(StorageError::Codec(_))));
}

#[test]
fn storage_envelope_round_trips_with_wall_clock_deadlines() {
    let now = Instant::now();
    let entry = Entry {
        value: Bytes::from_static(b"{\"id\":\"u1\"}"),
        fresh_until: now + Duration::from_secs(10),
        stale_until: now + Duration::from_secs(15),
        fetched_in: Duration::from_micros(1500),
        references: Arc::from(vec!["User:u1".into()]),
        namespace: Arc::from("Query.user"),
    };
    let sealed = Envelope::seal(&entry);
    let opened = Envelope::open(sealed.clone()).expect("open");
    assert_eq!(&*opened.namespace, "Query.user");
    assert_eq!(opened.stored.value, entry.value);
    // Deadlines cross as wall-clock times: they come back off by the time between the
    // paired clock readings (a preempted thread stretches it), never by more than a
    // second unless the conversion is wrong.
    let close = |a: Instant, b: Instant| {
        let gap = if a > b { a - b } else { b - a };
        gap < Duration::from_secs(1)
    };
    assert!(close(opened.stored.fresh_until, entry.fresh_until));
    assert!(close(opened.stored.stale_until, entry.stale_until));
    assert_eq!(opened.stored.fetched_in, Duration::from_micros(1500));
    // A version 1 envelope (no fetch duration) written before an upgrade still
    // opens: the same bytes without the duration's four, version byte 1.
    let namespace_end = 1 + 8 + 8 + 2 + "Query.user".len();
    let mut v1 = sealed[..namespace_end].to_vec();
    v1[0] = 1;
    v1.extend_from_slice(&sealed[namespace_end + 4..]);
    let old = Envelope::open(Bytes::from(v1)).expect("a version 1 envelope opens");
    assert_eq!(old.stored.value, entry.value);
    assert_eq!(old.stored.fetched_in, Duration::ZERO);
    // Damaged envelopes are errors, not panics.
    assert!(Envelope::open(sealed.slice(..5)).is_err());
    let mut wrong_version = sealed.to_vec();
    wrong_version[0] = 9;
    assert!(Envelope::open(Bytes::from(wrong_version)).is_err());
}

/// A memory store that counts batched and single reads, or fails them all.
struct ProbeStorage {
    inner: MemoryStorage<u32>,
    singles: Arc<AtomicUsize>,
    batches: Arc<AtomicUsize>,
    failing: bool,
}

impl Storage<u32> for ProbeStorage {
    fn get(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Option<Stored<u32>>>> {
        self.singles.fetch_add(1, Ordering::SeqCst);
        if self.failing {
            return StorageFuture::boxed(async { Err(StorageError::backend("connection reset")) });
        }
        self.inner.get(key)
    }

    fn get_many<'a>(
        &'a self,
        keys: &'a [CacheKey],
    ) -> StorageFuture<'a, StorageResult<Vec<Option<Stored<u32>>>>> {
        self.batches.fetch_add(1, Ordering::SeqCst);
        self.inner.get_many(keys)
    }

    fn set(
        &self,
        key: CacheKey,
        entry: Entry<u32>,
        ttl: Duration,
    ) -> StorageFuture<'_, StorageResult<()>> {
        if self.failing {
            return StorageFuture::ready(Err(StorageError::backend("read only")));
        }
        self.inner.set(key, entry, ttl)
    }

    fn delete(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Removals>> {
        self.inner.delete(key)
    }

    fn invalidate<'a>(
        &'a self,
        patterns: &'a [ReferencePattern],
    ) -> StorageFuture<'a, StorageResult<Removals>> {
        self.inner.invalidate(patterns)
    }

    fn clear(&self) -> StorageFuture<'_, StorageResult<Removals>> {
        self.inner.clear()
    }
}

fn probe(failing: bool) -> (Cache<u32>, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let singles = Arc::new(AtomicUsize::new(0));
    let batches = Arc::new(AtomicUsize::new(0));
    let cache = Cache::builder()
        .ttl(Duration::from_secs(60))
        .storage(ProbeStorage {
            inner: MemoryStorage::new(),
            singles: Arc::clone(&singles),
            batches: Arc::clone(&batches),
            failing,
        })
        .build();
    (cache, singles, batches)
}

#[tokio::test]
async fn storage_batched_get_answers_many_keys_in_one_call() {
    let (cache, singles, batches) = probe(false);
    let ns = cache.namespace("User.name");
    let keys: Vec<CacheKey> = (0..5u32)
        .map(|i| CacheKey::builder("User.name").parent(&i).finish())
        .collect();
    for (i, key) in keys.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        let value = i as u32;
        cache
            .get_or_fetch(*key, &ns, move || async move { Ok::<_, Infallible>(value) })
            .await
            .expect("value");
    }
    let reads_before = singles.load(Ordering::SeqCst);
    let found = cache.peek_many(&keys).await;
    assert_eq!(found, vec![Some(0), None, Some(2), None, Some(4)]);
    assert_eq!(batches.load(Ordering::SeqCst), 1);
    assert_eq!(
        singles.load(Ordering::SeqCst),
        reads_before,
        "no single gets for a batch"
    );
}

#[tokio::test]
async fn storage_failure_is_a_counted_miss_not_an_error() {
    let (cache, _, _) = probe(true);
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").finish();
    for _ in 0..2 {
        let value = cache
            .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(1u32) })
            .await
            .expect("the fetch answers when the store cannot");
        assert_eq!(value, 1);
    }
    let stats = stats_of(&cache, "Query.user");
    assert_eq!(stats.misses, 2);
    assert_eq!(
        stats.storage_errors, 4,
        "two failed reads and two failed writes"
    );
}

#[tokio::test]
async fn storage_default_get_many_falls_back_to_single_gets() {
    // A back end that only implements `get` still answers batches.
    struct Minimal(MemoryStorage<u32>);
    impl Storage<u32> for Minimal {
        fn get(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Option<Stored<u32>>>> {
            self.0.get(key)
        }
        fn set(
            &self,
            key: CacheKey,
            entry: Entry<u32>,
            ttl: Duration,
        ) -> StorageFuture<'_, StorageResult<()>> {
            self.0.set(key, entry, ttl)
        }
        fn delete(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Removals>> {
            self.0.delete(key)
        }
        fn invalidate<'a>(
            &'a self,
            patterns: &'a [ReferencePattern],
        ) -> StorageFuture<'a, StorageResult<Removals>> {
            self.0.invalidate(patterns)
        }
        fn clear(&self) -> StorageFuture<'_, StorageResult<Removals>> {
            self.0.clear()
        }
    }
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .storage(Minimal(MemoryStorage::new()))
        .build();
    let ns = cache.namespace("Query.n");
    let a = CacheKey::builder("Query.n").args(&1).finish();
    let b = CacheKey::builder("Query.n").args(&2).finish();
    cache
        .get_or_fetch(a, &ns, || async { Ok::<_, Infallible>(1u32) })
        .await
        .expect("value");
    assert_eq!(cache.peek_many(&[a, b]).await, vec![Some(1), None]);
    assert_eq!(cache.storage_name(), "custom");
}

/// The entry under `key`, read from a memory store (it answers at once).
fn read_now(storage: &MemoryStorage<u32>, key: CacheKey) -> Option<Stored<u32>> {
    match storage.get(key) {
        StorageFuture::Ready(r) => r.into_inner().unwrap(),
        StorageFuture::Pending(_) => unreachable!("memory answers at once"),
    }
}

/// How many of `keys` the store holds.
fn held(storage: &MemoryStorage<u32>, keys: impl Iterator<Item = u32>) -> usize {
    keys.filter(|i| read_now(storage, CacheKey::builder("Query.n").args(i).finish()).is_some())
        .count()
}

#[tokio::test]
async fn storage_eviction_lru_keeps_the_newest_and_tinylfu_the_popular() {
    let store = |eviction| {
        MemoryStorage::<u32>::builder()
            .max_entries(100)
            .eviction(eviction)
            .build()
    };
    let entry = |i: u32| Entry {
        value: i,
        fresh_until: Instant::now() + Duration::from_secs(60),
        stale_until: Instant::now() + Duration::from_secs(60),
        fetched_in: Duration::ZERO,
        references: Arc::new([]),
        namespace: Arc::from("Query.n"),
    };
    let key = |i: u32| CacheKey::builder("Query.n").args(&i).finish();
    let mut kept = Vec::new();
    for eviction in [Eviction::Lru, Eviction::TinyLfu] {
        let storage = store(eviction);
        // 100 popular keys, each read ten times...
        for i in 0..100 {
            let _ = storage.set(key(i), entry(i), Duration::from_secs(60)).await;
        }
        for _ in 0..10 {
            for i in 0..100 {
                let _ = storage.get(key(i)).await;
            }
        }
        storage.run_pending_tasks();
        // ...then 100 keys seen once each.
        for i in 100..200 {
            let _ = storage.set(key(i), entry(i), Duration::from_secs(60)).await;
            storage.run_pending_tasks();
        }
        kept.push((held(&storage, 0..100), held(&storage, 100..200)));
    }
    let (lru, tinylfu) = (kept[0], kept[1]);
    assert!(lru.1 > 90 && lru.0 < 10, "LRU keeps the newest: {lru:?}");
    assert!(
        tinylfu.0 > 90 && tinylfu.1 < 10,
        "TinyLFU keeps the popular: {tinylfu:?}"
    );
    assert_eq!(Eviction::parse("lru"), Ok(Eviction::Lru));
    assert_eq!(Eviction::parse("tinylfu"), Ok(Eviction::TinyLfu));
    assert!(Eviction::parse("fifo")
        .unwrap_err()
        .contains("use lru or tinylfu"));
}

#[tokio::test]
async fn storage_keeps_an_entry_as_long_as_set_asks_and_its_fetch_duration() {
    let storage = MemoryStorage::<u32>::new();
    // A minute's ttl: the read just after the store must find it however slow the
    // machine is.
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .storage(storage.clone())
        .build();
    let ns = cache.namespace("Query.n");
    let key = CacheKey::builder("Query.n").finish();
    cache
        .get_or_fetch(key, &ns, || async {
            tokio::time::sleep(Duration::from_millis(25)).await;
            Ok::<_, Infallible>(1u32)
        })
        .await
        .unwrap();
    let read = |storage: &MemoryStorage<u32>| read_now(storage, key);
    let stored = read(&storage).expect("stored");
    assert!(
        stored.fetched_in >= Duration::from_millis(25),
        "{:?}",
        stored.fetched_in
    );
    // Kept past its stale window when set asks for it, never shorter.
    let now = Instant::now();
    let entry = |stale_until| Entry {
        value: 2,
        fresh_until: now,
        stale_until,
        fetched_in: Duration::ZERO,
        references: Arc::new([]),
        namespace: Arc::from("Query.n"),
    };
    // Retained a second, read 60 ms in: a slow machine has 940 ms of slack.
    let _ = storage
        .set(
            key,
            entry(now + Duration::from_millis(10)),
            Duration::from_secs(1),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(
        read(&storage).map(|s| s.value),
        Some(2),
        "retained for recovery"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    storage.run_pending_tasks();
    assert_eq!(
        read(&storage).map(|s| s.value),
        None,
        "dropped when its retention ended"
    );
    let _ = storage
        .set(key, entry(now + Duration::from_secs(60)), Duration::ZERO)
        .await;
    assert_eq!(
        read(&storage).map(|s| s.value),
        Some(2),
        "never before its stale window"
    );
}
