//! `get_or_fetch_many`: each call cached under its own key, the misses
//! fetched together, deduplicated against other batches and single calls.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cache_core::{BatchCall, Cache, CacheKey, Fetched};

use crate::support::{callers_registered, stats_of, within, Boom, Calls, Valve};

fn key(id: &str) -> CacheKey {
    CacheKey::builder("User.name").parent(id).finish()
}

/// Records the indices each fetch was asked for, and answers `index * 10`.
#[derive(Clone, Default)]
struct Asked(Arc<Mutex<Vec<Vec<usize>>>>);

impl Asked {
    fn fetch(
        &self,
    ) -> impl Fn(Vec<usize>) -> futures::future::Ready<Vec<Result<u32, Boom>>> + Clone {
        let asked = self.clone();
        move |indices: Vec<usize>| {
            asked.0.lock().unwrap().push(indices.clone());
            futures::future::ready(indices.iter().map(|&i| Ok(i as u32 * 10)).collect())
        }
    }

    fn calls(&self) -> Vec<Vec<usize>> {
        self.0.lock().unwrap().clone()
    }
}

#[tokio::test]
async fn misses_are_fetched_together_and_hits_are_not_asked_for() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("User.name");
    // u2 is stored beforehand.
    cache
        .get_or_fetch(key("u2"), &ns, || async { Ok::<_, Boom>(99u32) })
        .await
        .unwrap();
    let asked = Asked::default();
    let calls: Vec<_> = ["u1", "u2", "u3"]
        .iter()
        .map(|id| BatchCall::Cached {
            key: key(id),
            namespace: &ns,
        })
        .collect();
    let results = cache.get_or_fetch_many(&calls, asked.fetch()).await;
    let values: Vec<u32> = results.into_iter().map(Result::unwrap).collect();
    assert_eq!(values, [0, 99, 20]);
    assert_eq!(asked.calls(), [vec![0, 2]], "one fetch, for the two misses");
    // Now all three are stored: nothing is fetched.
    let again = cache.get_or_fetch_many(&calls, asked.fetch()).await;
    assert_eq!(
        again.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        [0, 99, 20]
    );
    assert_eq!(asked.calls().len(), 1);
    let stats = stats_of(&cache, "User.name");
    assert_eq!((stats.hits, stats.misses), (4, 3));
}

/// Found by fuzzing the gateway: two sites of one query asking the same entity
/// (`me { a: topPosts(count: 1) { author { name } } topPosts(count: 2) { author { name } } }`)
/// put one key twice in a batch. The second call followed the flight the first one
/// led, which is settled only once the followers are done: the request hung. Now the
/// key is fetched once and both calls get its answer, with a cache that stores and
/// with one that only deduplicates (TTL 0).
#[tokio::test]
async fn the_same_key_twice_in_one_batch_is_fetched_once_and_answers_both() {
    for ttl in [Duration::from_secs(60), Duration::ZERO] {
        let cache: Cache<u32> = Cache::builder().ttl(ttl).build();
        let ns = cache.namespace("User.name");
        let asked = Asked::default();
        let calls: Vec<_> = ["u1", "u2", "u1", "u1"]
            .iter()
            .map(|id| BatchCall::Cached {
                key: key(id),
                namespace: &ns,
            })
            .collect();
        let results = within(
            "a batch holding one key three times",
            cache.get_or_fetch_many(&calls, asked.fetch()),
        )
        .await;
        let values: Vec<u32> = results.into_iter().map(Result::unwrap).collect();
        assert_eq!(values, [0, 10, 0, 0], "ttl {ttl:?}");
        assert_eq!(asked.calls(), [vec![0, 1]], "ttl {ttl:?}: u1 asked once");
        let stats = stats_of(&cache, "User.name");
        assert_eq!((stats.misses, stats.dedupes), (2, 2), "ttl {ttl:?}");
    }
}

#[tokio::test]
async fn one_call_can_fail_while_the_others_succeed_and_failures_are_not_stored() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("User.name");
    let calls: Vec<_> = ["u1", "u2"]
        .iter()
        .map(|id| BatchCall::Cached {
            key: key(id),
            namespace: &ns,
        })
        .collect();
    let fetches = Calls::default();
    let fetch = {
        let fetches = fetches.clone();
        move |indices: Vec<usize>| {
            let n = fetches.bump();
            futures::future::ready(
                indices
                    .iter()
                    .map(|&i| {
                        if i == 1 && n == 1 {
                            Err(Boom("u2"))
                        } else {
                            Ok(7u32)
                        }
                    })
                    .collect::<Vec<_>>(),
            )
        }
    };
    let first = cache.get_or_fetch_many(&calls, fetch.clone()).await;
    assert_eq!(*first[0].as_ref().unwrap(), 7);
    assert!(first[1]
        .as_ref()
        .unwrap_err()
        .to_string()
        .contains("boom: u2"));
    // u1 was stored, u2 was not: the second batch fetches u2 alone.
    let second = cache.get_or_fetch_many(&calls, fetch).await;
    assert!(second.iter().all(|r| *r.as_ref().unwrap() == 7));
    assert_eq!(fetches.get(), 2);
    assert_eq!(stats_of(&cache, "User.name").errors, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_batches_share_the_fetch_of_their_common_keys() {
    let cache: Cache<u32> = Cache::builder().build(); // ttl 0: dedupe only
    let ns = cache.namespace("User.name");
    let valve = Valve::closed();
    let asked = Asked::default();
    let slow = {
        let (valve, asked) = (valve.clone(), asked.clone());
        move |indices: Vec<usize>| {
            let (valve, asked) = (valve.clone(), asked.clone());
            async move {
                asked.0.lock().unwrap().push(indices.clone());
                valve.wait().await;
                indices
                    .iter()
                    .map(|&i| Ok::<_, Boom>(i as u32))
                    .collect::<Vec<_>>()
            }
        }
    };
    let first = {
        let (cache, ns, slow) = (cache.clone(), ns.clone(), slow.clone());
        tokio::spawn(async move {
            let calls = [
                BatchCall::Cached {
                    key: key("u1"),
                    namespace: &ns,
                },
                BatchCall::Cached {
                    key: key("u2"),
                    namespace: &ns,
                },
            ];
            cache.get_or_fetch_many(&calls, slow).await
        })
    };
    callers_registered(&cache, "User.name", 2).await;
    let second = {
        let (cache, ns, slow) = (cache.clone(), ns.clone(), slow.clone());
        tokio::spawn(async move {
            let calls = [
                BatchCall::Cached {
                    key: key("u2"),
                    namespace: &ns,
                },
                BatchCall::Cached {
                    key: key("u3"),
                    namespace: &ns,
                },
            ];
            cache.get_or_fetch_many(&calls, slow).await
        })
    };
    callers_registered(&cache, "User.name", 4).await;
    valve.open();
    let first: Vec<u32> = within("first", first)
        .await
        .unwrap()
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let second: Vec<u32> = within("second", second)
        .await
        .unwrap()
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(first, [0, 1]);
    // u2 came from the first batch's fetch (its index there was 1); u3 from the second's.
    assert_eq!(second, [1, 1]);
    assert_eq!(asked.calls(), [vec![0, 1], vec![1]]);
    let stats = stats_of(&cache, "User.name");
    assert_eq!((stats.misses, stats.dedupes), (3, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_batch_hands_its_keys_to_the_batches_that_follow_it() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("User.name");
    let leader = {
        let (cache, ns) = (cache.clone(), ns.clone());
        tokio::spawn(async move {
            let calls = [BatchCall::Cached {
                key: key("u1"),
                namespace: &ns,
            }];
            cache
                .get_or_fetch_many(&calls, |_: Vec<usize>| async {
                    std::future::pending::<Vec<Result<u32, Boom>>>().await
                })
                .await
        })
    };
    callers_registered(&cache, "User.name", 1).await;
    let follower = {
        let (cache, ns) = (cache.clone(), ns.clone());
        tokio::spawn(async move {
            let calls = [BatchCall::Cached {
                key: key("u1"),
                namespace: &ns,
            }];
            cache
                .get_or_fetch_many(&calls, |i: Vec<usize>| async move {
                    i.iter().map(|_| Ok::<_, Boom>(5u32)).collect::<Vec<_>>()
                })
                .await
        })
    };
    callers_registered(&cache, "User.name", 2).await;
    leader.abort();
    let got = within("the follower", follower).await.unwrap();
    assert_eq!(*got[0].as_ref().unwrap(), 5);
}

#[tokio::test]
async fn bypassed_calls_are_fetched_with_the_rest_but_never_stored() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("Query.me");
    let asked = Asked::default();
    let calls = [
        BatchCall::Bypass { namespace: &ns },
        BatchCall::Cached {
            key: key("u1"),
            namespace: &ns,
        },
    ];
    let results = cache.get_or_fetch_many(&calls, asked.fetch()).await;
    assert_eq!(
        results.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        [0, 10]
    );
    let again = cache.get_or_fetch_many(&calls, asked.fetch()).await;
    assert_eq!(
        again.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        [0, 10]
    );
    // The bypassed call was fetched both times, the cached one once.
    assert_eq!(asked.calls(), [vec![0, 1], vec![0]]);
    let stats = stats_of(&cache, "Query.me");
    assert_eq!((stats.skips, stats.hits, stats.misses), (2, 1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_value_is_served_while_one_refresh_fetches_that_key_alone() {
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_millis(50))
        .stale(Duration::from_secs(60))
        .build();
    let ns = cache.namespace("User.name");
    let calls = [
        BatchCall::Cached {
            key: key("u1"),
            namespace: &ns,
        },
        BatchCall::Cached {
            key: key("u2"),
            namespace: &ns,
        },
    ];
    let asked = Asked::default();
    cache.get_or_fetch_many(&calls, asked.fetch()).await;
    tokio::time::sleep(Duration::from_millis(80)).await;
    // Both stale: served at once, each refreshed on its own.
    // The refreshes keep their values fresh for long, so the polling below cannot see
    // them go stale again however slow this machine is.
    let stale = cache
        .get_or_fetch_many(&calls, |i: Vec<usize>| async move {
            i.iter()
                .map(|_| Ok::<_, Boom>(Fetched::new(1u32).ttl(Duration::from_secs(60))))
                .collect::<Vec<_>>()
        })
        .await;
    assert_eq!(
        stale.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        [0, 10]
    );
    assert_eq!(stats_of(&cache, "User.name").refreshes, 2);
    let mut values = Vec::new();
    for _ in 0..1000 {
        values = vec![
            cache.peek(key("u1")).await.unwrap_or(0),
            cache.peek(key("u2")).await.unwrap_or(0),
        ];
        if values == [1, 1] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(values, [1, 1], "both refreshes stored their value");
    assert_eq!(stats_of(&cache, "User.name").stale, 2);
}

#[tokio::test]
async fn a_fetch_that_answers_too_few_calls_fails_the_rest_and_stores_nothing_for_them() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("User.name");
    let calls = [
        BatchCall::Cached {
            key: key("u1"),
            namespace: &ns,
        },
        BatchCall::Cached {
            key: key("u2"),
            namespace: &ns,
        },
    ];
    let results = cache
        .get_or_fetch_many(&calls, |_: Vec<usize>| async {
            vec![Ok::<_, Boom>(Fetched::new(3u32))]
        })
        .await;
    assert_eq!(*results[0].as_ref().unwrap(), 3);
    assert!(results[1].is_err());
    assert_eq!(cache.peek(key("u2")).await, None);
}

#[tokio::test]
async fn hit_now_answers_fresh_stored_values_without_a_future_and_counts_only_hits() {
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .stale(Duration::from_secs(60))
        .build();
    let ns = cache.namespace("User.name");
    // Without an early-refresh strategy the refresher is never asked for.
    let refresher = || -> fn() -> std::future::Ready<Result<u32, Boom>> {
        unreachable!("no strategy asks for a refresh")
    };
    assert_eq!(
        cache.hit_now(key("u1"), &ns, refresher),
        None,
        "nothing stored yet"
    );
    cache
        .get_or_fetch(key("u1"), &ns, || async { Ok::<_, Boom>(4u32) })
        .await
        .unwrap();
    assert_eq!(cache.hit_now(key("u1"), &ns, refresher), Some(4));
    let stats = stats_of(&cache, "User.name");
    assert_eq!((stats.hits, stats.misses), (1, 1));
    // Stale (a fetch that kept it fresh for no time, in its stale window at once):
    // left to the full call, which serves it and refreshes. No sleep: a short ttl
    // would make the hit above depend on how fast this machine is.
    cache
        .get_or_fetch(key("u2"), &ns, || async {
            Ok::<_, Boom>(Fetched::new(5u32).ttl(Duration::ZERO))
        })
        .await
        .unwrap();
    assert_eq!(cache.hit_now(key("u2"), &ns, refresher), None);
    assert_eq!(stats_of(&cache, "User.name").hits, 1);
    // A namespace that stores nothing never hits.
    let dedupe_only = cache.namespace_with("Query.me", cache_core::Policy::new());
    assert_eq!(cache.hit_now(key("u1"), &dedupe_only, refresher), None);
}

#[tokio::test]
async fn hit_at_judges_freshness_at_the_moment_it_is_given() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("User.name");
    let refresher = || -> fn() -> std::future::Ready<Result<u32, Boom>> {
        unreachable!("no strategy asks for a refresh")
    };
    let before = std::time::Instant::now();
    cache
        .get_or_fetch(key("u1"), &ns, || async { Ok::<_, Boom>(4u32) })
        .await
        .unwrap();
    // One reading serves many look-ups: fresh as of a moment inside the TTL...
    assert_eq!(cache.hit_at(key("u1"), &ns, before, refresher), Some(4));
    assert_eq!(
        cache.hit_at(key("u1"), &ns, before + Duration::from_secs(59), refresher),
        Some(4)
    );
    // ...and not as of a moment past it, however recently the entry was stored.
    assert_eq!(
        cache.hit_at(key("u1"), &ns, before + Duration::from_secs(120), refresher),
        None
    );
    let stats = stats_of(&cache, "User.name");
    assert_eq!(
        (stats.hits, stats.misses),
        (2, 1),
        "a look-up past freshness counts nothing"
    );
}

/// Found by loading the gateway's deep query at TTL 0 on two worker threads: two
/// batches that claimed the same keys in an interleaved order each led a key the other
/// followed. A batch handed its leaders' answers to their followers only once its own
/// waits were done, so each waited on the other and both hung until their requests
/// were cancelled. Here, deterministically: a batch leads `u1` and follows `u2`, whose
/// single leader cannot finish before `u1`'s follower has its answer.
#[tokio::test]
async fn a_batch_hands_its_leaders_answers_over_before_its_own_waits_end() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::ZERO).build();
    let ns = cache.namespace("User.name");
    // The single leader of u2, held until u1's follower got its answer.
    let u1_answered = Valve::closed();
    let u2_leader = {
        let (cache, ns, valve) = (cache.clone(), ns.clone(), u1_answered.clone());
        tokio::spawn(async move {
            cache
                .get_or_fetch(key("u2"), &ns, move || async move {
                    valve.wait().await;
                    Ok::<_, Boom>(20u32)
                })
                .await
        })
    };
    callers_registered(&cache, "User.name", 1).await;
    // The batch: leads u1 (its fetch answers once `batch_go` opens), follows u2.
    let batch_go = Valve::closed();
    let batch = {
        let (cache, ns, go) = (cache.clone(), ns.clone(), batch_go.clone());
        tokio::spawn(async move {
            let calls: Vec<_> = ["u1", "u2"]
                .iter()
                .map(|id| BatchCall::Cached {
                    key: key(id),
                    namespace: &ns,
                })
                .collect();
            let fetch = move |indices: Vec<usize>| {
                let go = go.clone();
                async move {
                    go.wait().await;
                    indices
                        .iter()
                        .map(|_| Ok::<_, Boom>(10u32))
                        .collect::<Vec<_>>()
                }
            };
            cache
                .get_or_fetch_many(&calls, fetch)
                .await
                .into_iter()
                .map(Result::unwrap)
                .collect::<Vec<u32>>()
        })
    };
    callers_registered(&cache, "User.name", 3).await;
    // A follower of u1, which must get the batch's answer while the batch still waits
    // on u2.
    let follower = {
        let (cache, ns) = (cache.clone(), ns.clone());
        tokio::spawn(async move {
            cache
                .get_or_fetch(key("u1"), &ns, || async { Ok::<_, Boom>(99u32) })
                .await
        })
    };
    callers_registered(&cache, "User.name", 4).await;
    batch_go.open();
    let u1 = within(
        "u1's follower, while its leader's batch waits on u2",
        follower,
    )
    .await
    .expect("the follower's task");
    assert_eq!(u1.unwrap(), 10);
    u1_answered.open();
    let values = within("the batch", batch).await.expect("the batch's task");
    assert_eq!(values, [10, 20]);
    assert_eq!(
        within("u2's leader", u2_leader)
            .await
            .expect("task")
            .unwrap(),
        20
    );
}
