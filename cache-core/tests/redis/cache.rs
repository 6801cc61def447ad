//! `Cache` over Redis: one storage read for concurrent callers, entries
//! shared between caches, stale-while-revalidate across them.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cache_core::storage::{Encoded, JsonCodec, RedisStorage};
use cache_core::{Cache, CacheKey, Fetched};
use serde_json::{json, Value};

use crate::server::{within, RedisServer};

fn cache_over(store: &RedisStorage, ttl: Duration, stale: Duration) -> Cache<Value> {
    Cache::builder()
        .ttl(ttl)
        .stale(stale)
        .storage(Encoded::new(store.clone(), JsonCodec))
        .build()
}

#[tokio::test]
async fn concurrent_callers_share_one_storage_read_and_one_fetch() {
    let server = RedisServer::start();
    let store = RedisStorage::new(server.url()).unwrap();
    let cache = cache_over(&store, Duration::from_secs(60), Duration::ZERO);
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args(&"u1").finish();
    let fetches = Arc::new(AtomicUsize::new(0));

    let calls = (0..100).map(|_| {
        let fetches = Arc::clone(&fetches);
        cache.get_or_fetch(key, &ns, move || async move {
            fetches.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<_, Infallible>(Fetched::new(json!({"id": "u1"})).references(["User:u1"]))
        })
    });
    let values = futures::future::join_all(calls).await;
    assert!(values.iter().all(|v| v.as_ref().unwrap()["id"] == "u1"));
    assert_eq!(fetches.load(Ordering::SeqCst), 1, "one fetch");
    assert_eq!(
        store.stats().keys_read,
        1,
        "one storage read for 100 callers"
    );
    let stats = cache.stats().namespace("Query.user").cloned().unwrap();
    assert_eq!(stats.misses, 1);
    assert_eq!(stats.dedupes, 99);

    // Now stored: 100 more concurrent callers are hits sharing one read.
    let calls = (0..100)
        .map(|_| cache.get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(json!("never")) }));
    let values = futures::future::join_all(calls).await;
    assert!(values.iter().all(|v| v.as_ref().unwrap()["id"] == "u1"));
    assert_eq!(store.stats().keys_read, 2);
    assert_eq!(cache.stats().namespace("Query.user").unwrap().hits, 100);
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn two_caches_share_entries_and_invalidations() {
    let server = RedisServer::start();
    let a = cache_over(
        &RedisStorage::new(server.url()).unwrap(),
        Duration::from_secs(60),
        Duration::ZERO,
    );
    let b_store = RedisStorage::new(server.url()).unwrap();
    let b = cache_over(&b_store, Duration::from_secs(60), Duration::ZERO);
    let (ns_a, ns_b) = (a.namespace("Query.user"), b.namespace("Query.user"));
    let key = CacheKey::builder("Query.user").args(&"u1").finish();

    let stored = a
        .get_or_fetch(key, &ns_a, || async {
            Ok::<_, Infallible>(Fetched::new(json!({"name": "Ada"})).references(["User:u1"]))
        })
        .await
        .unwrap();
    let read = b
        .get_or_fetch(key, &ns_b, || async {
            Ok::<_, Infallible>(json!("fetched by B"))
        })
        .await
        .unwrap();
    assert_eq!(read, stored, "B reads what A stored, without fetching");
    assert_eq!(b.stats().namespace("Query.user").unwrap().hits, 1);

    assert_eq!(b.invalidate("User:*").await.unwrap(), 1);
    assert!(
        a.peek(key).await.is_none(),
        "B's invalidation reached A's entry"
    );
}

#[tokio::test]
async fn stale_entries_are_served_across_caches_while_one_refresh_runs() {
    let server = RedisServer::start();
    let store = RedisStorage::new(server.url()).unwrap();
    let a = cache_over(&store, Duration::from_millis(200), Duration::from_secs(10));
    let b = cache_over(
        &RedisStorage::new(server.url()).unwrap(),
        Duration::from_millis(200),
        Duration::from_secs(10),
    );
    let (ns_a, ns_b) = (a.namespace("Query.n"), b.namespace("Query.n"));
    let key = CacheKey::builder("Query.n").finish();
    a.get_or_fetch(key, &ns_a, || async { Ok::<_, Infallible>(json!(1)) })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let refreshes = Arc::new(AtomicUsize::new(0));
    let calls = (0..20).map(|_| {
        let refreshes = Arc::clone(&refreshes);
        b.get_or_fetch(key, &ns_b, move || async move {
            refreshes.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Infallible>(json!(2))
        })
    });
    let values = futures::future::join_all(calls).await;
    assert!(
        values.iter().all(|v| v.as_ref().unwrap() == &json!(1)),
        "stale value served"
    );
    let stats = b.stats().namespace("Query.n").cloned().unwrap();
    assert_eq!(stats.stale, 20);
    assert_eq!(stats.refreshes, 1);
    let refreshed = within(Duration::from_secs(2), async || {
        a.peek(key).await == Some(json!(2))
    })
    .await;
    assert!(refreshed, "B's refresh reached Redis and A sees it fresh");
    assert_eq!(refreshes.load(Ordering::SeqCst), 1);
}
