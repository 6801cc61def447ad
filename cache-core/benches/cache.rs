//! Criterion benches of the hot paths: a hit, a `ttl = 0` call with no
//! concurrency, one fetch shared by 100 waiters, key derivation for a
//! realistic resolver call (plus the raw 128-bit hashes the key could use), and
//! the hits of one deep answer: 690 stored keys read at once with one clock
//! reading (`hit_at`, as the gateway reads every entity of a fetch step), the
//! floor `scripts/deep-ceilings.sh` puts under per-entity caching.
//!
//! Run: `cargo bench -p cache-core -- --warm-up-time 1 --measurement-time 3`

use std::convert::Infallible;
use std::hash::Hasher as _;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cache_core::{Cache, CacheKey, KeyParts};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::{json, Value};
use siphasher::sip128::{Hasher128 as _, SipHasher13};
use tokio::runtime::Runtime;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn bench_hit(c: &mut Criterion) {
    let rt = runtime();
    let cache: Cache<Arc<Value>> = Cache::builder().ttl(Duration::from_secs(3600)).build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user")
        .args(&json!({"id": "u1"}))
        .finish();
    let user = Arc::new(json!({"id": "u1", "name": "Ada", "email": "ada@example.com"}));
    rt.block_on(async {
        let user = Arc::clone(&user);
        cache
            .get_or_fetch(key, &ns, move || async move { Ok::<_, Infallible>(user) })
            .await
            .expect("prefill");
    });
    c.bench_function("hit", |b| {
        b.to_async(&rt).iter(|| {
            cache.get_or_fetch(key, &ns, || async {
                Ok::<_, Infallible>(Arc::new(Value::Null))
            })
        })
    });
}

/// The look-ups of one fully cached deep answer (about 690 entities per answer on the
/// commerce graph's DeepWishlistChain): every key stored, each read once per
/// iteration, judged against one clock reading, as the gateway reads them. The keys
/// are built beforehand, so this is the store's read alone.
fn bench_hits_of_one_deep_answer(c: &mut Criterion) {
    const KEYS: u64 = 690;
    let rt = runtime();
    let cache: Cache<Arc<Value>> = Cache::builder().ttl(Duration::from_secs(3600)).build();
    let ns = cache.namespace("Product.price+weight");
    let keys: Vec<CacheKey> = (0..KEYS)
        .map(|i| {
            CacheKey::builder("Product.price+weight")
                .args(&json!({"__typename": "Product", "upc": format!("p{i}")}))
                .finish()
        })
        .collect();
    let value = Arc::new(json!({"price": 1999, "weight": 350}));
    rt.block_on(async {
        for key in &keys {
            let value = Arc::clone(&value);
            cache
                .get_or_fetch(*key, &ns, move || async move { Ok::<_, Infallible>(value) })
                .await
                .expect("prefill");
        }
    });
    let refresher = || || async { Ok::<_, Infallible>(Arc::new(Value::Null)) };
    let mut group = c.benchmark_group("hits_of_one_deep_answer");
    group.throughput(Throughput::Elements(KEYS));
    group.bench_function("hit_at_690_keys", |b| {
        b.iter(|| {
            let now = Instant::now();
            let mut found = 0;
            for key in &keys {
                found += cache.hit_at(*key, &ns, now, refresher).is_some() as u64;
            }
            // Not a timing claim: checks that every read was a hit.
            assert_eq!(found, KEYS, "every key is stored");
        })
    });
    group.finish();
}

fn bench_ttl_zero(c: &mut Criterion) {
    let rt = runtime();
    let cache: Cache<Arc<Value>> = Cache::builder().build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user")
        .args(&json!({"id": "u1"}))
        .finish();
    let user = Arc::new(json!({"id": "u1"}));
    c.bench_function("ttl0_uncontended", |b| {
        b.to_async(&rt).iter(|| {
            let user = Arc::clone(&user);
            cache.get_or_fetch(key, &ns, move || async move { Ok::<_, Infallible>(user) })
        })
    });
}

fn bench_dedupe(c: &mut Criterion) {
    const WAITERS: u64 = 100;
    let rt = runtime();
    let cache: Cache<Arc<Value>> = Cache::builder().build();
    let ns = cache.namespace("Query.user");
    let key = CacheKey::builder("Query.user")
        .args(&json!({"id": "u1"}))
        .finish();
    let user = Arc::new(json!({"id": "u1"}));
    let fetches = Arc::new(AtomicU64::new(0));
    let mut group = c.benchmark_group("dedupe");
    group.throughput(Throughput::Elements(WAITERS));
    group.bench_function("100_waiters_one_fetch", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let (cache, ns, user, fetches) = (
                cache.clone(),
                ns.clone(),
                Arc::clone(&user),
                Arc::clone(&fetches),
            );
            async move {
                let before = fetches.load(Ordering::Relaxed);
                let start = Instant::now();
                for _ in 0..iters {
                    let callers = (0..WAITERS).map(|_| {
                        let (user, fetches) = (Arc::clone(&user), Arc::clone(&fetches));
                        cache.get_or_fetch(key, &ns, move || async move {
                            fetches.fetch_add(1, Ordering::Relaxed);
                            // Let the other 99 callers arrive and join.
                            tokio::task::yield_now().await;
                            Ok::<_, Infallible>(user)
                        })
                    });
                    black_box(futures::future::join_all(callers).await);
                }
                let elapsed = start.elapsed();
                // Not a timing claim: checks that the bench measured what it says.
                assert_eq!(
                    fetches.load(Ordering::Relaxed) - before,
                    iters,
                    "one fetch per 100 callers"
                );
                elapsed
            }
        })
    });
    group.finish();
}

fn bench_keys(c: &mut Criterion) {
    // A resolver call: a parent with 3 fields, 2 arguments, a 5-field selection.
    let parent = json!({"__typename": "User", "id": "u1", "name": "Ada Lovelace"});
    let args = json!({"first": 10, "after": "cursor:42"});
    let selection = ["id", "title", "body", "createdAt", "author"];
    let cache: Cache<u32> = Cache::builder().build();
    let ns = cache.namespace("User.posts");

    let mut group = c.benchmark_group("key");
    group.bench_function("resolver_call", |b| {
        b.iter(|| {
            CacheKey::builder(black_box("User.posts"))
                .parent(black_box(&parent))
                .args(black_box(&args))
                .selection(black_box(&selection))
                .finish()
        })
    });
    group.bench_function("resolver_call_via_namespace", |b| {
        b.iter(|| {
            ns.key(
                &KeyParts::new()
                    .parent(black_box(&parent))
                    .args(black_box(&args))
                    .selection(black_box(&selection)),
            )
        })
    });

    // The raw hashes over 128 bytes, about the size of that call's encoding.
    let bytes: Vec<u8> = (0..128u8).collect();
    group.bench_function("xxh3_128_128_bytes", |b| {
        b.iter(|| CacheKey::from_bytes(black_box(&bytes)))
    });
    group.bench_function("siphash13_128_128_bytes", |b| {
        b.iter(|| {
            let mut hasher = SipHasher13::new();
            hasher.write(black_box(&bytes));
            hasher.finish128().as_u128()
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_hit,
    bench_hits_of_one_deep_answer,
    bench_ttl_zero,
    bench_dedupe,
    bench_keys
);
criterion_main!(benches);
