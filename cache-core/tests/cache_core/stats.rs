//! Counters per namespace, their renderings and the periodic report.

use std::convert::Infallible;
use std::time::Duration;

use cache_core::{Cache, CacheKey, Counter, ReportError, StatsSnapshot};
use recording::Recorder;

use crate::support::{eventually, stats_of};

/// Collects what the report sink is handed.
mod recording {
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    pub struct Recorder<T>(Arc<Mutex<Vec<T>>>);

    impl<T: Clone> Recorder<T> {
        pub fn push(&self, value: T) {
            if let Ok(mut items) = self.0.lock() {
                items.push(value);
            }
        }

        pub fn items(&self) -> Vec<T> {
            self.0.lock().map(|items| items.clone()).unwrap_or_default()
        }
    }
}

async fn traffic(cache: &Cache<u32>) {
    let user = cache.namespace("Query.user");
    let posts = cache.namespace("Query.posts");
    let key = CacheKey::builder("Query.user").args("u1").finish();
    for _ in 0..3 {
        cache
            .get_or_fetch(key, &user, || async { Ok::<_, Infallible>(1u32) })
            .await
            .expect("value");
    }
    let key = CacheKey::builder("Query.posts").finish();
    let _ = cache
        .get_or_fetch(key, &posts, || async {
            Err::<u32, _>(crate::support::Boom("down"))
        })
        .await;
    let _ = cache
        .bypass(&posts, || async { Ok::<_, Infallible>(2u32) })
        .await;
}

#[tokio::test]
async fn stats_count_per_namespace() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    traffic(&cache).await;
    let snapshot = cache.stats();
    let user = snapshot.namespace("Query.user").expect("user counters");
    assert_eq!((user.hits, user.misses, user.errors), (2, 1, 0));
    let posts = snapshot.namespace("Query.posts").expect("posts counters");
    assert_eq!(
        (posts.hits, posts.misses, posts.errors, posts.skips),
        (0, 1, 1, 1)
    );
    assert_eq!(snapshot.total().misses, 2);
    assert!((user.hit_ratio() - 2.0 / 3.0).abs() < 1e-9);
    // Namespaces come sorted, and handles of one name share counters.
    let names: Vec<&str> = snapshot
        .namespaces
        .iter()
        .map(|n| n.namespace.as_str())
        .collect();
    assert_eq!(names, vec!["Query.posts", "Query.user"]);
    let again = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args("u1").finish();
    cache
        .get_or_fetch(key, &again, || async { Ok::<_, Infallible>(9u32) })
        .await
        .expect("value");
    assert_eq!(stats_of(&cache, "Query.user").hits, 3);
}

#[tokio::test]
async fn stats_render_as_table_and_prometheus_text() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    traffic(&cache).await;
    let snapshot = cache.stats();
    let table = snapshot.table();
    let header = table.lines().next().expect("header");
    for column in [
        "namespace",
        "hits",
        "misses",
        "dedupes",
        "stale",
        "skips",
        "errors",
        "evictions",
        "invalidations",
    ] {
        assert!(header.contains(column), "{column} missing from {header}");
    }
    assert!(table
        .lines()
        .any(|l| l.starts_with("Query.user") && l.contains(" 2 ")));
    assert!(table.lines().any(|l| l.starts_with('*')), "a total row");

    let text = snapshot.to_prometheus("graphql_cache");
    assert!(text.contains("# TYPE graphql_cache_hits_total counter"));
    assert!(text.contains("graphql_cache_hits_total{namespace=\"Query.user\"} 2"));
    assert!(text.contains("graphql_cache_skips_total{namespace=\"Query.posts\"} 1"));
    assert_eq!(
        text.lines().filter(|l| l.starts_with("# TYPE")).count(),
        Counter::ALL.len()
    );
}

#[tokio::test]
async fn stats_delta_between_snapshots() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    traffic(&cache).await;
    let before = cache.stats();
    traffic(&cache).await;
    let delta = cache.stats().since(&before);
    let user = delta.namespace("Query.user").expect("user");
    assert_eq!((user.hits, user.misses), (3, 0), "all hits the second time");
}

#[tokio::test]
async fn stats_periodic_report_hands_each_interval_to_the_sink() {
    let cache: Cache<u32> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let reports: Recorder<StatsSnapshot> = Recorder::default();
    let sink = reports.clone();
    let task = cache
        .report_every(Duration::from_millis(10), move |delta| {
            sink.push(delta.clone())
        })
        .expect("report");
    traffic(&cache).await;
    eventually("a report saw the traffic", || {
        reports
            .items()
            .iter()
            .map(|r| r.namespace("Query.user").map_or(0, |u| u.lookups()))
            .sum::<u64>()
            == 3
    })
    .await;
    task.stop();
    let seen = reports.items().len();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(reports.items().len(), seen, "no report after stop");
}

#[tokio::test]
async fn stats_report_refuses_a_zero_interval() {
    let cache: Cache<u32> = Cache::builder().build();
    assert!(matches!(
        cache.report_every(Duration::ZERO, |_| {}),
        Err(ReportError::ZeroInterval)
    ));
}

#[test]
fn stats_report_needs_a_runtime() {
    let cache: Cache<u32> = Cache::builder().build();
    assert!(matches!(
        cache.log_every(Duration::from_secs(1)),
        Err(ReportError::NoRuntime)
    ));
}
