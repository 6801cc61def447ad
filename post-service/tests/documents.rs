//! The subgraphs' parsed-document cache through real HTTP: the same answers, byte for
//! byte, with the cache on and off (errors, `@skip` by variable, operation names,
//! mutations included), hits counted on `/metrics`, and the byte bound held against a
//! flood of distinct texts.

mod common;

use common::{metric, post, Service};
use serde_json::{json, Value};
use subgraph_host::Options;

fn posts_with_cache(bytes: u64) -> axum::Router {
    subgraph_host::router_with(
        "post",
        post_service::schema(),
        Options {
            document_cache_bytes: bytes,
            ..Options::default()
        },
    )
}

#[tokio::test]
async fn answers_are_the_same_with_and_without_the_cache() {
    let cached = Service::start(posts_with_cache(1 << 20)).await;
    let uncached = Service::start(posts_with_cache(0)).await;
    let http = common::client();
    let entities = "query($r0:[_Any!]!){e0:_entities(representations:$r0){...on User{topPosts(count:2){pid author{id __typename _gw_k_id:id} __typename _gw_k_pid:pid} __typename _gw_k_id:id}}}";
    let skip = "query($s: Boolean!) { topPosts(count: 3) { pid title @skip(if: $s) } }";
    let two = "query A { topPosts(count: 1) { pid } } query B { getPost(pid: \"p2\") { title } }";
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        (
            "{topPosts(count:2){pid __typename _gw_k_pid:pid}}",
            Value::Null,
            None,
        ),
        (
            entities,
            json!({ "r0": [{ "__typename": "User", "id": "u1" }] }),
            None,
        ),
        (
            entities,
            json!({ "r0": [{ "__typename": "User", "id": "u2" }, { "__typename": "User", "id": "u9" }] }),
            None,
        ),
        (entities, json!({ "r0": null }), None),
        (entities, json!({ "r0": [null] }), None),
        (entities, Value::Null, None),
        // The executor removes skipped fields from its copy: the cached document must
        // not keep what one request's variables removed.
        (skip, json!({ "s": true }), None),
        (skip, json!({ "s": false }), None),
        (skip, json!({ "s": "yes" }), None),
        (two, Value::Null, Some("B")),
        (two, Value::Null, Some("A")),
        (two, Value::Null, None),
        ("{ topPosts(count: 2) { nope } }", Value::Null, None),
        ("{ topPosts(count: 2) { pid ", Value::Null, None),
        (
            "mutation { updatePostTitle(pid: \"p3\", title: \"v1\") { pid title } }",
            Value::Null,
            None,
        ),
        ("{ getPost(pid: \"p3\") { title } }", Value::Null, None),
    ];
    for round in 0..2 {
        for (query, variables, operation) in &cases {
            let mut answers = Vec::new();
            for service in [&cached, &uncached] {
                let r = http
                    .post(service.url())
                    .json(&json!({ "query": query, "variables": variables, "operationName": operation }))
                    .send()
                    .await
                    .unwrap();
                let status = r.status().as_u16();
                let content_type = r.headers()["content-type"].clone();
                answers.push((status, content_type, r.text().await.unwrap()));
            }
            assert_eq!(answers[0], answers[1], "round {round}: {query} {variables}");
        }
    }
    let hits = metric(&http, cached.addr, "subgraph_document_cache_hits_total").await;
    let misses = metric(&http, cached.addr, "subgraph_document_cache_misses_total").await;
    // Seven distinct texts that parse (the broken one is never kept); all else hit.
    assert_eq!(misses, 7.0);
    assert_eq!(hits, 2.0 * 16.0 - 2.0 - 7.0);
    assert_eq!(
        metric(&http, uncached.addr, "subgraph_document_cache_hits_total").await,
        0.0
    );
    assert_eq!(
        metric(&http, uncached.addr, "subgraph_document_cache_entries").await,
        0.0
    );
}

#[tokio::test]
async fn a_flood_of_distinct_texts_stays_within_the_bound() {
    let bound = 64 << 10;
    let service = Service::start(posts_with_cache(bound)).await;
    let http = common::client();
    for i in 0..400 {
        let query =
            format!("{{ a{i}: topPosts(count: {i}) {{ pid title content author {{ id }} }} }}");
        let (status, _) = post(&http, &service.url(), &query, Value::Null).await;
        assert_eq!(status, 200);
    }
    let entries = metric(&http, service.addr, "subgraph_document_cache_entries").await;
    let bytes = metric(&http, service.addr, "subgraph_document_cache_bytes").await;
    assert!(
        bytes <= bound as f64,
        "{bytes} bytes held against a bound of {bound}"
    );
    assert!(entries > 10.0 && entries < 400.0, "{entries} entries");
}
