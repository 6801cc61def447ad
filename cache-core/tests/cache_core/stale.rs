//! TTL expiry, stale-while-revalidate, and durations computed from values.

use std::convert::Infallible;
use std::time::Duration;

use cache_core::{Cache, CacheKey, Fetched, Policy};

use crate::support::{eventually, stats_of, within, Calls, Valve};

#[tokio::test]
async fn ttl_fresh_value_is_a_hit() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args("u1").finish();
    let calls = Calls::default();
    for _ in 0..3 {
        let calls = calls.clone();
        let value = cache
            .get_or_fetch(key, &ns, move || async move {
                Ok::<_, Infallible>(calls.bump() as u32)
            })
            .await
            .expect("value");
        assert_eq!(value, 1);
    }
    let stats = stats_of(&cache, "Query.user");
    assert_eq!((stats.misses, stats.hits), (1, 2));
}

#[tokio::test]
async fn ttl_expiry_fetches_again() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_millis(30)).build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args("u1").finish();
    let calls = Calls::default();
    let fetch = |calls: Calls| move || async move { Ok::<_, Infallible>(calls.bump() as u32) };
    assert_eq!(
        cache
            .get_or_fetch(key, &ns, fetch(calls.clone()))
            .await
            .expect("v"),
        1
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        cache
            .get_or_fetch(key, &ns, fetch(calls.clone()))
            .await
            .expect("v"),
        2
    );
    assert_eq!(stats_of(&cache, "Query.user").misses, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_value_is_served_while_exactly_one_refresh_runs() {
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_millis(30))
        .stale(Duration::from_secs(60))
        .build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args("u1").finish();
    cache
        .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(1u32) })
        .await
        .expect("first value");
    tokio::time::sleep(Duration::from_millis(100)).await;

    // Every call sees the stale value at once although the refresh is held.
    let refreshes = Calls::default();
    let valve = Valve::closed();
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (cache, ns, refreshes, valve) =
            (cache.clone(), ns.clone(), refreshes.clone(), valve.clone());
        tasks.push(tokio::spawn(async move {
            cache
                .get_or_fetch(key, &ns, move || async move {
                    refreshes.bump();
                    valve.wait().await;
                    // Fresh for long, so the polling below cannot go stale again.
                    Ok::<_, Infallible>(Fetched::new(2u32).ttl(Duration::from_secs(60)))
                })
                .await
        }));
    }
    for task in tasks {
        assert_eq!(
            within("the caller", task)
                .await
                .expect("task")
                .expect("value"),
            1,
            "stale value served"
        );
    }
    // The refresh runs on a task of its own, which a busy machine may not have started
    // yet when the last caller has its stale value.
    eventually("the background refresh starts", || refreshes.get() >= 1).await;
    assert_eq!(
        refreshes.get(),
        1,
        "one background refresh for twenty stale reads"
    );

    valve.open();
    let polled = cache.clone();
    let mut latest = 0;
    for _ in 0..10_000 {
        latest = polled
            .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(99u32) })
            .await
            .expect("value");
        if latest == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(latest, 2, "the refreshed value replaced the stale one");
    assert_eq!(refreshes.get(), 1);
    let stats = stats_of(&cache, "Query.user");
    assert_eq!(stats.refreshes, 1);
    assert!(stats.stale >= 20, "stale serves counted: {stats:?}");
}

#[tokio::test]
async fn stale_refresh_error_keeps_serving_stale_and_retries() {
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_millis(20))
        .stale(Duration::from_secs(60))
        .build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").finish();
    cache
        .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(1u32) })
        .await
        .expect("first value");
    tokio::time::sleep(Duration::from_millis(60)).await;
    let failures = Calls::default();
    let failing = |failures: Calls| {
        move || async move {
            failures.bump();
            Err::<u32, _>(crate::support::Boom("refresh"))
        }
    };
    let served = cache
        .get_or_fetch(key, &ns, failing(failures.clone()))
        .await;
    assert_eq!(served.expect("stale value"), 1);
    eventually("the failed refresh was counted", || {
        stats_of(&cache, "Query.user").errors == 1
    })
    .await;
    // The failed refresh stored nothing and left the stale entry: later
    // stale reads start a new refresh once the failed one has retired.
    for _ in 0..10_000 {
        let served = cache
            .get_or_fetch(key, &ns, failing(failures.clone()))
            .await;
        assert_eq!(served.expect("stale value"), 1);
        if failures.get() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(
        failures.get(),
        2,
        "a second refresh ran after the first failed"
    );
}

#[tokio::test]
async fn ttl_computed_from_the_value() {
    // Even numbers are kept for a minute, odd ones not at all.
    let policy = Policy::new().ttl_fn(|v: &u32| {
        if v & 1 == 0 {
            Duration::from_secs(60)
        } else {
            Duration::ZERO
        }
    });
    let cache: Cache<u32> = Cache::builder().build();
    let ns = cache.namespace_with("Query.number", policy);
    let even = CacheKey::builder("Query.number").args(&2).finish();
    let odd = CacheKey::builder("Query.number").args(&3).finish();
    let calls = Calls::default();
    for (key, value) in [(even, 2u32), (odd, 3), (even, 2), (odd, 3)] {
        let calls = calls.clone();
        cache
            .get_or_fetch(key, &ns, move || async move {
                calls.bump();
                Ok::<_, Infallible>(value)
            })
            .await
            .expect("value");
    }
    assert_eq!(
        calls.get(),
        3,
        "the even value was stored, the odd one fetched twice"
    );
    assert_eq!(cache.peek(even).await, Some(2));
    assert_eq!(cache.peek(odd).await, None);
}

#[tokio::test]
async fn ttl_set_by_the_fetch_overrides_the_policy() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").finish();
    cache
        .get_or_fetch(key, &ns, || async {
            Ok::<_, Infallible>(Fetched::new(1u32).ttl(Duration::from_millis(20)))
        })
        .await
        .expect("value");
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(cache.peek(key).await, None, "the fetch's short ttl applied");
}
