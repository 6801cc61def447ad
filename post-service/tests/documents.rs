//! The subgraphs' parsed-document cache and validation memo through real HTTP: the same
//! answers, byte for byte, with them on and off (errors, `@skip` by variable,
//! operation names, mutations, variables of new shapes and invalid values included),
//! hits and skipped validations counted on `/metrics`, the byte bound held against a
//! flood of distinct texts, and no skipping for a schema with an enum argument.

mod common;

use async_graphql::{EmptyMutation, EmptySubscription, Enum, Object, Schema, ValidationMode};
use common::{metric, post, Service};
use serde_json::{json, Value};
use subgraph_host::{Executors, Options};

/// POST each case to each service; panics unless all answer alike (status, content
/// type, body).
async fn same_answers(services: &[&Service], cases: &[(&str, Value, Option<&str>)]) {
    let http = common::client();
    for (query, variables, operation) in cases {
        let mut answers = Vec::new();
        for service in services {
            let r = http
                .post(service.url())
                .json(
                    &json!({ "query": query, "variables": variables, "operationName": operation }),
                )
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let content_type = r.headers()["content-type"].clone();
            answers.push((status, content_type, r.text().await.unwrap()));
        }
        assert!(
            answers.windows(2).all(|w| w[0] == w[1]),
            "{query} {variables}: {answers:?}"
        );
    }
}

fn posts_with_cache(bytes: u64) -> axum::Router {
    subgraph_host::router_with(
        "post",
        post_service::schema().into(),
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
    for _ in 0..2 {
        same_answers(&[&cached, &uncached], &cases).await;
    }
    let http = common::client();
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

#[tokio::test]
async fn skipping_validation_again_never_changes_an_answer() {
    let fast = Service::start(subgraph_host::router_with(
        "post",
        post_service::executors(post_service::Posts::default()),
        Options::default(),
    ))
    .await;
    let strict = Service::start(posts_with_cache(0)).await;
    let entities = "query($r0:[_Any!]!){_entities(representations:$r0){...on User{id topPosts(count:2){pid}}}}";
    let count = "query($c: Int!) { me: _entities(representations: [{__typename: \"User\", id: \"u1\"}]) { ... on User { topPosts(count: $c) { pid } } } }";
    let skip = "query($s: Boolean!) { topPosts(count: 1) { pid title @skip(if: $s) } }";
    let user = |id: &str| json!({ "__typename": "User", "id": id });
    // Each valid shape first, so that the memo learns it; then values of the same
    // shape, and of other shapes, valid and not.
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        (entities, json!({ "r0": [user("u1")] }), None),
        (entities, json!({ "r0": [user("u2"), user("u9")] }), None),
        (entities, json!({ "r0": user("u1") }), None),
        (entities, json!({ "r0": null }), None),
        (entities, json!({ "r0": [null] }), None),
        (entities, json!({ "r0": [user("u1"), null] }), None),
        (entities, json!({}), None),
        (entities, json!({ "r0": [{ "id": "u1" }] }), None),
        (count, json!({ "c": 2 }), None),
        (count, json!({ "c": 1 }), None),
        (count, json!({ "c": 1.5 }), None),
        (count, json!({ "c": "2" }), None),
        (count, json!({ "c": null }), None),
        (count, json!({ "c": [2] }), None),
        (count, json!({ "c": 2, "extra": { "a": [1] } }), None),
        (skip, json!({ "s": false }), None),
        (skip, json!({ "s": true }), None),
        (skip, json!({ "s": "no" }), None),
        (skip, json!({ "s": 0 }), None),
        (
            "{ topPosts(count: 1) { pid } }",
            json!({ "unused": 1 }),
            None,
        ),
        ("{ topPosts(count: 1) { pid } }", Value::Null, None),
    ];
    for _ in 0..3 {
        same_answers(&[&fast, &strict], &cases).await;
    }
    let http = common::client();
    let skipped = metric(&http, fast.addr, "subgraph_validations_skipped_total").await;
    assert!(
        skipped >= 20.0,
        "only {skipped} requests skipped validation"
    );
    assert_eq!(
        metric(&http, strict.addr, "subgraph_validations_skipped_total").await,
        0.0
    );
}

#[derive(Enum, Copy, Clone, PartialEq, Eq)]
enum Color {
    Red,
}

struct Paint;

#[Object]
impl Paint {
    async fn paint(&self, color: Color) -> bool {
        color == Color::Red
    }
}

#[tokio::test]
async fn a_schema_with_an_enum_argument_validates_every_request() {
    let build = |mode| {
        Schema::build(Paint, EmptyMutation, EmptySubscription)
            .validation_mode(mode)
            .finish()
    };
    let service = Service::start(subgraph_host::router_with(
        "paint",
        Executors {
            strict: build(ValidationMode::Strict),
            fast: Some(build(ValidationMode::Fast)),
        },
        Options::default(),
    ))
    .await;
    let http = common::client();
    let query = "query($c: Color!) { paint(color: $c) }";
    for color in ["RED", "RED", "RED", "BLUE"] {
        let (status, body) = post(&http, &service.url(), query, json!({ "c": color })).await;
        assert_eq!(status, 200);
        if color == "BLUE" {
            assert!(body.contains("does not contain the value"), "{body}");
        }
    }
    assert_eq!(
        metric(&http, service.addr, "subgraph_validations_skipped_total").await,
        0.0
    );
}

#[tokio::test]
async fn the_users_subgraph_skips_validation_too() {
    let service = Service::start(subgraph_host::router_with(
        "user",
        user_service::executors(user_service::Users::default()),
        Options::default(),
    ))
    .await;
    let http = common::client();
    for _ in 0..3 {
        let (_, body) = post(
            &http,
            &service.url(),
            "{me{id name nickname:name __typename _gw_k_id:id}}",
            Value::Null,
        )
        .await;
        assert_eq!(
            body,
            r#"{"data":{"me":{"id":"u1","name":"John","nickname":"John","__typename":"User","_gw_k_id":"u1"}}}"#
        );
    }
    assert_eq!(
        metric(&http, service.addr, "subgraph_validations_skipped_total").await,
        2.0
    );
}
