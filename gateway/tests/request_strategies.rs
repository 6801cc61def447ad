//! The request-level strategies (`--request-strategy coalesce | response`) through
//! real HTTP: identical requests in flight share one execution and its bytes, stored
//! answers are sent without asking a subgraph, a mutation drops the answers written
//! from the entities it returned, errors are never stored, and no answer crosses
//! callers (the flag's refusals are in `cli.rs`).

mod common;

use std::time::Duration;

use common::{Lab, Server};
use futures::future::join_all;
use gateway::caching::requests::RequestStrategy;
use serde_json::json;

fn response(ttl_secs: f64) -> Option<RequestStrategy> {
    Some(RequestStrategy::parse(&format!("response:ttl={ttl_secs}")).unwrap())
}

/// `n` copies of the same POST at once, with `authorization` when given; the bodies,
/// as the gateway sent them.
async fn at_once(lab: &Lab, query: &str, authorization: Option<&str>, n: usize) -> Vec<String> {
    let body = json!({ "query": query }).to_string();
    let sends = (0..n).map(|_| {
        let request = lab.request_as(&body, authorization.map(str::as_bytes));
        async move { request.send().await.unwrap().text().await.unwrap() }
    });
    join_all(sends).await
}

#[tokio::test]
async fn coalesce_shares_one_execution_among_identical_requests_in_flight_and_stores_nothing() {
    // Posts answers after 1 s: the eight requests are all in flight together.
    let lab = Lab::start_delayed(Duration::from_secs(1), |c| {
        c.request_strategy = Some(RequestStrategy::Coalesce);
    })
    .await;
    let query = "{ topPosts(count: 2) { pid title } }";
    // What composing the supergraph asked (each subgraph's SDL).
    let before = lab.subgraph_requests().await.1;
    let bodies = at_once(&lab, query, None, 8).await;
    assert!(bodies[0].contains(r#""pid":"p1""#), "{}", bodies[0]);
    assert!(bodies.iter().all(|b| *b == bodies[0]), "{bodies:?}");
    assert_eq!(
        lab.subgraph_requests().await.1,
        before + 1,
        "one execution for eight requests"
    );
    // Nothing is kept: the next request executes again.
    at_once(&lab, query, None, 1).await;
    assert_eq!(lab.subgraph_requests().await.1, before + 2);
    let text = lab.metrics(&lab.gateway).await;
    assert!(
        text.contains(r#"gateway_request_cache_dedupes_total{namespace="coalesce"} 7"#),
        "{text}"
    );
    // A different document (or different variables) is a different execution.
    at_once(&lab, "{ topPosts(count: 1) { pid } }", None, 1).await;
    assert_eq!(lab.subgraph_requests().await.1, before + 3);
}

#[tokio::test]
async fn coalesce_never_shares_an_execution_across_credentials() {
    let delayed_user =
        subgraph_host::router("user", user_service::schema(), Duration::from_secs(1));
    let lab = Lab::start_over(delayed_user, common::post_router(), |c| {
        c.request_strategy = Some(RequestStrategy::Coalesce);
    })
    .await;
    let me = "{ me { id } }";
    let before = lab.subgraph_requests().await.0;
    let (u1, u2, anonymous) = futures::join!(
        at_once(&lab, me, Some("Bearer u1"), 3),
        at_once(&lab, me, Some("Bearer u2"), 3),
        at_once(&lab, me, None, 3),
    );
    let id = |body: &str| {
        serde_json::from_str::<serde_json::Value>(body).unwrap()["data"]["me"]["id"].clone()
    };
    assert!(u1.iter().all(|b| id(b) == "u1"), "{u1:?}");
    assert!(u2.iter().all(|b| id(b) == "u2"), "{u2:?}");
    // No credentials: the users subgraph's default caller.
    assert!(anonymous.iter().all(|b| id(b) == "u1"), "{anonymous:?}");
    assert_eq!(
        lab.subgraph_requests().await.0,
        before + 3,
        "one execution per caller, shared only by the same caller's requests"
    );
}

#[tokio::test]
async fn coalesce_keys_the_caller_byte_for_byte() {
    // Tokens that differ only in a byte that is not UTF-8, an empty header and none:
    // the subgraph is sent each as it came, so each is a caller of its own.
    let delayed_user =
        subgraph_host::router("user", user_service::schema(), Duration::from_secs(1));
    let lab = Lab::start_over(delayed_user, common::post_router(), |c| {
        c.request_strategy = Some(RequestStrategy::Coalesce);
    })
    .await;
    let body = json!({ "query": "{ me { id } }" }).to_string();
    let before = lab.subgraph_requests().await.0;
    let callers: [Option<&[u8]>; 4] = [
        Some(b"Bearer x\xff"),
        Some(b"Bearer x\xfe"),
        Some(b""),
        None,
    ];
    let sends = callers
        .iter()
        .flat_map(|caller| [lab.post_as(&body, *caller), lab.post_as(&body, *caller)]);
    let statuses = join_all(sends).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(
        lab.subgraph_requests().await.0,
        before + 4,
        "one execution per caller: no two of these share one"
    );
}

#[tokio::test]
async fn an_answer_larger_than_the_response_store_is_never_stored() {
    // 20,000 posts: two aliased lists of 10,000 make an answer of about 1.2 MB, past a
    // store of 1 MB.
    let posts = post_service::Posts::generated(20_000, 100, 1);
    let post = subgraph_host::router("post", post_service::schema_with(posts), Duration::ZERO);
    let lab = Lab::start_over(common::user_router(), post, |c| {
        c.request_strategy = Some(RequestStrategy::parse("response:ttl=60,max_mb=1").unwrap());
    })
    .await;
    let big = "{ a: topPosts(count: 10000) { pid title content } b: topPosts(count: 10000) { content title pid } }";
    let small = "{ topPosts(count: 2) { pid } }";
    let before = lab.subgraph_requests().await.1;
    for _ in 0..2 {
        let (status, text) = lab.post_raw(json!({ "query": big }).to_string()).await;
        assert_eq!(status, 200);
        assert!(text.len() > 1 << 20, "{} bytes", text.len());
        lab.query(small).await;
    }
    // The big answer fetched both times; the small one once, then served stored.
    assert_eq!(lab.subgraph_requests().await.1, before + 2 * 2 + 1);
    let metrics = lab.metrics(&lab.gateway).await;
    assert_eq!(
        common::sample(
            &metrics,
            "gateway_request_cache_entries{namespace=\"response\"}"
        ),
        Some(1.0),
        "{metrics}"
    );
}

#[tokio::test]
async fn response_strategy_answers_from_stored_bytes_until_a_mutation_returns_an_entity_in_them() {
    let lab = Lab::start_with(|c| c.request_strategy = response(60.0)).await;
    let read = r#"{ getPost(pid: "p1") { pid title author { id name } } }"#;
    let first = lab.query(read).await;
    assert_eq!(first["data"]["getPost"]["pid"], "p1", "{first}");
    let asked = lab.subgraph_requests().await;
    for _ in 0..3 {
        assert_eq!(lab.query(read).await, first);
    }
    assert_eq!(
        lab.subgraph_requests().await,
        asked,
        "stored answers ask no subgraph"
    );
    // A mutation that returns Post p1 drops the stored answer before it is answered.
    let renamed = lab
        .query(r#"mutation { updatePostTitle(pid: "p1", title: "Renamed") { pid } }"#)
        .await;
    assert_eq!(renamed["data"]["updatePostTitle"]["pid"], "p1", "{renamed}");
    let after = lab.query(read).await;
    assert_eq!(after["data"]["getPost"]["title"], "Renamed", "{after}");
    let text = lab.metrics(&lab.gateway).await;
    assert!(
        text.contains(r#"gateway_request_cache_hits_total{namespace="response"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(r#"gateway_request_cache_invalidations_total{namespace="response"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"gateway_request_cache_entries{namespace="response"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn a_stored_answer_is_dropped_by_an_entity_that_came_from_an_entity_fetch() {
    let lab = Lab::start_with(|c| c.request_strategy = response(60.0)).await;
    // `me.topPosts` comes from the posts subgraph's `_entities`: Post p1 is in that
    // entity answer, not in a root field's.
    let read = "{ me { id topPosts(count: 2) { pid title } } }";
    let first = lab.query(read).await;
    assert_eq!(first["data"]["me"]["topPosts"][0]["pid"], "p1", "{first}");
    assert_eq!(lab.query(read).await, first);
    lab.query(r#"mutation { updatePostTitle(pid: "p1", title: "Moved") { pid } }"#)
        .await;
    let after = lab.query(read).await;
    assert_eq!(
        after["data"]["me"]["topPosts"][0]["title"], "Moved",
        "{after}"
    );
}

#[tokio::test]
async fn response_strategy_never_stores_an_answer_with_errors() {
    let mut lab = Lab::start_with(|c| c.request_strategy = response(60.0)).await;
    let user_addr = lab.stop_user().await;
    let down = lab.query("{ me { id } }").await;
    assert_eq!(down["data"]["me"], json!(null), "{down}");
    assert!(down["errors"].is_array(), "{down}");
    let _back = Server::start_on(user_addr, common::user_router()).await;
    let up = lab.query("{ me { id } }").await;
    assert_eq!(up, json!({ "data": { "me": { "id": "u1" } } }));
}

#[tokio::test]
async fn response_strategy_never_serves_a_stored_answer_to_a_caller_with_credentials() {
    let lab = Lab::start_with(|c| c.request_strategy = response(60.0)).await;
    let me = "{ me { id } }";
    // Stored for callers without credentials.
    assert_eq!(lab.query(me).await["data"]["me"]["id"], "u1");
    let asked = lab.subgraph_requests().await.0;
    for _ in 0..2 {
        let answer = lab
            .query_with(me, json!(null), &[("authorization", "Bearer u2")])
            .await;
        assert_eq!(answer["data"]["me"]["id"], "u2", "{answer}");
    }
    assert_eq!(
        lab.subgraph_requests().await.0,
        asked + 2,
        "a caller with credentials is executed each time, and never stored"
    );
    assert_eq!(lab.query(me).await["data"]["me"]["id"], "u1");
    assert_eq!(lab.subgraph_requests().await.0, asked + 2);
}

#[tokio::test]
async fn response_and_resolver_caching_run_together() {
    let lab = Lab::start_with(|c| {
        c.cache = common::cache(60.0);
        c.request_strategy = Some(RequestStrategy::parse("response").unwrap());
    })
    .await;
    let query = "{ me { id name topPosts(count: 2) { pid } } }";
    let first = lab.query(query).await;
    // The same operation written otherwise: the response store (keyed by the text)
    // misses, the resolver cache (keyed by what the subgraph is sent) answers it.
    let other = lab.query("{me{id name topPosts(count:2){pid}}}").await;
    assert_eq!(other["data"]["me"]["id"], first["data"]["me"]["id"]);
    assert_eq!(lab.query(query).await, first);
    let text = lab.metrics(&lab.gateway).await;
    assert!(
        text.contains(r#"gateway_request_cache_hits_total{namespace="response"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"gateway_cache_hits_total{namespace="Query.me"} 1"#),
        "{text}"
    );
}
