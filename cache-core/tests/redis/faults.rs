//! Redis down at start, killed mid-way, restarted, or slow: cache calls
//! never fail, the breaker opens, the store reconnects.

use std::convert::Infallible;
use std::time::Duration;

use cache_core::storage::{Encoded, JsonCodec, RedisFault, RedisStorage, Storage};
use cache_core::{Cache, CacheKey};
use serde_json::{json, Value};

use crate::server::{within, RedisServer};

fn cache_over(store: &RedisStorage) -> Cache<Value> {
    Cache::builder()
        .ttl(Duration::from_secs(60))
        .storage(Encoded::new(store.clone(), JsonCodec))
        .build()
}

fn key(n: u32) -> CacheKey {
    CacheKey::builder("Query.n").args(&n).finish()
}

#[tokio::test]
async fn redis_down_at_start_costs_misses_and_opens_the_breaker() {
    let url = format!("redis://127.0.0.1:{}/", RedisServer::unused_port());
    // A long cool-down keeps the breaker open while we look at it.
    let store = RedisStorage::builder(url)
        .breaker(3, Duration::from_secs(30))
        .build()
        .expect("building does not need Redis");
    let cache = cache_over(&store);
    let ns = cache.namespace("Query.n");
    for n in 0..20 {
        let value = cache
            .get_or_fetch(
                key(n),
                &ns,
                move || async move { Ok::<_, Infallible>(json!(n)) },
            )
            .await
            .expect("a storage failure is a miss, not an error");
        assert_eq!(value, json!(n));
    }
    let stats = cache.stats().namespace("Query.n").cloned().unwrap();
    assert_eq!(stats.misses, 20);
    assert_eq!(
        stats.storage_errors, 40,
        "a failed read and a failed write per call"
    );
    let redis = store.stats();
    assert!(redis.breaker_open);
    assert_eq!(redis.breaker_trips, 1);
    assert_eq!(
        redis.errors, 3,
        "after 3 failures no call touched the network"
    );
    assert_eq!(redis.rejected, 37);
    assert!(store.ping().await.is_err());
}

#[tokio::test]
async fn killed_and_restarted_redis_never_fails_a_call_and_is_used_again() {
    let mut server = RedisServer::start();
    let store = RedisStorage::builder(server.url())
        .breaker(5, Duration::from_millis(200))
        .build()
        .unwrap();
    let cache = cache_over(&store);
    let ns = cache.namespace("Query.n");
    let mut failures = 0;
    for i in 0..200u32 {
        if i == 50 {
            server.kill();
        }
        let n = i % 20;
        match cache
            .get_or_fetch(
                key(n),
                &ns,
                move || async move { Ok::<_, Infallible>(json!(n)) },
            )
            .await
        {
            Ok(value) => assert_eq!(value, json!(n)),
            Err(_) => failures += 1,
        }
    }
    assert_eq!(failures, 0, "no call failed");
    let stats = cache.stats().namespace("Query.n").cloned().unwrap();
    assert_eq!(stats.hits, 30, "calls 20..50 were hits");
    assert!(stats.storage_errors > 0);
    assert!(store.stats().errors > 0);

    server.restart();
    let mut n = 1000;
    let stored_again = within(Duration::from_secs(10), async || {
        n += 1;
        let _ = cache
            .get_or_fetch(
                key(n),
                &ns,
                move || async move { Ok::<_, Infallible>(json!(n)) },
            )
            .await;
        matches!(store.get(key(n)).await, Ok(Some(_)))
    })
    .await;
    assert!(stored_again, "the store reconnected and stores again");
    assert!(!store.stats().breaker_open);
}

#[tokio::test]
async fn a_slow_redis_times_out_instead_of_stalling_calls() {
    let server = RedisServer::start();
    let store = RedisStorage::builder(server.url())
        .command_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let cache = cache_over(&store);
    let ns = cache.namespace("Query.n");
    store.ping().await.unwrap();

    let busy = keep_busy(&server, 1500).await;
    let slow = within(Duration::from_secs(2), async || store.ping().await.is_err()).await;
    assert!(slow, "the server is busy");

    let value = cache
        .get_or_fetch(key(1), &ns, || async {
            Ok::<_, Infallible>(json!("fetched"))
        })
        .await
        .unwrap();
    assert_eq!(value, json!("fetched"));
    let redis = store.stats();
    assert!(
        redis.timeouts >= 3,
        "the ping, the read and the write timed out: {redis:?}"
    );
    assert_eq!(
        cache.stats().namespace("Query.n").unwrap().storage_errors,
        2
    );
    busy.await.unwrap();
}

/// Keeps `server` busy for `millis` with a script on a connection of its own.
async fn keep_busy(server: &RedisServer, millis: u64) -> tokio::task::JoinHandle<()> {
    let client = redis::Client::open(server.url()).unwrap();
    let mut other = client.get_multiplexed_async_connection().await.unwrap();
    tokio::spawn(async move {
        let script = format!(
            "local t = redis.call('TIME') \
             local start = t[1] * 1000 + t[2] / 1000 \
             repeat t = redis.call('TIME') until t[1] * 1000 + t[2] / 1000 - start > {millis} \
             return 1"
        );
        let _ = redis::cmd("EVAL")
            .arg(script)
            .arg(0)
            .query_async::<i64>(&mut other)
            .await;
    })
}

#[tokio::test]
async fn a_full_pipelining_queue_refuses_gets_at_once_as_misses() {
    let server = RedisServer::start();
    // One MGET in flight, four gets queued: a stalled Redis fills both at once.
    let store = RedisStorage::builder(server.url())
        .command_timeout(Duration::from_millis(500))
        .batches_in_flight(1)
        .queue_capacity(4)
        .breaker(1000, Duration::from_secs(1))
        .build()
        .unwrap();
    store.ping().await.unwrap();
    // Stalled 2.5 s: the two batches that are let through time out after 0.5 s each,
    // well inside it even when this machine is slow to send the second.
    let busy = keep_busy(&server, 2500).await;
    let slow = within(Duration::from_secs(2), async || store.ping().await.is_err()).await;
    assert!(slow, "the server is busy");

    let started = std::time::Instant::now();
    let gets: Vec<_> = (0..200u32)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                let began = std::time::Instant::now();
                let result = store.get(key(n)).await;
                (result, began.elapsed())
            })
        })
        .collect();
    let mut refused = 0;
    for get in gets {
        let (result, took) = get.await.unwrap();
        let error = result.expect_err("Redis is stalled: no get succeeds");
        if let cache_core::StorageError::Backend(inner) = &error {
            if inner.downcast_ref::<RedisFault>() == Some(&RedisFault::QueueFull) {
                refused += 1;
                // A get that waited for Redis would take the command timeout.
                assert!(
                    took < Duration::from_millis(500),
                    "a refusal waits for nothing: {took:?}"
                );
            }
        }
    }
    let stats = store.stats();
    assert!(
        refused >= 150,
        "most gets were refused: {refused} of 200, {stats:?}"
    );
    assert_eq!(stats.queue_refused, refused);
    // Every get failed while Redis was stalled (above): none waited the stall out. This
    // only guards against a hang.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the queued gets were bounded by the command timeout"
    );

    // Through a cache, a refusal is a miss: the value is fetched.
    let cache = cache_over(&store);
    let ns = cache.namespace("Query.n");
    let value = cache
        .get_or_fetch(key(1), &ns, || async { Ok::<_, Infallible>(json!(1)) })
        .await
        .unwrap();
    assert_eq!(value, json!(1));
    busy.await.unwrap();
}
