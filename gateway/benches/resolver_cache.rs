//! The cache seam's cost on a hit, at resolver level: what one cached call costs when
//! its entry is stored (the key, the policy lookup, the storage read), next to the
//! same call with no cache layer (the fetch replaced by a ready value, so only the
//! seam is measured). Three calls of the seed schema:
//!
//! - `root_constant`: `topPosts(count: 2) { … }`, a root field without variables: its
//!   key depends on nothing of the request, so it is derived once per plan and kept;
//! - `root_variables`: `topPosts(count: $n) { … }`: arguments and selection are hashed
//!   on every call;
//! - `entity`: `User.topPosts` for one parent: representation and selection are hashed
//!   on every call.
//!
//! Run: `cargo bench -p gateway --bench resolver_cache -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use gateway::answer::piece::Piece;
use gateway::caching::{CacheSettings, ResolverCache, StorageKind};
use gateway::plan::{Fetch, FetchKind, Plan, Planner};
use gateway::server::request::RequestInput;
use gateway::supergraph::Subgraph;
use gateway::upstream::FetchError;

fn planner() -> Planner {
    let options = async_graphql::SDLExportOptions::new().federation();
    let sdls = [
        user_service::schema().sdl_with_options(options),
        post_service::schema().sdl_with_options(options),
    ];
    let subgraphs = ["user", "post"]
        .map(|name| Subgraph {
            name: name.into(),
            url: format!("http://{name}/graphql"),
        })
        .to_vec();
    Planner::compose(&subgraphs, &sdls, true).expect("the seed schema composes")
}

fn plan(planner: &Planner, text: &str, variables: &async_graphql::Variables) -> Arc<Plan> {
    Arc::new(planner.compile_text(text, variables).unwrap())
}

/// The plan's first fetch of the kind `root` asks for.
fn first(plan: &Plan, root: bool) -> &Fetch {
    plan.fetches
        .iter()
        .find(|f| matches!(f.kind, FetchKind::Root(_)) == root)
        .expect("a fetch of that kind")
}

fn input(variables: serde_json::Value) -> Arc<RequestInput> {
    let map = match variables {
        serde_json::Value::Object(map) => map,
        _ => Default::default(),
    };
    Arc::new(RequestInput {
        authorization: None,
        headers: Default::default(),
        graphql_variables: async_graphql::Variables::from_json(serde_json::Value::Object(
            map.clone(),
        )),
        variables: map,
    })
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cache = ResolverCache::new(CacheSettings {
        storage: StorageKind::Memory,
        redis: None,
        ttl: Duration::from_secs(3600),
        stale: Duration::ZERO,
        max_entries: 10_000,
        report_interval: None,
        policies: Default::default(),
        invalidation: true,
        strategies: Vec::new(),
        eviction: Default::default(),
        namespace_references: false,
    })
    .unwrap();
    let sg = planner();
    let selection = "{ pid title content author { id name } }";
    let constant = plan(
        &sg,
        &format!("{{ topPosts(count: 2) {selection} }}"),
        &Default::default(),
    );
    let with_variables = plan(
        &sg,
        &format!("query($n: Int!) {{ topPosts(count: $n) {selection} }}"),
        &Default::default(),
    );
    let entity = plan(
        &sg,
        "{ me { topPosts(count: 2) { pid title } } }",
        &Default::default(),
    );
    let no_variables = input(serde_json::Value::Null);
    let n_is_2 = input(serde_json::json!({ "n": 2 }));
    let piece = Piece::from_json(bytes::Bytes::from_static(
        br#"[{"pid":"p1","title":"Post 1","content":"Content 1","author":{"id":"u1","name":"John","__typename":"User","_gw_k_id":"u1"},"__typename":"Post","_gw_k_pid":"p1"}]"#,
    ))
    .unwrap();
    let fetch = move |asked: Vec<usize>| {
        let answers: Vec<Result<Piece, FetchError>> =
            asked.iter().map(|_| Ok(piece.clone())).collect();
        futures::future::ready(answers)
    };
    let representation = r#"{"__typename":"User","id":"u1"}"#;
    let root_call = |plan: &Plan, input: &RequestInput| {
        let fetch = first(plan, true);
        let FetchKind::Root(root) = &fetch.kind else {
            unreachable!("a root fetch")
        };
        cache.root_call(plan, fetch, root, input)
    };
    let entity_fetch = first(&entity, false);
    let FetchKind::Entities(groups) = &entity_fetch.kind else {
        unreachable!("an entity fetch")
    };
    let calls = |which: &str| match which {
        "root_constant" => root_call(&constant, &no_variables),
        "root_variables" => root_call(&with_variables, &n_is_2),
        _ => cache.entity_call(
            entity_fetch,
            &groups[0],
            groups[0].namespace("User"),
            representation,
            &no_variables,
        ),
    };
    for which in ["root_constant", "root_variables", "entity"] {
        // Store the entry, then measure hits.
        rt.block_on(cache.fetch(&[calls(which)], 1, fetch.clone()));
        c.bench_function(&format!("hit_{which}"), |b| {
            b.to_async(&rt).iter(|| {
                let fetch = fetch.clone();
                let call = [calls(which)];
                let cache = &cache;
                async move { black_box(cache.fetch(&call, 1, fetch).await) }
            })
        });
    }
    c.bench_function("no_cache_layer", |b| {
        b.to_async(&rt).iter(|| {
            let fetch = fetch.clone();
            async move { black_box(fetch(vec![0]).await) }
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
