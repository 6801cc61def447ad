//! Strategies at `ttl = 0`: the ones that can act there run (origin-ttl keeps
//! what the origin allows, stale-if-error keeps the last good value for a
//! failed fetch), concurrent callers still share one fetch, and
//! `check_lifetimes` refuses the lists that would do nothing.

use std::convert::Infallible;
use std::time::Duration;

use cache_core::strategies::{self, check_lifetimes, LifetimeConflict, LifetimeUse, CATALOGUE};
use cache_core::{Cache, CacheDirectives, CacheKey, Fetched, OriginTtl, StaleIfError};

use crate::support::{callers_registered, gated_caller, stats_of, within, Boom, Calls, Valve};

fn with_header(value: u32, header: &str) -> Fetched<u32> {
    Fetched::new(value).cache_control(Some(CacheDirectives::parse(header.as_bytes())))
}

#[tokio::test]
async fn zero_ttl_origin_ttl_keeps_only_what_the_origin_allows() {
    let cache: Cache<u32> = Cache::builder()
        .strategy(OriginTtl::new(Duration::from_secs(3600)))
        .build();
    let ns = cache.namespace("Query.n");
    let calls = Calls::default();
    for (arg, header, kept) in [
        ("max-age", Some("max-age=60"), true),
        ("no-store", Some("no-store"), false),
        ("public", Some("public"), false),
        ("none", None, false),
    ] {
        let key = CacheKey::builder("Query.n").args(&arg).finish();
        for _ in 0..2 {
            let calls = calls.clone();
            cache
                .get_or_fetch(key, &ns, move || async move {
                    let value = calls.bump() as u32;
                    Ok::<_, Infallible>(match header {
                        Some(h) => with_header(value, h),
                        None => Fetched::new(value),
                    })
                })
                .await
                .unwrap();
        }
        assert_eq!(cache.peek(key).await.is_some(), kept, "{arg}");
    }
    // max-age: one fetch then a hit; the three others fetched twice.
    assert_eq!(calls.get(), 1 + 2 * 3);
    let stats = stats_of(&cache, "Query.n");
    assert_eq!(stats.hits, 1);
    assert_eq!(stats.decision("OriginTtl", "max_age"), 1);
    assert_eq!(stats.decision("OriginTtl", "adjusted"), 1);
    assert_eq!(stats.decision("OriginTtl", "no_store"), 2);
    assert_eq!(stats.decision("OriginTtl", "no_max_age"), 2);
    assert_eq!(stats.decision("OriginTtl", "no_header"), 2);
}

#[tokio::test]
async fn zero_ttl_stale_if_error_fetches_every_time_and_keeps_the_last_good_value() {
    let cache: Cache<u32> = Cache::builder()
        .strategy(StaleIfError::new(Duration::from_secs(60)))
        .mark_served_stale(|v, _| v + 1000)
        .build();
    let ns = cache.namespace("Query.n");
    let key = CacheKey::builder("Query.n").finish();
    let calls = Calls::default();
    for expected in [1, 2] {
        let calls = calls.clone();
        let value = cache
            .get_or_fetch(key, &ns, move || async move {
                Ok::<_, Infallible>(calls.bump() as u32)
            })
            .await
            .unwrap();
        assert_eq!(value, expected, "every call fetches");
        assert_eq!(cache.peek(key).await, None, "nothing is kept fresh");
    }
    let answer = cache
        .get_or_fetch(key, &ns, || async { Err::<u32, _>(Boom("outage")) })
        .await;
    assert_eq!(answer.unwrap(), 1002, "the last good value, marked");
    let stats = stats_of(&cache, "Query.n");
    assert_eq!((stats.hits, stats.misses, stats.errors), (0, 3, 1));
    assert_eq!(stats.decision("StaleIfError", "served_stale"), 1);
    // A key never fetched has nothing to fall back on.
    let other = CacheKey::builder("Query.n").args(&"other").finish();
    let failed = cache
        .get_or_fetch(other, &ns, || async { Err::<u32, _>(Boom("outage")) })
        .await;
    assert!(failed.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_ttl_with_strategies_still_shares_one_fetch_between_concurrent_callers() {
    for strategy in ["origin-ttl", "stale-if-error"] {
        let cache: Cache<u32> = Cache::builder()
            .named_strategy(strategies::parse_and_build(strategy).unwrap())
            .build();
        let ns = cache.namespace("Query.n");
        let key = CacheKey::builder("Query.n").finish();
        let (calls, valve) = (Calls::default(), Valve::closed());
        let callers: Vec<_> = (0..50)
            .map(|_| gated_caller(&cache, &ns, key, &valve, &calls))
            .collect();
        callers_registered(&cache, "Query.n", 50).await;
        valve.open();
        for caller in callers {
            assert_eq!(within("a caller", caller).await.unwrap().unwrap(), 7);
        }
        assert_eq!(calls.get(), 1, "{strategy}");
        let stats = stats_of(&cache, "Query.n");
        assert_eq!((stats.misses, stats.dedupes), (1, 49), "{strategy}");
    }
}

#[test]
fn zero_ttl_check_lifetimes_refuses_strategies_with_nothing_to_act_on() {
    let zero = Duration::ZERO;
    let ten = Duration::from_secs(10);
    let nothing =
        |strategy, uses| Err::<(), _>(LifetimeConflict::NothingToActOn { strategy, uses });
    for (names, ttl, stale, expected) in [
        // Those that act at ttl 0 on their own.
        (&["origin-ttl"][..], zero, zero, Ok(())),
        (&["stale-if-error"][..], zero, zero, Ok(())),
        // Those that need a lifetime to act on.
        (
            &["second-hit"][..],
            zero,
            zero,
            nothing("second-hit", LifetimeUse::Admits),
        ),
        (
            &["early-refresh"][..],
            zero,
            zero,
            nothing("early-refresh", LifetimeUse::OnFreshHits),
        ),
        (
            &["ttl-jitter"][..],
            zero,
            zero,
            nothing("ttl-jitter", LifetimeUse::Adjusts),
        ),
        // A stale window gives second-hit something to keep, not the others a ttl.
        (&["second-hit"][..], zero, ten, Ok(())),
        (
            &["early-refresh"][..],
            zero,
            ten,
            nothing("early-refresh", LifetimeUse::OnFreshHits),
        ),
        (
            &["ttl-jitter"][..],
            zero,
            ten,
            nothing("ttl-jitter", LifetimeUse::Adjusts),
        ),
        // origin-ttl gives them one: anywhere for the first two, before ttl-jitter.
        (&["second-hit", "origin-ttl"][..], zero, zero, Ok(())),
        (&["origin-ttl", "early-refresh"][..], zero, zero, Ok(())),
        (&["early-refresh", "origin-ttl"][..], zero, zero, Ok(())),
        (&["origin-ttl", "ttl-jitter"][..], zero, zero, Ok(())),
        (&["stale-if-error", "second-hit"][..], zero, zero, Ok(())),
        // origin-ttl after ttl-jitter overwrites its spread, at any ttl.
        (
            &["ttl-jitter", "origin-ttl"][..],
            ten,
            zero,
            Err(LifetimeConflict::Undone {
                strategy: "ttl-jitter",
                by: "origin-ttl",
            }),
        ),
        // With a ttl, everything has something to act on.
        (
            &[
                "second-hit",
                "early-refresh",
                "ttl-jitter",
                "stale-if-error",
            ][..],
            ten,
            zero,
            Ok(()),
        ),
        // Names outside the catalogue are taken on trust.
        (&["my-own"][..], zero, zero, Ok(())),
    ] {
        assert_eq!(
            check_lifetimes(names, ttl, stale),
            expected,
            "{names:?} at ttl {ttl:?}, stale {stale:?}"
        );
    }
    let says = check_lifetimes(&["ttl-jitter"], zero, zero)
        .unwrap_err()
        .to_string();
    assert!(says.contains("list origin-ttl before it"), "{says}");
    // The catalogue says what each strategy does at ttl 0.
    let text = strategies::catalogue();
    for entry in CATALOGUE {
        assert!(text.contains(entry.lifetime.at_zero_ttl()), "{text}");
    }
}
