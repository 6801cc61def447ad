//! The extension point: strategies decide bypass, admission and recovery.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cache_core::{
    Admission, Cache, CacheKey, FetchError, Fetched, SecondHitAdmission, Strategy, StrategyContext,
};

use crate::support::{stats_of, Boom, Calls};

async fn call(cache: &Cache<u32>, key: CacheKey, calls: &Calls) -> u32 {
    let ns = cache.namespace("Query.n");
    let calls = calls.clone();
    cache
        .get_or_fetch(key, &ns, move || async move {
            Ok::<_, Infallible>(calls.bump() as u32)
        })
        .await
        .expect("value")
}

#[tokio::test]
async fn strategy_second_hit_admission_stores_on_the_second_miss() {
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .strategy(SecondHitAdmission::new(1_000, Duration::from_secs(60)))
        .build();
    let key = CacheKey::builder("Query.n").finish();
    let calls = Calls::default();
    assert_eq!(
        call(&cache, key, &calls).await,
        1,
        "first miss: fetched, not kept"
    );
    assert_eq!(
        call(&cache, key, &calls).await,
        2,
        "second miss: fetched and kept"
    );
    assert_eq!(call(&cache, key, &calls).await, 2, "then a hit");
    assert_eq!(calls.get(), 2);
}

struct BypassWhen(Arc<AtomicBool>);

impl Strategy<u32> for BypassWhen {
    fn bypass(&self, _: &StrategyContext<'_>) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn strategy_bypass_skips_the_cache_and_counts_a_skip() {
    let on = Arc::new(AtomicBool::new(true));
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .strategy(BypassWhen(Arc::clone(&on)))
        .build();
    let key = CacheKey::builder("Query.n").finish();
    let calls = Calls::default();
    assert_eq!(call(&cache, key, &calls).await, 1);
    assert_eq!(
        call(&cache, key, &calls).await,
        2,
        "bypassed calls neither read nor store"
    );
    on.store(false, Ordering::SeqCst);
    assert_eq!(call(&cache, key, &calls).await, 3);
    assert_eq!(call(&cache, key, &calls).await, 3);
    let stats = stats_of(&cache, "Query.n");
    assert_eq!((stats.skips, stats.misses, stats.hits), (2, 1, 1));
}

struct ShortForSmall;

impl Strategy<u32> for ShortForSmall {
    fn admit(
        &self,
        _: &StrategyContext<'_>,
        fetched: &Fetched<u32>,
        _: Duration,
        _: Duration,
    ) -> Admission {
        if *fetched.value() < 10 {
            Admission::StoreFor {
                ttl: Duration::from_millis(20),
                stale: Duration::ZERO,
            }
        } else {
            Admission::Store
        }
    }

    fn recover(&self, _: &StrategyContext<'_>, error: &FetchError) -> Option<Fetched<u32>> {
        error
            .downcast_ref::<Boom>()
            .filter(|b| b.0 == "missing")
            .map(|_| Fetched::new(0))
    }
}

#[tokio::test]
async fn strategy_admit_sets_durations_and_recover_turns_errors_into_values() {
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .strategy(ShortForSmall)
        .build();
    let ns = cache.namespace("Query.n");
    let small = CacheKey::builder("Query.n").args(&1).finish();
    let large = CacheKey::builder("Query.n").args(&2).finish();
    let missing = CacheKey::builder("Query.n").args(&3).finish();
    let failing = CacheKey::builder("Query.n").args(&4).finish();
    for (key, value) in [(small, 5u32), (large, 50)] {
        cache
            .get_or_fetch(key, &ns, move || async move { Ok::<_, Infallible>(value) })
            .await
            .expect("value");
    }
    let recovered = cache
        .get_or_fetch(missing, &ns, || async { Err::<u32, _>(Boom("missing")) })
        .await
        .expect("recovered");
    assert_eq!(recovered, 0);
    let other = cache
        .get_or_fetch(failing, &ns, || async { Err::<u32, _>(Boom("down")) })
        .await;
    assert!(
        other.is_err(),
        "only the errors the strategy knows are recovered"
    );
    assert_eq!(
        cache.peek(missing).await,
        Some(0),
        "a recovered value is stored"
    );
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(
        cache.peek(small).await,
        None,
        "small values got the short ttl"
    );
    assert_eq!(cache.peek(large).await, Some(50));
    assert_eq!(
        stats_of(&cache, "Query.n").errors,
        2,
        "recovered errors are still counted"
    );
}

#[tokio::test]
async fn strategy_caller_bypass_counts_a_skip() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("Query.me");
    let value = cache
        .bypass(&ns, || async { Ok::<_, Infallible>(4u32) })
        .await
        .expect("value");
    assert_eq!(value, 4);
    assert_eq!(stats_of(&cache, "Query.me").skips, 1);
}
