//! `LayeredStorage`: L1 in front of Redis, and invalidations broadcast to
//! the other processes' L1 over pub/sub.

use std::convert::Infallible;
use std::time::Duration;

use cache_core::storage::{JsonCodec, LayeredStorage, RedisStorage, Storage};
use cache_core::{Cache, CacheKey, Fetched};
use serde_json::{json, Value};

use crate::server::{within, RedisServer};

/// The bound on waiting for a subscription or a broadcast to land: generous, since a
/// loaded machine can be slow, and spent only when something is wrong.
const EVENTS_WITHIN: Duration = Duration::from_secs(10);

fn layered(url: &str, l1_ttl: Duration) -> LayeredStorage<Value> {
    LayeredStorage::builder()
        .l1_ttl(l1_ttl)
        .build_redis(RedisStorage::new(url).unwrap(), JsonCodec)
}

fn cache_over(store: &LayeredStorage<Value>) -> Cache<Value> {
    Cache::builder()
        .ttl(Duration::from_secs(60))
        .storage(store.clone())
        .build()
}

#[tokio::test]
async fn l1_answers_repeat_reads_without_a_round_trip() {
    let server = RedisServer::start();
    let store = LayeredStorage::connect(&server.url(), JsonCodec).unwrap();
    // The subscriber empties L1 when it (re)subscribes (messages sent before were
    // lost): landing after the first read's fill, it would send the next read to
    // Redis, one round trip more than the test counts. Wait for it first.
    assert!(store.wait_subscribed(EVENTS_WITHIN).await);
    let cache = cache_over(&store);
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args(&"u1").finish();
    cache
        .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(json!("Ada")) })
        .await
        .unwrap();
    let redis = store.redis().unwrap();
    let trips = redis.stats().round_trips;
    for _ in 0..10 {
        let value = cache
            .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(json!("never")) })
            .await
            .unwrap();
        assert_eq!(value, json!("Ada"));
    }
    assert_eq!(redis.stats().round_trips, trips, "L1 answered");
    assert_eq!(store.stats().l1_hits, 10);
}

#[tokio::test]
async fn l1_expires_and_refills_from_redis() {
    let server = RedisServer::start();
    // An L1 ttl of a second: the refilled copy must still be there when checked.
    let store = layered(&server.url(), Duration::from_secs(1));
    // Subscribed first: its L1 clear must not land between the refill and the check.
    assert!(store.wait_subscribed(EVENTS_WITHIN).await);
    let cache = cache_over(&store);
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args(&"u1").finish();
    cache
        .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(json!("Ada")) })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(
        store.l1().get(key).await.unwrap().is_none(),
        "L1 copy expired"
    );
    assert_eq!(
        cache.peek(key).await,
        Some(json!("Ada")),
        "Redis still has it"
    );
    assert_eq!(store.stats().l2_hits, 1);
    assert!(
        store.l1().get(key).await.unwrap().is_some(),
        "copied back into L1"
    );
}

#[tokio::test]
async fn invalidation_in_one_process_drops_the_others_l1_entries() {
    let server = RedisServer::start();
    // A long L1 ttl, so only the broadcast can explain B's L1 losing them.
    let a = layered(&server.url(), Duration::from_secs(60));
    let b = layered(&server.url(), Duration::from_secs(60));
    assert!(a.wait_subscribed(EVENTS_WITHIN).await);
    assert!(b.wait_subscribed(EVENTS_WITHIN).await);
    let (cache_a, cache_b) = (cache_over(&a), cache_over(&b));
    let (ns_a, ns_b) = (
        cache_a.namespace("Query.user"),
        cache_b.namespace("Query.user"),
    );
    let k1 = CacheKey::builder("Query.user").args(&"u1").finish();
    let k2 = CacheKey::builder("Query.user").args(&"u2").finish();
    for (key, id) in [(k1, "User:u1"), (k2, "User:u2")] {
        cache_a
            .get_or_fetch(key, &ns_a, move || async move {
                Ok::<_, Infallible>(Fetched::new(json!(id)).references([id]))
            })
            .await
            .unwrap();
        // B reads it from Redis into its L1.
        let read = cache_b
            .get_or_fetch(key, &ns_b, || async { Ok::<_, Infallible>(json!("never")) })
            .await
            .unwrap();
        assert_eq!(read, json!(id));
        assert!(b.l1().get(key).await.unwrap().is_some());
    }

    assert_eq!(cache_a.invalidate("User:u1").await.unwrap(), 1);
    // B counts the message just after it drops the entry: wait for both.
    let gone = within(EVENTS_WITHIN, async || {
        b.l1().get(k1).await.unwrap().is_none() && b.stats().received >= 1
    })
    .await;
    assert!(gone, "B's L1 copy of the invalidated entry is gone");
    assert!(
        b.l1().get(k2).await.unwrap().is_some(),
        "the other entry stays"
    );
    assert_eq!(a.stats().received, 0, "A ignores its own message");
    assert!(a.stats().published >= 1);
    assert!(
        a.l1().get(k1).await.unwrap().is_none(),
        "A's own L1 dropped it too"
    );

    cache_a.clear().await.unwrap();
    let cleared = within(EVENTS_WITHIN, async || {
        b.l1().get(k2).await.unwrap().is_none()
    })
    .await;
    assert!(cleared, "a clear empties the other L1 too");
}

#[tokio::test]
async fn the_subscriber_resubscribes_after_a_restart() {
    let mut server = RedisServer::start();
    let store = layered(&server.url(), Duration::from_secs(60));
    assert!(store.wait_subscribed(EVENTS_WITHIN).await);
    server.kill();
    let lost = within(EVENTS_WITHIN, async || !store.stats().subscribed).await;
    assert!(lost, "the subscriber noticed the lost connection");
    server.restart();
    assert!(
        store.wait_subscribed(Duration::from_secs(10)).await,
        "subscribed again after the restart"
    );
}

#[tokio::test]
async fn an_entry_redis_no_longer_has_is_dropped_from_l1() {
    let server = RedisServer::start();
    let store = layered(&server.url(), Duration::from_secs(60));
    let cache = Cache::builder()
        .ttl(Duration::from_millis(100))
        .stale(Duration::from_secs(30))
        .storage(store.clone())
        .build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args(&"u1").finish();
    cache
        .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(json!("Ada")) })
        .await
        .unwrap();
    // Removed from Redis behind this process's back (no broadcast).
    let other = RedisStorage::new(server.url()).unwrap();
    assert_eq!(other.delete(key).await.unwrap().total(), 1);
    tokio::time::sleep(Duration::from_millis(150)).await;
    // The L1 copy is stale now, so L2 is asked, has nothing: a miss.
    assert!(store.get(key).await.unwrap().is_none());
    assert!(store.l1().get(key).await.unwrap().is_none());
}
