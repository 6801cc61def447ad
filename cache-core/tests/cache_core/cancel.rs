//! A cancelled leader does not strand its followers; followers can give up.

use std::convert::Infallible;
use std::time::Duration;

use cache_core::{Cache, CacheError, CacheKey};

use crate::support::{
    callers_registered, eventually, gated_caller, stats_of, within, Calls, Valve,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_leader_mid_fetch_a_follower_takes_over() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args("u1").finish();

    let leader_calls = Calls::default();
    let leader = {
        let (cache, ns, leader_calls) = (cache.clone(), ns.clone(), leader_calls.clone());
        tokio::spawn(async move {
            cache
                .get_or_fetch(key, &ns, move || async move {
                    leader_calls.bump();
                    std::future::pending::<()>().await;
                    Ok::<_, Infallible>(0u32)
                })
                .await
        })
    };
    eventually("the leader's fetch started", || leader_calls.get() == 1).await;

    let follower_calls = Calls::default();
    let mut followers = Vec::new();
    for _ in 0..5 {
        let (cache, ns, follower_calls) = (cache.clone(), ns.clone(), follower_calls.clone());
        followers.push(tokio::spawn(async move {
            cache
                .get_or_fetch(key, &ns, move || async move {
                    follower_calls.bump();
                    Ok::<_, Infallible>(7u32)
                })
                .await
        }));
    }
    callers_registered(&cache, "Query.user", 6).await;
    assert_eq!(follower_calls.get(), 0, "followers wait on the leader");

    leader.abort();
    assert!(within("the caller", leader)
        .await
        .expect_err("aborted")
        .is_cancelled());

    for follower in followers {
        assert_eq!(
            within("the caller", follower)
                .await
                .expect("task")
                .expect("value"),
            7
        );
    }
    assert_eq!(follower_calls.get(), 1, "exactly one follower took over");
    assert_eq!(
        cache.peek(key).await,
        Some(7),
        "the new leader stored its value"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_leader_detached_fetch_finishes_for_followers() {
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .detach_fetches(true)
        .build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args("u1").finish();
    let calls = Calls::default();
    let valve = Valve::closed();
    let spawn_caller = |value: u32| {
        let (cache, ns, calls, valve) = (cache.clone(), ns.clone(), calls.clone(), valve.clone());
        tokio::spawn(async move {
            cache
                .get_or_fetch(key, &ns, move || async move {
                    calls.bump();
                    valve.wait().await;
                    Ok::<_, Infallible>(value)
                })
                .await
        })
    };
    let leader = spawn_caller(1);
    eventually("the leader's fetch started", || calls.get() == 1).await;
    let followers: Vec<_> = (0..5).map(|_| spawn_caller(2)).collect();
    callers_registered(&cache, "Query.user", 6).await;

    leader.abort();
    assert!(within("the caller", leader)
        .await
        .expect_err("aborted")
        .is_cancelled());
    valve.open();

    for follower in followers {
        assert_eq!(
            within("the caller", follower)
                .await
                .expect("task")
                .expect("value"),
            1,
            "the leader's fetch answered"
        );
    }
    assert_eq!(calls.get(), 1, "no follower had to fetch");
    assert_eq!(cache.peek(key).await, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_every_caller_detached_fetch_still_fills_the_cache() {
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .detach_fetches(true)
        .build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").finish();
    let valve = Valve::closed();
    let caller = {
        let (cache, ns, valve) = (cache.clone(), ns.clone(), valve.clone());
        tokio::spawn(async move {
            cache
                .get_or_fetch(key, &ns, move || async move {
                    valve.wait().await;
                    Ok::<_, Infallible>(3u32)
                })
                .await
        })
    };
    callers_registered(&cache, "Query.user", 1).await;
    caller.abort();
    let _ = caller.await;
    valve.open();
    let mut found = None;
    for _ in 0..10_000 {
        found = cache.peek(key).await;
        if found.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(found, Some(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_wait_timeout_lets_followers_give_up() {
    let cache: Cache<u32> = Cache::builder()
        .wait_timeout(Duration::from_millis(50))
        .build();
    let ns = cache.namespace("Query.slow");
    let key = CacheKey::builder("Query.slow").finish();
    let valve = Valve::closed();
    let leader = {
        let (cache, ns, valve) = (cache.clone(), ns.clone(), valve.clone());
        tokio::spawn(async move {
            cache
                .get_or_fetch(key, &ns, move || async move {
                    valve.wait().await;
                    Ok::<_, Infallible>(1u32)
                })
                .await
        })
    };
    callers_registered(&cache, "Query.slow", 1).await;
    let follower = cache
        .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(2u32) })
        .await;
    assert!(
        matches!(follower, Err(CacheError::Timeout(_))),
        "{follower:?}"
    );
    valve.open();
    assert_eq!(
        within("the caller", leader)
            .await
            .expect("task")
            .expect("leader value"),
        1,
        "the fetch went on"
    );
    let stats = stats_of(&cache, "Query.slow");
    assert_eq!((stats.timeouts, stats.dedupes), (1, 1));
}

/// Followers on one thread wait through one of them, the relay (one wake per thread):
/// when the relay is cancelled, another takes its place, and the last follower standing
/// still gets the value.
#[tokio::test(flavor = "current_thread")]
async fn cancelled_relays_hand_on_to_the_followers_of_their_thread() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args("u1").finish();
    let valve = Valve::closed();
    let calls = Calls::default();
    let caller = || gated_caller(&cache, &ns, key, &valve, &calls);
    let leader = caller();
    eventually("the leader's fetch started", || calls.get() == 1).await;
    // One thread: the first follower to wait relays for the others.
    let followers: Vec<_> = (0..5).map(|_| caller()).collect();
    callers_registered(&cache, "Query.user", 6).await;
    tokio::task::yield_now().await;
    let mut followers = followers.into_iter();
    let last = followers.next_back().expect("five followers");
    // Every follower but the last is cancelled in turn, relays first.
    for follower in followers {
        follower.abort();
        assert!(within("a cancelled follower", follower)
            .await
            .expect_err("aborted")
            .is_cancelled());
        tokio::task::yield_now().await;
    }
    valve.open();
    assert_eq!(
        within("the leader", leader)
            .await
            .expect("task")
            .expect("value"),
        7
    );
    assert_eq!(
        within("the last follower", last)
            .await
            .expect("task")
            .expect("value"),
        7
    );
    assert_eq!(calls.get(), 1, "the followers never fetched");
}

/// A leader on one thread wakes followers on another (each a current-thread runtime,
/// as the gateway's shards are): every follower gets the one fetch's value.
#[test]
fn followers_on_another_thread_get_the_leaders_value() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::ZERO).build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args("u1").finish();
    let valve = Valve::closed();
    let calls = Calls::default();
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    let leader = {
        let (cache, ns, valve, calls) = (cache.clone(), ns.clone(), valve.clone(), calls.clone());
        std::thread::spawn(move || {
            runtime().block_on(cache.get_or_fetch(key, &ns, move || async move {
                calls.bump();
                valve.wait().await;
                Ok::<_, Infallible>(7u32)
            }))
        })
    };
    let values = runtime().block_on(async {
        eventually("the leader's fetch started", || calls.get() == 1).await;
        let followers: Vec<_> = (0..20)
            .map(|_| {
                let (cache, ns) = (cache.clone(), ns.clone());
                tokio::spawn(async move {
                    cache
                        .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(0u32) })
                        .await
                })
            })
            .collect();
        callers_registered(&cache, "Query.user", 21).await;
        valve.open();
        let mut values = Vec::new();
        for follower in followers {
            values.push(
                within("a follower", follower)
                    .await
                    .expect("task")
                    .expect("value"),
            );
        }
        values
    });
    assert_eq!(
        leader.join().expect("the leader's thread").expect("value"),
        7
    );
    assert!(values.iter().all(|v| *v == 7), "{values:?}");
    assert_eq!(calls.get(), 1);
}
