//! `RedisStorage` and `LayeredStorage` on a real three-master Redis Cluster (started by
//! each test on free ports, see `local-redis-cluster`): reads and writes across slots,
//! invalidation where an entry and its reference set sit on different masters, GC,
//! and the layered tier's pub/sub, also after the subscribed node went away.

use std::convert::Infallible;
use std::time::Duration;

use cache_core::storage::{GcMode, GcReport, JsonCodec, LayeredStorage, RedisStorage, Storage};
use cache_core::{Cache, CacheKey, Fetched, ReferencePattern};
use local_redis_cluster::resp::Reply;
use local_redis_cluster::{LocalCluster, NODES};
use serde_json::{json, Value};

use crate::server::within;
use crate::store::{entry, key};

const LONG: Duration = Duration::from_secs(60);

fn store(cluster: &LocalCluster) -> RedisStorage {
    RedisStorage::cluster_builder(cluster.urls())
        .build()
        .unwrap()
}

/// Stores `value` under `key(n)` for a minute, with `references`.
async fn put(store: &RedisStorage, n: u32, value: &str, references: &[&str]) {
    let e = entry(value, LONG, Duration::ZERO, references);
    store.set(key(n), e, LONG).await.unwrap();
}

fn entry_key(key: CacheKey) -> String {
    format!("gcl:e:{key}")
}

/// A reference named `<kind>:<n>` whose set sits on another master than `entry`'s.
fn reference_elsewhere(cluster: &LocalCluster, entry: CacheKey, kind: &str) -> String {
    let home = cluster.master_of(&entry_key(entry));
    (0..1000)
        .map(|n| format!("{kind}:{n}"))
        .find(|r| cluster.master_of(&format!("gcl:r:{r}")) != home)
        .expect("a reference on another master")
}

#[tokio::test]
async fn gets_sets_and_misses_across_slots_and_masters() {
    let cluster = LocalCluster::start();
    let store = store(&cluster);
    assert!(store.is_cluster());
    const N: u32 = 60;
    for n in 0..N {
        put(&store, n, &n.to_string(), &[]).await;
    }
    let sizes = cluster.dbsizes();
    assert_eq!(sizes.iter().sum::<u64>(), N as u64, "{sizes:?}");
    assert!(
        sizes.iter().all(|&n| n > 0),
        "keys on every master: {sizes:?}"
    );

    // Concurrent gets: auto-pipelined MGETs, which the cluster client splits per slot.
    let found = futures::future::join_all((0..N).map(|n| store.get(key(n)))).await;
    for (n, slot) in found.into_iter().enumerate() {
        assert_eq!(slot.unwrap().unwrap().value, n.to_string().as_bytes());
    }
    assert!(store.get(key(N + 1)).await.unwrap().is_none(), "a miss");

    // get_many across slots: answers in the keys' order, misses included.
    let keys: Vec<CacheKey> = (0..N + 5).rev().map(key).collect();
    let before = store.stats();
    let many = store.get_many(&keys).await.unwrap();
    let after = store.stats();
    for (k, slot) in (0..N + 5).rev().zip(many) {
        match slot {
            Some(stored) => assert_eq!(stored.value, k.to_string().as_bytes()),
            None => assert!(k >= N, "key {k} missing"),
        }
    }
    // One command per slot touched (each key is its own slot here).
    assert_eq!(after.commands - before.commands, (N + 5) as u64);
    assert_eq!(after.errors, 0);

    // Without auto-pipelining: one GET per key, routed by slot.
    let plain = RedisStorage::cluster_builder(cluster.urls())
        .auto_pipeline(false)
        .build()
        .unwrap();
    assert_eq!(
        plain.get(key(7)).await.unwrap().unwrap().value,
        "7".as_bytes()
    );
    assert!(plain.get(key(N + 2)).await.unwrap().is_none());
}

#[tokio::test]
async fn invalidation_reaches_entries_on_other_masters_than_their_sets() {
    let cluster = LocalCluster::start();
    let store = store(&cluster);
    let reference = reference_elsewhere(&cluster, key(1), "User");
    let (entry_at, set_at) = (
        cluster.master_of(&entry_key(key(1))),
        cluster.master_of(&format!("gcl:r:{reference}")),
    );
    assert_ne!(entry_at, set_at);
    put(&store, 1, "one", &[&reference]).await;
    put(&store, 2, "two", &[&reference, "Post:9"]).await;
    put(&store, 3, "three", &["Post:9"]).await;
    assert!(
        cluster.holds(entry_at, &entry_key(key(1))),
        "the entry on its master"
    );
    assert!(
        cluster.holds(set_at, &format!("gcl:r:{reference}")),
        "the set on its"
    );

    let removed = store
        .invalidate(&[ReferencePattern::parse(&reference)])
        .await
        .unwrap();
    assert_eq!(removed.total(), 2);
    assert!(store.get(key(1)).await.unwrap().is_none());
    assert!(store.get(key(2)).await.unwrap().is_none());
    assert!(store.get(key(3)).await.unwrap().is_some());
    assert!(
        !cluster.holds(set_at, &format!("gcl:r:{reference}")),
        "the set emptied"
    );

    // A prefix finds its sets on every master (SCAN, master by master).
    let mut homes = [false; NODES];
    for n in 0..30u32 {
        let r = format!("Tag:{n}");
        homes[cluster.master_of(&format!("gcl:r:{r}"))] = true;
        put(&store, 100 + n, "t", &[&r]).await;
    }
    assert_eq!(homes, [true; NODES], "Tag sets on every master");
    let removed = store
        .invalidate(&[ReferencePattern::parse("Tag:*")])
        .await
        .unwrap();
    assert_eq!(removed.total(), 30);
    assert!(store.get(key(3)).await.unwrap().is_some(), "Post:9 kept");

    // clear: every master, this prefix only.
    let other = cluster.master_of("other:x");
    cluster.ask(other, &["SET", "other:x", "1"]).unwrap();
    assert_eq!(store.clear().await.unwrap().total(), 1, "key 3 was left");
    assert!(cluster.holds(other, "other:x"));
    assert_eq!(cluster.dbsizes().iter().sum::<u64>(), 1);
}

#[tokio::test]
async fn gc_on_a_cluster_removes_dead_members_across_masters() {
    let cluster = LocalCluster::start();
    let store = store(&cluster);
    let short = Duration::from_millis(100);
    let reference = reference_elsewhere(&cluster, key(100), "User");
    for n in 0..10 {
        store
            .set(
                key(n),
                entry("v", short, Duration::ZERO, &[&reference]),
                short,
            )
            .await
            .unwrap();
    }
    put(&store, 100, "v", &[&reference]).await;
    for n in 200..230 {
        let r = format!("Post:{n}");
        put(&store, n, "v", &[&r]).await;
        store.delete(key(n)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Lazy steps walk every master, then end the pass (bounded).
    let mut total = GcReport::default();
    let mut steps = 0;
    for step in 0.. {
        assert!(step < 1000, "the lazy pass ends");
        let report = store.gc(GcMode::Lazy { chunk: 4 }).await.unwrap();
        total.scanned_sets += report.scanned_sets;
        total.scanned_members += report.scanned_members;
        total.removed_members += report.removed_members;
        total.removed_sets += report.removed_sets;
        steps += 1;
        if report.cursor == 0 {
            break;
        }
    }
    assert!(steps >= NODES, "one master at least per step: {steps}");
    assert_eq!(total.scanned_sets, 31);
    assert_eq!(total.scanned_members, 41);
    assert_eq!(total.removed_members, 40);
    assert_eq!(total.removed_sets, 30);

    let strict = store.gc(GcMode::Strict).await.unwrap();
    assert_eq!((strict.scanned_sets, strict.removed_members), (1, 0));
    assert_eq!(
        store
            .invalidate(&[ReferencePattern::parse(&reference)])
            .await
            .unwrap()
            .total(),
        1,
        "the live entry kept its membership"
    );
}

fn layered(cluster: &LocalCluster) -> LayeredStorage<Value> {
    LayeredStorage::builder()
        .l1_ttl(LONG)
        .build_redis(store(cluster), JsonCodec)
}

fn cache_over(store: &LayeredStorage<Value>) -> Cache<Value> {
    Cache::builder().ttl(LONG).storage(store.clone()).build()
}

/// Each node's count of subscribers to `channel` (classic subscriptions are local to
/// the node they were made on); 0 for a node that does not answer.
fn subscribers(cluster: &LocalCluster, channel: &str) -> Vec<i64> {
    (0..NODES)
        .map(|i| match cluster.ask(i, &["PUBSUB", "NUMSUB", channel]) {
            Ok(Reply::Array(Some(items))) => items.get(1).and_then(Reply::int).unwrap_or(0),
            _ => 0,
        })
        .collect()
}

#[tokio::test]
async fn layered_invalidations_cross_processes_over_cluster_pubsub() {
    let mut cluster = LocalCluster::start();
    let (a, b) = (layered(&cluster), layered(&cluster));
    assert!(a.wait_subscribed(Duration::from_secs(5)).await);
    assert!(b.wait_subscribed(Duration::from_secs(5)).await);
    let (cache_a, cache_b) = (cache_over(&a), cache_over(&b));
    let (ns_a, ns_b) = (
        cache_a.namespace("Query.user"),
        cache_b.namespace("Query.user"),
    );
    let mut keys = Vec::new();
    for n in 0..6u32 {
        let k = CacheKey::builder("Query.user").args(&n).finish();
        let id = format!("User:u{n}");
        cache_a
            .get_or_fetch(k, &ns_a, move || async move {
                Ok::<_, Infallible>(Fetched::new(json!(id.clone())).references([id]))
            })
            .await
            .unwrap();
        let read = cache_b
            .get_or_fetch(k, &ns_b, || async { Ok::<_, Infallible>(json!("never")) })
            .await
            .unwrap();
        assert_eq!(read, json!(format!("User:u{n}")));
        keys.push(k);
    }
    let homes: Vec<usize> = keys
        .iter()
        .map(|k| cluster.master_of(&entry_key(*k)))
        .collect();
    assert!(
        homes.iter().any(|&h| h != homes[0]),
        "entries on several masters: {homes:?}"
    );

    assert_eq!(cache_a.invalidate("User:u0").await.unwrap(), 1);
    let gone = within(Duration::from_secs(3), async || {
        b.l1().get(keys[0]).await.unwrap().is_none()
    })
    .await;
    assert!(gone, "B heard A's invalidation through the cluster");
    assert!(b.l1().get(keys[1]).await.unwrap().is_some());
    assert!(b.stats().received >= 1);

    // The node B listens on goes away: B subscribes on another, and hears a message
    // published on a third (classic PUBLISH is broadcast over the cluster bus).
    let channel = "gcl:invalidate";
    drop(cache_a);
    drop(a);
    let mut counts = Vec::new();
    let alone = within(Duration::from_secs(5), async || {
        counts = subscribers(&cluster, channel);
        counts.iter().sum::<i64>() == 1
    })
    .await;
    assert!(alone, "only B is subscribed once A is dropped: {counts:?}");
    let b_node = counts.iter().position(|&n| n == 1).unwrap();
    cluster.kill(b_node);
    let moved = within(Duration::from_secs(10), async || {
        counts = subscribers(&cluster, channel);
        counts.iter().sum::<i64>() == 1 && b.stats().subscribed
    })
    .await;
    assert!(
        moved,
        "B subscribed on another node after its node died: {counts:?}"
    );
    let received = b.stats().received;
    let b_now = counts.iter().position(|&n| n == 1).unwrap();
    let publisher = (0..NODES).find(|&i| i != b_node && i != b_now).unwrap();
    let message = format!("{:016x}\nkeys\n{}", 0x5eedu64, keys[1]);
    let heard = within(Duration::from_secs(5), async || {
        cluster.ask(publisher, &["PUBLISH", channel, &message]).ok();
        b.stats().received > received
    })
    .await;
    assert!(heard, "B hears a publish made on another node than its own");
    assert!(
        b.l1().get(keys[1]).await.unwrap().is_none(),
        "and applies it"
    );
}
