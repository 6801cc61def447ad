//! The extension point: strategies decide bypass, early refresh, admission
//! and recovery; the cache keeps dedupe, counts every decision, and a hook
//! that panics or blocks cannot wedge a key.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cache_core::strategies::{self, CATALOGUE};
use cache_core::{
    Admission, Cache, CacheDirectives, CacheKey, EarlyRefresh, FetchError, Fetched, Lifetime,
    OriginTtl, Recovery, SecondHitAdmission, StaleIfError, Stored, Strategy, StrategyContext,
};

use crate::support::{eventually, stats_of, Boom, Calls};

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
    let stats = stats_of(&cache, "Query.n");
    assert_eq!(stats.decision("SecondHitAdmission", "refused"), 1);
    assert_eq!(stats.decision("SecondHitAdmission", "admitted"), 1);
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
    assert_eq!(stats.decision("BypassWhen", "bypassed"), 2);
}

struct ShortForSmall;

impl Strategy<u32> for ShortForSmall {
    fn admit(
        &self,
        _: &StrategyContext<'_>,
        fetched: &Fetched<u32>,
        lifetime: &mut Lifetime,
    ) -> Admission {
        if *fetched.value() < 10 {
            lifetime.ttl = Duration::from_millis(20);
            lifetime.stale = Duration::ZERO;
        }
        Admission::Store
    }

    fn recover(
        &self,
        _: &StrategyContext<'_>,
        error: &FetchError,
        _: Option<&Stored<u32>>,
    ) -> Recovery<u32> {
        match error.downcast_ref::<Boom>() {
            // Not small: kept for the policy's minute, so the check that it was stored
            // cannot race a 20 ms ttl.
            Some(b) if b.0 == "missing" => Recovery::Replace(Fetched::new(10)),
            _ => Recovery::Fail,
        }
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
    assert_eq!(recovered, 10);
    let other = cache
        .get_or_fetch(failing, &ns, || async { Err::<u32, _>(Boom("down")) })
        .await;
    assert!(
        other.is_err(),
        "only the errors the strategy knows are recovered"
    );
    assert_eq!(
        cache.peek(missing).await,
        Some(10),
        "a replacement value is stored"
    );
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(
        cache.peek(small).await,
        None,
        "small values got the short ttl"
    );
    assert_eq!(cache.peek(large).await, Some(50));
    let stats = stats_of(&cache, "Query.n");
    assert_eq!(stats.errors, 2, "recovered errors are still counted");
    // 5 was adjusted, 50 and the replacement 10 admitted as they were.
    assert_eq!(stats.decision("ShortForSmall", "adjusted"), 1);
    assert_eq!(stats.decision("ShortForSmall", "admitted"), 2);
    assert_eq!(stats.decision("ShortForSmall", "recovered"), 1);
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

#[tokio::test]
async fn strategy_lists_belong_to_the_namespace_policy() {
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .strategy(SecondHitAdmission::new(100, Duration::from_secs(60)))
        .build();
    // A namespace made from the default policy inherits its strategies; one
    // with its own policy runs exactly the list it was given.
    let inherits = cache.namespace("Query.a");
    let own = cache.namespace_with("Query.b", cache.default_policy().strategies([]));
    let key = CacheKey::builder("Query.x").finish();
    let calls = Calls::default();
    for ns in [&inherits, &own] {
        let calls = calls.clone();
        cache
            .get_or_fetch(key, ns, move || async move {
                Ok::<_, Infallible>(calls.bump() as u32)
            })
            .await
            .unwrap();
    }
    assert_eq!(
        cache.peek(key).await,
        Some(2),
        "Query.b stored its first miss; Query.a refused its own"
    );
}

/// Counts fetches in flight and the most there ever were at once.
#[derive(Clone, Default)]
struct Concurrency {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    total: Arc<AtomicUsize>,
}

impl Concurrency {
    async fn fetch(&self, hold: Duration) -> u32 {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(n, Ordering::SeqCst);
        let total = self.total.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::time::sleep(hold).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        total as u32
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn strategy_early_refresh_never_runs_two_refreshes_of_one_key_at_once() {
    // beta so large that every hit wants a refresh: only the dedupe table
    // stands between 40 readers and 40 concurrent refreshes.
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .strategy(EarlyRefresh::new(1e9))
        .build();
    let ns = cache.namespace("Query.hot");
    let key = CacheKey::builder("Query.hot").finish();
    let fetches = Concurrency::default();
    let readers = (0..40).map(|_| {
        let (cache, ns, fetches) = (cache.clone(), ns.clone(), fetches.clone());
        tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..30 {
                let fetches = fetches.clone();
                let value = cache
                    .get_or_fetch(key, &ns, move || async move {
                        Ok::<_, Infallible>(fetches.fetch(Duration::from_millis(20)).await)
                    })
                    .await
                    .unwrap();
                seen.push(value);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            seen
        })
    });
    let seen: Vec<Vec<u32>> = futures::future::join_all(readers)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        fetches.most.load(Ordering::SeqCst),
        1,
        "never two fetches of the key at once"
    );
    let refreshes = fetches.total.load(Ordering::SeqCst);
    assert!(refreshes > 2, "hits refreshed the key early: {refreshes}");
    // Readers see newer values as refreshes land, never an older one after a
    // newer one.
    for values in &seen {
        assert!(values.windows(2).all(|w| w[0] <= w[1]), "{values:?}");
    }
    let stats = stats_of(&cache, "Query.hot");
    assert_eq!(stats.misses, 1, "only the first call missed");
    assert_eq!(
        stats.decision("EarlyRefresh", "early_refresh") as usize,
        refreshes - 1
    );
    assert!(stats.decision("EarlyRefresh", "early_refresh_in_flight") > 0);
}

#[tokio::test]
async fn strategy_early_refresh_with_beta_zero_never_refreshes() {
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .strategy(EarlyRefresh::new(0.0))
        .build();
    let key = CacheKey::builder("Query.n").finish();
    let calls = Calls::default();
    for _ in 0..50 {
        call(&cache, key, &calls).await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(calls.get(), 1);
}

#[tokio::test]
async fn strategy_stale_if_error_serves_the_expired_entry_marked_and_stores_nothing() {
    let stale_for = Arc::new(Mutex::new(Duration::ZERO));
    let seen = Arc::clone(&stale_for);
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_millis(40))
        // A window far longer than the sleeps before the serves, so that a slow machine
        // cannot push them past it.
        .strategy(StaleIfError::new(Duration::from_secs(1)))
        // A marked value is the old one + 1000.
        .mark_served_stale(move |v, stale| {
            *seen.lock().unwrap() = stale;
            v + 1000
        })
        .build();
    let ns = cache.namespace("Query.n");
    let key = CacheKey::builder("Query.n").finish();
    let ok = |v: u32| move || async move { Ok::<_, Boom>(v) };
    let down = || async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        Err::<u32, _>(Boom("outage"))
    };
    assert_eq!(cache.get_or_fetch(key, &ns, ok(7)).await.unwrap(), 7);
    tokio::time::sleep(Duration::from_millis(80)).await;
    // Expired, the origin is down: every waiter gets the old value, marked.
    let tries = (0..5).map(|_| cache.get_or_fetch(key, &ns, down));
    for answer in futures::future::join_all(tries).await {
        assert_eq!(answer.unwrap(), 1007);
    }
    assert_eq!(cache.peek(key).await, None, "nothing became fresh");
    let stale = *stale_for.lock().unwrap();
    assert!(stale >= Duration::from_millis(30), "stale for {stale:?}");
    // The origin is back: fresh again, unmarked.
    assert_eq!(cache.get_or_fetch(key, &ns, ok(8)).await.unwrap(), 8);
    // Past the window an error is an error: the store kept the entry no longer.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(cache.get_or_fetch(key, &ns, down).await.is_err());
    let stats = stats_of(&cache, "Query.n");
    assert_eq!(
        stats.decision("StaleIfError", "served_stale"),
        1,
        "one leader, four followers"
    );
    assert_eq!(stats.decision("StaleIfError", "recovered"), 1);
    assert_eq!(stats.errors, 2);
    assert_eq!(stats.dedupes, 4);
}

struct Panicky {
    hook: &'static str,
}

impl Strategy<u32> for Panicky {
    fn bypass(&self, _: &StrategyContext<'_>) -> bool {
        assert_ne!(self.hook, "bypass", "a broken bypass hook");
        false
    }

    fn admit(&self, _: &StrategyContext<'_>, _: &Fetched<u32>, _: &mut Lifetime) -> Admission {
        assert_ne!(self.hook, "admit", "a broken admit hook");
        Admission::Store
    }

    fn refresh_early(&self, _: &StrategyContext<'_>, _: &Stored<u32>) -> bool {
        assert_ne!(self.hook, "refresh_early", "a broken refresh hook");
        false
    }

    fn recover(
        &self,
        _: &StrategyContext<'_>,
        _: &FetchError,
        _: Option<&Stored<u32>>,
    ) -> Recovery<u32> {
        assert_ne!(self.hook, "recover", "a broken recover hook");
        Recovery::Fail
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn strategy_a_panicking_hook_cannot_wedge_a_key() {
    for hook in ["bypass", "admit", "refresh_early", "recover"] {
        let cache: Cache<u32> = Cache::builder()
            .ttl(Duration::from_secs(60))
            .strategy(Panicky { hook })
            .build();
        let ns = cache.namespace("Query.n");
        let key = CacheKey::builder("Query.n").finish();
        let fetches = Concurrency::default();
        let fails = hook == "recover";
        let callers = (0..20).map(|_| {
            let (cache, ns, fetches) = (cache.clone(), ns.clone(), fetches.clone());
            tokio::spawn(async move {
                cache
                    .get_or_fetch(key, &ns, move || async move {
                        let n = fetches.fetch(Duration::from_millis(30)).await;
                        if fails {
                            Err(Boom("down"))
                        } else {
                            Ok(n)
                        }
                    })
                    .await
            })
        });
        let answers = futures::future::join_all(callers).await;
        for answer in answers {
            let answer = answer.expect("no caller's task died of the panic");
            if fails {
                assert!(answer.is_err(), "{hook}: the error goes through");
            } else {
                assert_eq!(
                    answer.unwrap(),
                    1,
                    "{hook}: every caller served by one fetch"
                );
            }
        }
        // A hit after that is served too (refresh_early is asked on hits).
        if !fails {
            let again = cache
                .get_or_fetch(key, &ns, || async { Ok::<u32, Infallible>(99) })
                .await;
            assert_eq!(again.unwrap(), 1, "{hook}");
        }
        let stats = stats_of(&cache, "Query.n");
        assert!(
            stats.decision("Panicky", "panicked") >= 1,
            "{hook}: {stats:?}"
        );
    }
}

/// An `admit` that blocks its thread until the test lets it go.
struct Blocking {
    entered: Arc<AtomicBool>,
    release: Arc<Mutex<std::sync::mpsc::Receiver<()>>>,
}

impl Strategy<u32> for Blocking {
    fn admit(&self, _: &StrategyContext<'_>, _: &Fetched<u32>, _: &mut Lifetime) -> Admission {
        self.entered.store(true, Ordering::SeqCst);
        let _ = self.release.lock().unwrap().recv();
        Admission::Store
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn strategy_a_slow_admit_does_not_hold_up_the_followers() {
    let (release, wait) = std::sync::mpsc::channel();
    let entered = Arc::new(AtomicBool::new(false));
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .strategy(Blocking {
            entered: Arc::clone(&entered),
            release: Arc::new(Mutex::new(wait)),
        })
        .build();
    let ns = cache.namespace("Query.n");
    let key = CacheKey::builder("Query.n").finish();
    let fetches = Concurrency::default();
    let callers: Vec<_> = (0..10)
        .map(|_| {
            let (cache, ns, fetches) = (cache.clone(), ns.clone(), fetches.clone());
            tokio::spawn(async move {
                cache
                    .get_or_fetch(key, &ns, move || async move {
                        Ok::<_, Infallible>(fetches.fetch(Duration::from_millis(30)).await)
                    })
                    .await
                    .unwrap()
            })
        })
        .collect();
    // The leader is stuck in admit; its nine followers are all answered.
    eventually("the leader reaches admit", || {
        entered.load(Ordering::SeqCst)
    })
    .await;
    eventually("nine followers are answered", || {
        callers.iter().filter(|c| c.is_finished()).count() == 9
    })
    .await;
    // So are callers that come while it is stuck: they join the answered flight.
    let late = cache
        .get_or_fetch(key, &ns, || async { Ok::<u32, Infallible>(99) })
        .await
        .unwrap();
    assert_eq!(late, 1);
    release.send(()).unwrap();
    for caller in callers {
        assert_eq!(caller.await.unwrap(), 1);
    }
    assert_eq!(fetches.total.load(Ordering::SeqCst), 1);
    assert_eq!(cache.peek(key).await, Some(1), "stored once admit returned");
}

fn with_header(value: u32, header: &str, per_caller: bool) -> Fetched<u32> {
    Fetched::new(value)
        .cache_control(Some(CacheDirectives::parse(header.as_bytes())))
        .keyed_by_caller(per_caller)
}

#[tokio::test]
async fn strategy_origin_ttl_follows_the_origins_cache_control() {
    let cache: Cache<u32> = Cache::builder()
        .ttl(Duration::from_secs(600))
        .strategy(OriginTtl::new(Duration::from_secs(3600)))
        .build();
    let ns = cache.namespace("Query.n");
    let cases: [(&str, bool, Option<u32>, &str); 8] = [
        ("max-age=60", false, Some(1), "max_age"),
        ("max-age=1, s-maxage=60", false, Some(2), "s_maxage"),
        ("no-store, max-age=60", false, None, "no_store"),
        ("no-cache", false, None, "no_cache"),
        ("max-age=60, private", false, None, "private"),
        ("max-age=60, private", true, Some(6), "private_per_caller"),
        ("max-age=0", false, None, "max_age"),
        ("public", false, Some(8), "no_max_age"),
    ];
    for (i, (header, per_caller, kept, decision)) in cases.into_iter().enumerate() {
        let key = CacheKey::builder("Query.n").args(&i).finish();
        let value = i as u32 + 1;
        let fetched = with_header(value, header, per_caller);
        cache
            .get_or_fetch(
                key,
                &ns,
                move || async move { Ok::<_, Infallible>(fetched) },
            )
            .await
            .unwrap();
        assert_eq!(
            cache.peek(key).await,
            kept,
            "{header} (per caller: {per_caller})"
        );
        assert!(
            stats_of(&cache, "Query.n").decision("OriginTtl", decision) >= 1,
            "{header}: {decision}"
        );
    }
    // No header: the policy's ttl.
    let key = CacheKey::builder("Query.n").args(&"none").finish();
    cache
        .get_or_fetch(key, &ns, || async { Ok::<_, Infallible>(9u32) })
        .await
        .unwrap();
    assert_eq!(cache.peek(key).await, Some(9));
    assert_eq!(
        stats_of(&cache, "Query.n").decision("OriginTtl", "no_header"),
        1
    );
    // A short max-age expires on time.
    let key = CacheKey::builder("Query.n").args(&"short").finish();
    let fetched = with_header(10, "max-age=1", false);
    cache
        .get_or_fetch(
            key,
            &ns,
            move || async move { Ok::<_, Infallible>(fetched) },
        )
        .await
        .unwrap();
    assert_eq!(cache.peek(key).await, Some(10));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(cache.peek(key).await, None);
}

#[test]
fn strategy_registry_builds_by_name_and_explains_what_exists() {
    for entry in CATALOGUE {
        let built = strategies::parse_and_build::<u32>(entry.name).expect(entry.name);
        assert_eq!(built.name(), entry.name);
    }
    let tuned = strategies::parse_and_build::<u32>("early-refresh:beta=2.5").unwrap();
    assert_eq!(tuned.name(), "early-refresh");
    strategies::parse_and_build::<u32>("stale-if-error:window=500ms").unwrap();
    strategies::parse_and_build::<u32>("second-hit:capacity=10,window=2m").unwrap();
    for (spec, says) in [
        (
            "early-refrsh",
            "there is no strategy named \"early-refrsh\"",
        ),
        (
            "early-refresh:gamma=1",
            "early-refresh has no parameter \"gamma\"",
        ),
        (
            "early-refresh:beta=fast",
            "beta=\"fast\": expected a non-negative number",
        ),
        ("stale-if-error:window=soon", "expected a duration"),
        ("second-hit:capacity=-1", "expected a non-negative integer"),
        ("early-refresh:beta", "is not PARAM=VALUE"),
        (":beta=1", "expected NAME[:PARAM=VALUE,...]"),
    ] {
        let error = strategies::parse_and_build::<u32>(spec)
            .unwrap_err()
            .to_string();
        assert!(error.contains(says), "{spec}: {error}");
        // Every refusal lists the catalogue with each strategy's parameters.
        for entry in CATALOGUE {
            assert!(error.contains(entry.name), "{spec}: {error}");
            for p in entry.params {
                assert!(
                    error.contains(&format!("{}={}", p.name, p.default)),
                    "{error}"
                );
            }
        }
        assert!(error.contains("--cache-eviction lru|tinylfu"), "{error}");
    }
}
