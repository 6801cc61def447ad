//! Errors are never stored, and every waiter on a failed fetch sees them.

use std::convert::Infallible;
use std::time::Duration;

use cache_core::{Cache, CacheError, CacheKey};

use crate::support::{callers_registered, stats_of, within, Boom, Calls, Valve};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_reaches_every_waiter_and_is_not_stored() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args("u1").finish();
    let calls = Calls::default();
    let valve = Valve::closed();
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let (cache, ns, calls, valve) = (cache.clone(), ns.clone(), calls.clone(), valve.clone());
        tasks.push(tokio::spawn(async move {
            cache
                .get_or_fetch(key, &ns, move || async move {
                    calls.bump();
                    valve.wait().await;
                    Err::<u32, _>(Boom("subgraph down"))
                })
                .await
        }));
    }
    callers_registered(&cache, "Query.user", 10).await;
    valve.open();
    for task in tasks {
        let error = within("the caller", task)
            .await
            .expect("task")
            .expect_err("every waiter sees the error");
        assert!(matches!(error, CacheError::Fetch(_)));
        assert_eq!(error.downcast_ref::<Boom>(), Some(&Boom("subgraph down")));
    }
    assert_eq!(calls.get(), 1, "one fetch for ten callers");
    assert_eq!(cache.peek(key).await, None, "the error stored nothing");

    // The next call fetches again, and can succeed.
    let value = cache
        .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(5u32) })
        .await
        .expect("value after the error");
    assert_eq!(value, 5);
    let stats = stats_of(&cache, "Query.user");
    assert_eq!(stats.errors, 1, "counted once per failed fetch");
    assert_eq!(stats.misses, 2);
}

#[tokio::test]
async fn error_with_ttl_zero_is_not_shared_with_later_calls() {
    let cache: Cache<u32> = Cache::builder().build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").finish();
    let first = cache
        .get_or_fetch(key, &ns, || async { Err::<u32, _>(Boom("once")) })
        .await;
    assert!(first.is_err());
    let second = cache
        .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(1u32) })
        .await;
    assert_eq!(second.expect("value"), 1);
}
