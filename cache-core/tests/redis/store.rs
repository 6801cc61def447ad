//! `RedisStorage` as a `Storage<Bytes>`: ttl, envelope deadlines,
//! invalidation, clear, GC and auto-pipelining.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cache_core::storage::{Entry, GcMode, RedisStorage, Storage};
use cache_core::{CacheKey, Reference, ReferencePattern};

use crate::server::RedisServer;

pub fn key(n: u32) -> CacheKey {
    CacheKey::builder("Query.user").args(&n).finish()
}

pub fn entry(value: &str, fresh: Duration, stale: Duration, refs: &[&str]) -> Entry<Bytes> {
    let now = Instant::now();
    Entry {
        value: Bytes::copy_from_slice(value.as_bytes()),
        fresh_until: now + fresh,
        stale_until: now + fresh + stale,
        fetched_in: Duration::from_millis(3),
        references: refs
            .iter()
            .map(|r| Reference::from(*r))
            .collect::<Vec<_>>()
            .into(),
        namespace: Arc::from("Query.user"),
    }
}

fn patterns(texts: &[&str]) -> Vec<ReferencePattern> {
    texts.iter().map(|t| ReferencePattern::parse(t)).collect()
}

/// Deadlines cross Redis as wall-clock times: they come back off by the time between
/// the paired clock readings (a preempted thread stretches it), never by more than a
/// second unless the conversion is wrong.
fn close(a: Instant, b: Instant) -> bool {
    let gap = if a > b { a - b } else { b - a };
    gap < Duration::from_secs(1)
}

#[tokio::test]
async fn set_get_and_px_expiry() {
    let server = RedisServer::start();
    let store = RedisStorage::new(server.url()).unwrap();
    let long = entry("kept", Duration::from_secs(60), Duration::ZERO, &[]);
    store
        .set(key(1), long, Duration::from_secs(60))
        .await
        .unwrap();
    let short = entry("gone", Duration::from_millis(100), Duration::ZERO, &[]);
    store
        .set(key(2), short, Duration::from_millis(100))
        .await
        .unwrap();

    let found = store.get(key(1)).await.unwrap().expect("stored");
    assert_eq!(&found.value[..], b"kept");
    assert!(store.get(key(3)).await.unwrap().is_none());

    tokio::time::sleep(Duration::from_millis(300)).await;
    // `get` returns entries past their deadlines too, so only Redis's PX
    // expiry explains this miss.
    assert!(store.get(key(2)).await.unwrap().is_none(), "PX expired it");
    assert!(store.get(key(1)).await.unwrap().is_some());
}

#[tokio::test]
async fn envelope_deadlines_survive_the_round_trip() {
    let server = RedisServer::start();
    let store = RedisStorage::new(server.url()).unwrap();
    let e = entry("v", Duration::from_secs(60), Duration::from_secs(5), &[]);
    let (fresh_until, stale_until) = (e.fresh_until, e.stale_until);
    store.set(key(1), e, Duration::from_secs(65)).await.unwrap();

    let found = store.get(key(1)).await.unwrap().expect("stored");
    assert!(close(found.fresh_until, fresh_until), "fresh deadline kept");
    assert!(close(found.stale_until, stale_until), "stale deadline kept");
    assert!(Instant::now() < found.fresh_until, "fresh now");

    // Past its freshness from the start (no sleep to wait that out: a second past, more
    // than any rounding of the conversion), within its stale window for a minute.
    let mut e = entry("v", Duration::ZERO, Duration::from_secs(60), &[]);
    e.fresh_until -= Duration::from_secs(1);
    store.set(key(2), e, Duration::from_secs(60)).await.unwrap();
    let found = store.get(key(2)).await.unwrap().expect("stored");
    let now = Instant::now();
    assert!(
        now >= found.fresh_until && now < found.stale_until,
        "stale now"
    );
}

#[tokio::test]
async fn invalidate_by_reference_and_prefix() {
    let server = RedisServer::start();
    let store = RedisStorage::new(server.url()).unwrap();
    let ttl = Duration::from_secs(60);
    let put = |n: u32, refs: &'static [&'static str]| {
        let store = store.clone();
        async move {
            store
                .set(key(n), entry("v", ttl, Duration::ZERO, refs), ttl)
                .await
                .unwrap();
        }
    };
    put(1, &["User:u1", "Post:p1"]).await;
    put(2, &["User:u2"]).await;
    put(3, &["Users:all"]).await;
    put(4, &["Post:p1"]).await;
    put(5, &[]).await;

    let removed = store.invalidate(&patterns(&["User:u1"])).await.unwrap();
    assert_eq!(removed.total(), 1);
    assert_eq!(removed.per_namespace(), &[(Arc::from("Query.user"), 1)]);
    assert!(store.get(key(1)).await.unwrap().is_none());

    let removed = store.invalidate(&patterns(&["User:*"])).await.unwrap();
    assert_eq!(removed.total(), 1, "only User:u2 is left under User:*");
    assert!(store.get(key(2)).await.unwrap().is_none());
    assert!(
        store.get(key(3)).await.unwrap().is_some(),
        "Users:all is not User:*"
    );

    // Post:p1 still names key 1 (already gone) and key 4.
    let removed = store
        .invalidate(&patterns(&["Post:p1", "Nothing:*"]))
        .await
        .unwrap();
    assert_eq!(removed.total(), 1);
    assert!(store.get(key(4)).await.unwrap().is_none());
    assert!(store.get(key(5)).await.unwrap().is_some());

    let removed = store.delete(key(5)).await.unwrap();
    assert_eq!(removed.total(), 1);
    assert_eq!(store.delete(key(5)).await.unwrap().total(), 0);
}

#[tokio::test]
async fn clear_drops_only_its_own_prefix() {
    let server = RedisServer::start();
    let ours = RedisStorage::new(server.url()).unwrap();
    let theirs = RedisStorage::builder(server.url())
        .prefix("other:")
        .build()
        .unwrap();
    let ttl = Duration::from_secs(60);
    for n in 0..30 {
        ours.set(key(n), entry("v", ttl, Duration::ZERO, &["User:u1"]), ttl)
            .await
            .unwrap();
    }
    theirs
        .set(key(0), entry("v", ttl, Duration::ZERO, &["User:u1"]), ttl)
        .await
        .unwrap();

    let removed = ours.clear().await.unwrap();
    assert_eq!(removed.total(), 30);
    assert!(ours.get(key(0)).await.unwrap().is_none());
    assert!(
        ours.invalidate(&patterns(&["User:*"]))
            .await
            .unwrap()
            .total()
            == 0
    );
    assert!(
        theirs.get(key(0)).await.unwrap().is_some(),
        "another prefix is kept"
    );
}

#[tokio::test]
async fn gc_removes_members_of_expired_entries() {
    let server = RedisServer::start();
    let store = RedisStorage::new(server.url()).unwrap();
    let short = Duration::from_millis(100);
    let long = Duration::from_secs(60);
    // 10 short-lived entries in User:gc, kept alive by one long-lived one,
    // and 10 sets whose only entry was deleted.
    for n in 0..10 {
        store
            .set(
                key(n),
                entry("v", short, Duration::ZERO, &["User:gc"]),
                short,
            )
            .await
            .unwrap();
    }
    store
        .set(
            key(100),
            entry("v", long, Duration::ZERO, &["User:gc"]),
            long,
        )
        .await
        .unwrap();
    for n in 200..210 {
        let reference = format!("Post:{n}");
        let refs = [reference.as_str()];
        store
            .set(key(n), entry("v", long, Duration::ZERO, &refs), long)
            .await
            .unwrap();
        store.delete(key(n)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Lazy: small steps until the pass ends (bounded).
    let mut total = cache_core::storage::GcReport::default();
    for step in 0.. {
        assert!(step < 1000, "the lazy pass ends");
        let report = store.gc(GcMode::Lazy { chunk: 3 }).await.unwrap();
        total.scanned_sets += report.scanned_sets;
        total.scanned_members += report.scanned_members;
        total.removed_members += report.removed_members;
        total.removed_sets += report.removed_sets;
        if report.cursor == 0 {
            break;
        }
    }
    assert_eq!(total.scanned_sets, 11);
    assert_eq!(total.scanned_members, 21);
    assert_eq!(total.removed_members, 20);
    assert_eq!(total.removed_sets, 10);

    // A strict pass: 5 dead members in a set kept alive by its ttl.
    for n in 300..305 {
        store
            .set(key(n), entry("v", long, Duration::ZERO, &["Tag:t"]), long)
            .await
            .unwrap();
        store.delete(key(n)).await.unwrap();
    }
    let strict = store.gc(GcMode::Strict).await.unwrap();
    assert_eq!(strict.scanned_sets, 2, "User:gc and Tag:t");
    assert_eq!(strict.scanned_members, 6);
    assert_eq!(strict.removed_members, 5);
    assert_eq!(strict.removed_sets, 1);
    assert_eq!(strict.cursor, 0);

    // The live entry is still invalidatable by its reference.
    assert_eq!(
        store
            .invalidate(&patterns(&["User:gc"]))
            .await
            .unwrap()
            .total(),
        1
    );
}

#[tokio::test]
async fn concurrent_gets_share_one_mget() {
    const N: u32 = 50;
    let server = RedisServer::start();
    let store = RedisStorage::new(server.url()).unwrap();
    let ttl = Duration::from_secs(60);
    for n in 0..N {
        store
            .set(key(n), entry(&n.to_string(), ttl, Duration::ZERO, &[]), ttl)
            .await
            .unwrap();
    }
    let before = store.stats();
    let found = futures::future::join_all((0..N).map(|n| store.get(key(n)))).await;
    let after = store.stats();
    for (n, slot) in found.into_iter().enumerate() {
        assert_eq!(slot.unwrap().unwrap().value, n.to_string().as_bytes());
    }
    let trips = after.round_trips - before.round_trips;
    assert!(
        trips <= 2 && trips < N as u64,
        "{trips} round trips for {N} gets"
    );
    assert_eq!(after.keys_read - before.keys_read, N as u64);

    let plain = RedisStorage::builder(server.url())
        .auto_pipeline(false)
        .build()
        .unwrap();
    let before = plain.stats();
    let found = futures::future::join_all((0..N).map(|n| plain.get(key(n)))).await;
    let after = plain.stats();
    assert!(found.iter().all(|slot| matches!(slot, Ok(Some(_)))));
    assert_eq!(after.round_trips - before.round_trips, N as u64);
    assert_eq!(after.commands - before.commands, N as u64);

    // get_many is one MGET, and a set with two references one pipeline of
    // 1 + 2 * 3 commands.
    let keys: Vec<CacheKey> = (0..N).map(key).collect();
    let before = plain.stats();
    assert_eq!(plain.get_many(&keys).await.unwrap().len(), N as usize);
    plain
        .set(
            key(999),
            entry("v", ttl, Duration::ZERO, &["A:1", "B:2"]),
            ttl,
        )
        .await
        .unwrap();
    let after = plain.stats();
    assert_eq!(after.round_trips - before.round_trips, 2);
    assert_eq!(after.commands - before.commands, 1 + 7);
}
