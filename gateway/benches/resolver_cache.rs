//! The cache wrapper's overhead at resolver level: what a root-field call costs when
//! its entry is stored (a hit: key derivation from the call's arguments and selection,
//! the policy lookup, the storage read), next to the same call with no cache layer
//! (the upstream fetch replaced by a ready value, so only the wrapper is measured).
//!
//! Run: `cargo bench -p gateway --bench resolver_cache -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use gateway::caching::{CacheSettings, CallKey, ResolverCache};
use gateway::upstream::{FetchError, UpstreamResponse};
use reqwest::header::HeaderMap;

fn response() -> Arc<UpstreamResponse> {
    let data = serde_json::json!({ "me": { "id": "u1", "name": "John", "__typename": "User", "_gw_k_id": "u1" } });
    Arc::new(UpstreamResponse {
        data: Some(async_graphql_value::ConstValue::from_json(data).unwrap()),
        errors: vec![],
    })
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cache = ResolverCache::new(CacheSettings {
        storage: gateway::caching::StorageKind::Memory,
        redis: None,
        ttl: Duration::from_secs(3600),
        stale: Duration::ZERO,
        max_entries: 10_000,
        report_interval: None,
        policies: Default::default(),
        invalidation: true,
    })
    .unwrap();
    let headers = HeaderMap::new();
    let args: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(r#"{"count": 2, "after": "p0"}"#).unwrap();
    let selection =
        "{id name nickname:name topPosts(count:2){pid author{id}} __typename _gw_k_id:id}";
    let value = response();
    let call = || CallKey {
        parent: None,
        args: Some(&args),
        selection,
        headers: &headers,
    };
    rt.block_on(async {
        let v = value.clone();
        cache
            .get_or_fetch(
                "Query.me",
                call(),
                move || async move { Ok::<_, FetchError>(v) },
            )
            .await
            .unwrap();
    });
    c.bench_function("resolver_hit", |b| {
        b.to_async(&rt).iter(|| {
            let v = value.clone();
            let cache = &cache;
            let call = call();
            async move {
                black_box(
                    cache
                        .get_or_fetch(
                            "Query.me",
                            call,
                            move || async move { Ok::<_, FetchError>(v) },
                        )
                        .await,
                )
            }
        })
    });
    c.bench_function("no_cache_layer", |b| {
        b.to_async(&rt).iter(|| {
            let v = value.clone();
            async move { black_box(async move { Ok::<_, FetchError>(v) }.await) }
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
