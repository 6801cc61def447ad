//! Concurrent callers of one key share one fetch; `ttl = 0` keeps nothing.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cache_core::storage::{
    Entry, MemoryStorage, Removals, Storage, StorageFuture, StorageResult, Stored,
};
use cache_core::{Cache, CacheKey, KeyParts, Policy, ReferencePattern};
use serde_json::json;

use crate::support::{callers_registered, stats_of, within, Calls, Valve};

async fn hundred_callers(cache: &Cache<u64>, namespace: &str) -> (Calls, Vec<u64>) {
    let ns = cache.namespace(namespace);
    let key = ns.key(&KeyParts::new().args(&json!({"id": "u1"})));
    let calls = Calls::default();
    let valve = Valve::closed();
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let (cache, ns, calls, valve) = (cache.clone(), ns.clone(), calls.clone(), valve.clone());
        tasks.push(tokio::spawn(async move {
            cache
                .get_or_fetch(key, &ns, move || async move {
                    calls.bump();
                    valve.wait().await;
                    Ok::<_, Infallible>(42u64)
                })
                .await
        }));
    }
    callers_registered(cache, namespace, 100).await;
    valve.open();
    let mut values = Vec::new();
    for task in tasks {
        values.push(
            within("the caller", task)
                .await
                .expect("task")
                .expect("value"),
        );
    }
    (calls, values)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedupe_100_concurrent_callers_run_exactly_one_fetch() {
    let cache: Cache<u64> = Cache::builder().build();
    let (calls, values) = hundred_callers(&cache, "Query.user").await;
    assert_eq!(calls.get(), 1);
    assert_eq!(values, vec![42; 100]);
    let stats = stats_of(&cache, "Query.user");
    assert_eq!((stats.misses, stats.dedupes, stats.hits), (1, 99, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedupe_with_ttl_stores_once_then_hits() {
    let cache: Cache<u64> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let (calls, _) = hundred_callers(&cache, "Query.user").await;
    assert_eq!(calls.get(), 1);
    let ns = cache.namespace("Query.user");
    let key = ns.key(&KeyParts::new().args(&json!({"id": "u1"})));
    let again = cache
        .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(7u64) })
        .await
        .expect("value");
    assert_eq!(
        again, 42,
        "the stored value answers, the fetch does not run"
    );
    assert_eq!(stats_of(&cache, "Query.user").hits, 1);
}

#[tokio::test]
async fn dedupe_ttl_zero_keeps_nothing_between_sequential_calls() {
    let cache: Cache<u64> = Cache::builder().build();
    let ns = cache.namespace("Query.me");
    let key = CacheKey::builder("Query.me").finish();
    let calls = Calls::default();
    for expected in 1..=3u64 {
        let calls = calls.clone();
        let value = cache
            .get_or_fetch(key, &ns, move || async move {
                Ok::<_, Infallible>(calls.bump() as u64)
            })
            .await
            .expect("value");
        assert_eq!(value, expected, "every sequential call fetches anew");
    }
    assert_eq!(cache.peek(key).await, None);
    assert_eq!(stats_of(&cache, "Query.me").misses, 3);
}

#[tokio::test]
async fn dedupe_distinct_keys_fetch_independently() {
    let cache: Cache<String> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("Query.user");
    let calls = Calls::default();
    for id in ["u1", "u2", "u1", "u2"] {
        let key = ns.key(&KeyParts::new().args(&json!({ "id": id })));
        let calls = calls.clone();
        let value = cache
            .get_or_fetch(key, &ns, move || async move {
                calls.bump();
                Ok::<_, Infallible>(format!("user {id}"))
            })
            .await
            .expect("value");
        assert_eq!(value, format!("user {id}"));
    }
    assert_eq!(calls.get(), 2);
}

/// A memory store that counts how often the cache touches it.
struct CountingStorage {
    inner: MemoryStorage<u64>,
    touches: Arc<AtomicUsize>,
}

impl Storage<u64> for CountingStorage {
    fn get(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Option<Stored<u64>>>> {
        self.touches.fetch_add(1, Ordering::SeqCst);
        self.inner.get(key)
    }

    fn set(
        &self,
        key: CacheKey,
        entry: Entry<u64>,
        ttl: Duration,
    ) -> StorageFuture<'_, StorageResult<()>> {
        self.touches.fetch_add(1, Ordering::SeqCst);
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

#[tokio::test]
async fn dedupe_ttl_zero_never_touches_the_storage() {
    let touches = Arc::new(AtomicUsize::new(0));
    let cache: Cache<u64> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .storage(CountingStorage {
            inner: MemoryStorage::new(),
            touches: Arc::clone(&touches),
        })
        .build();
    let dedupe_only = cache.namespace_with("Query.me", Policy::new());
    let cached = cache.namespace("Query.posts");
    for ns in [&dedupe_only, &cached] {
        let key = CacheKey::builder(ns.name()).finish();
        cache
            .get_or_fetch(key, ns, || async { Ok::<_, Infallible>(1u64) })
            .await
            .expect("value");
    }
    // Only the namespace with a ttl read (1) and wrote (1) the storage.
    assert_eq!(touches.load(Ordering::SeqCst), 2);
}
