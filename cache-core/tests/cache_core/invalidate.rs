//! References, wildcard invalidation, clear, delete, and the race between an
//! invalidation and a fetch that started before it.

use std::convert::Infallible;
use std::time::Duration;

use cache_core::storage::{MemoryStorage, Storage};
use cache_core::{Cache, CacheKey, Fetched, Namespace};
use tokio::task::JoinHandle;

use crate::support::{eventually, stats_of, within, Calls, Valve};

fn cache() -> Cache<&'static str> {
    Cache::builder().ttl(Duration::from_secs(60)).build()
}

async fn store(
    cache: &Cache<&'static str>,
    ns: &Namespace<&'static str>,
    key: CacheKey,
    value: &'static str,
    references: &'static [&'static str],
) {
    cache
        .get_or_fetch(key, ns, move || async move {
            Ok::<_, Infallible>(Fetched::new(value).references(references.iter().copied()))
        })
        .await
        .expect("stored");
}

/// Starts a fetch held by `valve` that returns `value` with `references`.
fn held_fetch(
    cache: &Cache<&'static str>,
    ns: &Namespace<&'static str>,
    key: CacheKey,
    value: &'static str,
    references: &'static [&'static str],
    valve: &Valve,
    calls: &Calls,
) -> JoinHandle<&'static str> {
    let (cache, ns, valve, calls) = (cache.clone(), ns.clone(), valve.clone(), calls.clone());
    tokio::spawn(async move {
        cache
            .get_or_fetch(key, &ns, move || async move {
                calls.bump();
                valve.wait().await;
                Ok::<_, Infallible>(Fetched::new(value).references(references.iter().copied()))
            })
            .await
            .expect("value")
    })
}

async fn race(pattern: &'static str, references: &'static [&'static str]) -> Option<&'static str> {
    let cache = cache();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args("u1").finish();
    let (valve, calls) = (Valve::closed(), Calls::default());
    let fetch = held_fetch(&cache, &ns, key, "old", references, &valve, &calls);
    eventually("the fetch started", || calls.get() == 1).await;
    // The mutation lands and is invalidated while the fetch is in flight.
    cache.invalidate(pattern).await.expect("invalidate");
    valve.open();
    assert_eq!(
        within("the caller", fetch).await.expect("task"),
        "old",
        "the racing caller still gets its value"
    );
    cache.peek(key).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalidate_race_fetch_started_before_does_not_store() {
    assert_eq!(race("User:u1", &["User:u1"]).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalidate_race_wildcard_blocks_the_store_too() {
    assert_eq!(race("User:*", &["Org:o1", "User:u1"]).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalidate_race_unrelated_reference_still_stores() {
    assert_eq!(race("User:u2", &["User:u1"]).await, Some("old"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalidate_race_later_callers_do_not_join_the_older_fetch() {
    let cache = cache();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args("u1").finish();
    let (old_valve, calls) = (Valve::closed(), Calls::default());
    let old = held_fetch(&cache, &ns, key, "old", &["User:u1"], &old_valve, &calls);
    eventually("the old fetch started", || calls.get() == 1).await;
    cache.invalidate(["User:u1"]).await.expect("invalidate");

    // A caller after the invalidation starts its own fetch.
    let new_valve = Valve::closed();
    let new = held_fetch(&cache, &ns, key, "new", &["User:u1"], &new_valve, &calls);
    eventually("the new fetch started", || calls.get() == 2).await;
    new_valve.open();
    assert_eq!(within("the caller", new).await.expect("task"), "new");
    old_valve.open();
    assert_eq!(within("the caller", old).await.expect("task"), "old");
    assert_eq!(
        cache.peek(key).await,
        Some("new"),
        "the older fetch did not overwrite"
    );
}

#[tokio::test]
async fn invalidate_exact_reference_drops_every_entry_that_carries_it() {
    let cache = cache();
    let ns = cache.namespace("Query.user");
    let posts = cache.namespace("Query.posts");
    let user = CacheKey::builder("Query.user").args("u1").finish();
    let other = CacheKey::builder("Query.user").args("u2").finish();
    let feed = CacheKey::builder("Query.posts").finish();
    store(&cache, &ns, user, "Ada", &["User:u1"]).await;
    store(&cache, &ns, other, "Bob", &["User:u2"]).await;
    store(&cache, &posts, feed, "feed", &["Post:p1", "User:u1"]).await;

    assert_eq!(cache.invalidate(&["User:u1"]).await.expect("invalidate"), 2);
    assert_eq!(cache.peek(user).await, None);
    assert_eq!(cache.peek(feed).await, None);
    assert_eq!(cache.peek(other).await, Some("Bob"));
    assert_eq!(stats_of(&cache, "Query.user").invalidations, 1);
    assert_eq!(stats_of(&cache, "Query.posts").invalidations, 1);
}

#[tokio::test]
async fn invalidate_wildcard_drops_by_prefix() {
    let cache = cache();
    let ns = cache.namespace("Query.thing");
    let keys: Vec<CacheKey> = (0..4)
        .map(|i| CacheKey::builder("Query.thing").args(&i).finish())
        .collect();
    store(&cache, &ns, keys[0], "u1", &["User:u1"]).await;
    store(&cache, &ns, keys[1], "u2", &["User:u2"]).await;
    store(&cache, &ns, keys[2], "p1", &["Post:p1"]).await;
    store(&cache, &ns, keys[3], "users", &["Users:all"]).await;

    assert_eq!(cache.invalidate("User:*").await.expect("invalidate"), 2);
    assert_eq!(cache.peek(keys[0]).await, None);
    assert_eq!(cache.peek(keys[1]).await, None);
    assert_eq!(cache.peek(keys[2]).await, Some("p1"));
    assert_eq!(
        cache.peek(keys[3]).await,
        Some("users"),
        "`User:*` does not match `Users:`"
    );

    // The next call fetches again.
    let calls = Calls::default();
    let counted = calls.clone();
    cache
        .get_or_fetch(keys[0], &ns, move || async move {
            counted.bump();
            Ok::<_, Infallible>("u1 again")
        })
        .await
        .expect("value");
    assert_eq!(calls.get(), 1);
}

#[tokio::test]
async fn invalidate_replaced_entry_stays_indexed() {
    // A refresh replaces an entry under the same key with the same
    // reference. Dropping the old entry must not unindex the new one, or a
    // later invalidation would miss it.
    let storage = MemoryStorage::<&'static str>::new();
    let cache: Cache<&'static str> = Cache::builder()
        .ttl(Duration::from_millis(10))
        .stale(Duration::from_secs(60))
        .storage(storage.clone())
        .build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user").args("u1").finish();
    store(&cache, &ns, key, "v1", &["User:u1"]).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    // Served stale; the refresh stores v2 over v1.
    store(&cache, &ns, key, "v2", &["User:u1"]).await;
    for _ in 0..10_000 {
        if storage_value(&storage, key).await == Some("v2") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(storage_value(&storage, key).await, Some("v2"));
    storage.run_pending_tasks();
    assert_eq!(storage.indexed_references(), 1);
    assert_eq!(cache.invalidate("User:u1").await.expect("invalidate"), 1);
    assert_eq!(storage_value(&storage, key).await, None);
}

async fn storage_value(
    storage: &MemoryStorage<&'static str>,
    key: CacheKey,
) -> Option<&'static str> {
    storage
        .get(key)
        .await
        .expect("memory reads never fail")
        .map(|stored| stored.value)
}

#[tokio::test]
async fn invalidate_clear_drops_everything() {
    let cache = cache();
    let ns = cache.namespace("Query.thing");
    let a = CacheKey::builder("Query.thing").args("a").finish();
    let b = CacheKey::builder("Query.thing").args("b").finish();
    store(&cache, &ns, a, "a", &["A:1"]).await;
    store(&cache, &ns, b, "b", &[]).await;
    assert_eq!(cache.clear().await.expect("clear"), 2);
    assert_eq!(cache.peek(a).await, None);
    assert_eq!(cache.peek(b).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalidate_race_clear_blocks_a_fetch_in_flight() {
    let cache = cache();
    let ns = cache.namespace("Query.thing");
    let key = CacheKey::builder("Query.thing").finish();
    let (valve, calls) = (Valve::closed(), Calls::default());
    let fetch = held_fetch(&cache, &ns, key, "old", &[], &valve, &calls);
    eventually("the fetch started", || calls.get() == 1).await;
    cache.clear().await.expect("clear");
    valve.open();
    assert_eq!(within("the caller", fetch).await.expect("task"), "old");
    assert_eq!(cache.peek(key).await, None);
}

#[tokio::test]
async fn invalidate_delete_drops_one_key() {
    let cache = cache();
    let ns = cache.namespace("Query.thing");
    let a = CacheKey::builder("Query.thing").args("a").finish();
    let b = CacheKey::builder("Query.thing").args("b").finish();
    store(&cache, &ns, a, "a", &[]).await;
    store(&cache, &ns, b, "b", &[]).await;
    assert_eq!(cache.delete(a).await.expect("delete"), 1);
    assert_eq!(cache.peek(a).await, None);
    assert_eq!(cache.peek(b).await, Some("b"));
}

/// A fetch whose flight another caller replaced in the dedupe table (after an
/// unrelated invalidation started a new epoch) must still hear of later
/// invalidations: its value was read before them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_superseded_fetch_may_not_store_what_a_later_invalidation_dropped() {
    use crate::support::callers_registered;
    let cache: Cache<&'static str> = Cache::builder().ttl(Duration::from_secs(60)).build();
    let ns = cache.namespace("Query.getPost");
    let key = CacheKey::builder("Query.getPost").args("p1").finish();
    let (old, new) = (Valve::closed(), Valve::closed());
    let first = {
        let (cache, ns, old) = (cache.clone(), ns.clone(), old.clone());
        tokio::spawn(async move {
            cache
                .get_or_fetch(key, &ns, move || async move {
                    old.wait().await; // read before the write to p1
                    Ok::<_, std::convert::Infallible>(Fetched::new("old").references(["Post:p1"]))
                })
                .await
        })
    };
    callers_registered(&cache, "Query.getPost", 1).await;
    // A write to another post: a new epoch, so the next caller does not join `first`.
    cache.invalidate(["Post:p2"]).await.unwrap();
    let second = {
        let (cache, ns, new) = (cache.clone(), ns.clone(), new.clone());
        tokio::spawn(async move {
            cache
                .get_or_fetch(key, &ns, move || async move {
                    new.wait().await;
                    Ok::<_, std::convert::Infallible>(Fetched::new("new").references(["Post:p1"]))
                })
                .await
        })
    };
    callers_registered(&cache, "Query.getPost", 2).await;
    // The write to p1, acknowledged: nothing fetched before it may be kept.
    cache.invalidate(["Post:p1"]).await.unwrap();
    new.open();
    within("second", second).await.unwrap().unwrap();
    old.open();
    within("first", first).await.unwrap().unwrap();
    assert_eq!(
        cache.peek(key).await,
        None,
        "a value read before the write was kept"
    );
}

/// Concurrent stores of one key must leave the entry that stays findable by its
/// references, whichever store lands last.
#[test]
fn racing_stores_of_one_key_keep_the_entry_indexed() {
    use cache_core::storage::Entry;
    use std::sync::{Arc, Barrier};
    use std::time::Instant;
    let storage: MemoryStorage<u32> = MemoryStorage::new();
    let key = CacheKey::builder("Query.getPost").args("p1").finish();
    let entry = |value: u32| Entry {
        value,
        fresh_until: Instant::now() + Duration::from_secs(60),
        stale_until: Instant::now() + Duration::from_secs(60),
        fetched_in: Duration::ZERO,
        references: Arc::from(vec![cache_core::Reference::from("Post:p1")]),
        namespace: Arc::from("Query.getPost"),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for round in 0..2000 {
        let barrier = Arc::new(Barrier::new(2));
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let (storage, barrier, entry) = (storage.clone(), barrier.clone(), entry(w));
                std::thread::spawn(move || {
                    barrier.wait();
                    let tokio = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    tokio
                        .block_on(storage.set(key, entry, Duration::from_secs(60)))
                        .unwrap();
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        storage.run_pending_tasks();
        rt.block_on(storage.invalidate(&[cache_core::ReferencePattern::parse("Post:p1")]))
            .unwrap();
        assert!(
            rt.block_on(storage.get(key)).unwrap().is_none(),
            "round {round}: an entry survived the invalidation of its reference"
        );
    }
}
