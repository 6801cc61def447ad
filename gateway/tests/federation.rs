//! The gateway as a federation gateway: routing, planning, batching, the GraphQL
//! features it must support, mutations, `authorization`, and subgraphs that fail.

mod common;

use common::{Lab, Server};
use serde_json::json;

const SEED: &str = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";
const SEED_ANSWER: &str = r#"{"data":{"me":{"id":"u1","name":"John","nickname":"John","topPosts":[{"pid":"p1","author":{"id":"u1"}},{"pid":"p3","author":{"id":"u1"}}]},"topPosts":[{"pid":"p1"},{"pid":"p2"}]}}"#;

#[tokio::test]
async fn seed_query_answers_byte_for_byte_with_three_subgraph_requests() {
    let lab = Lab::start().await;
    let before = lab.subgraph_requests().await;
    let (status, body) = lab
        .post_raw(serde_json::to_vec(&json!({ "query": SEED })).unwrap())
        .await;
    assert_eq!(status, 200);
    assert_eq!(body, SEED_ANSWER);
    let after = lab.subgraph_requests().await;
    // me from users; me.topPosts through post's _entities; topPosts from posts.
    // author { id } needs no trip: the key came with the post.
    assert_eq!((after.0 - before.0, after.1 - before.1), (1, 2));
}

#[tokio::test]
async fn a_skipped_root_adds_no_request_and_a_skipped_object_is_still_fetched() {
    let lab = Lab::start().await;
    let before = lab.subgraph_requests().await;
    let q = "query($s: Boolean!) { me @skip(if: $s) { id } topPosts(count: 1) @include(if: $s) { pid } }";
    let answer = lab.query_with(q, json!({ "s": false }), &[]).await;
    assert_eq!(answer, json!({ "data": { "me": { "id": "u1" } } }));
    let answer = lab
        .query_with(
            "query($s: Boolean!) { me @skip(if: $s) { id } }",
            json!({ "s": true }),
            &[],
        )
        .await;
    assert_eq!(answer, json!({ "data": {} }));
    let after = lab.subgraph_requests().await;
    // A conditional root field goes to its subgraph with its condition, which the
    // subgraph applies: `me` twice (users), `topPosts` once (posts). The root adds no
    // request of its own (a `__typename` fetch for an empty root would be a third to
    // users or a second to posts).
    assert_eq!((after.0 - before.0, after.1 - before.1), (2, 1));
    // An object whose every field is skipped is still fetched: {} for a user, not null.
    let answer = lab
        .query_with(
            "query($s: Boolean!) { me { id @skip(if: $s) } }",
            json!({ "s": true }),
            &[],
        )
        .await;
    assert_eq!(answer, json!({ "data": { "me": {} } }));
}

#[tokio::test]
async fn batching_sends_one_entities_request_per_subgraph_per_level() {
    let lab = Lab::start().await;
    let before = lab.subgraph_requests().await;
    let answer = lab
        .query("{ topPosts(count: 4) { pid author { name topPosts(count: 2) { pid } } } }")
        .await;
    let after = lab.subgraph_requests().await;
    let names: Vec<&str> = answer["data"]["topPosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["author"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["John", "Jane", "John", "John"]);
    assert_eq!(
        answer["data"]["topPosts"][1]["author"]["topPosts"],
        json!([{ "pid": "p2" }])
    );
    // Four authors (two distinct) resolved by ONE users `_entities` call. post-service
    // answers `author { topPosts }` in its first response (it owns User.topPosts),
    // so the posts side costs one request, not two.
    assert_eq!(after.0 - before.0, 1, "users requests");
    assert_eq!(after.1 - before.1, 1, "posts requests");
}

#[tokio::test]
async fn sibling_selections_that_need_the_same_subgraph_share_one_request() {
    let lab = Lab::start().await;
    let before = lab.subgraph_requests().await;
    let answer = lab
        .query("{ topPosts(count: 4) { a: author { name } b: author { n: name } } }")
        .await;
    let after = lab.subgraph_requests().await;
    assert_eq!(
        answer["data"]["topPosts"][1],
        json!({ "a": { "name": "Jane" }, "b": { "n": "Jane" } })
    );
    // Four parents, two sibling selections: both go to users in ONE request (an
    // aliased `_entities` field per selection), never one per parent or per sibling.
    assert_eq!(after.0 - before.0, 1);
}

#[tokio::test]
async fn entity_chains_go_both_ways_through_lists_and_nulls() {
    let lab = Lab::start().await;
    let answer = lab
        .query(r#"{ getPost(pid: "p2") { title author { name topPosts(count: 3) { pid author { name topPosts(count: 1) { content } } } } } missing: getPost(pid: "p9") { pid author { name } } }"#)
        .await;
    assert_eq!(
        answer,
        json!({ "data": {
            "getPost": { "title": "Post 2", "author": { "name": "Jane", "topPosts": [
                { "pid": "p2", "author": { "name": "Jane", "topPosts": [{ "content": "Content 2" }] } }
            ] } },
            "missing": null
        } })
    );
    // users → posts → users: me.topPosts[].author.name needs a second users trip.
    let answer = lab
        .query("{ me { topPosts(count: 3) { pid author { name } } } }")
        .await;
    assert_eq!(
        answer["data"]["me"]["topPosts"][2],
        json!({ "pid": "p4", "author": { "name": "John" } })
    );
}

#[tokio::test]
async fn aliases_variables_fragments_and_directives() {
    let lab = Lab::start().await;
    let query = r#"
        query Q($n: Int!, $withPosts: Boolean!, $skipName: Boolean = true) {
          first: topPosts(count: 1) { id: pid }
          two: topPosts(count: $n) { ...PostBits }
          me {
            ... on User { who: name @skip(if: $skipName) id }
            ...UserPosts @include(if: $withPosts)
          }
        }
        fragment PostBits on Post { pid title author { ...Named } }
        fragment Named on User { name }
        fragment UserPosts on User { topPosts(count: $n) { pid } }
    "#;
    let answer = lab
        .query_with(query, json!({ "n": 2, "withPosts": true }), &[])
        .await;
    assert_eq!(
        answer,
        json!({ "data": {
            "first": [{ "id": "p1" }],
            "two": [
                { "pid": "p1", "title": "Post 1", "author": { "name": "John" } },
                { "pid": "p2", "title": "Post 2", "author": { "name": "Jane" } }
            ],
            "me": { "id": "u1", "topPosts": [{ "pid": "p1" }, { "pid": "p3" }] }
        } })
    );
    let answer = lab
        .query_with(
            query,
            json!({ "n": 1, "withPosts": false, "skipName": false }),
            &[],
        )
        .await;
    assert_eq!(answer["data"]["me"], json!({ "who": "John", "id": "u1" }));
}

#[tokio::test]
async fn typename_and_introspection_of_the_composed_schema() {
    let lab = Lab::start().await;
    let answer = lab
        .query("{ __typename me { __typename id topPosts(count: 1) { __typename } } }")
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "__typename": "Query", "me": { "__typename": "User", "id": "u1", "topPosts": [{ "__typename": "Post" }] } } })
    );
    let answer = lab
        .query(r#"{ __schema { queryType { name } mutationType { name } } user: __type(name: "User") { fields { name } } }"#)
        .await;
    assert_eq!(
        answer["data"]["__schema"],
        json!({ "queryType": { "name": "Query" }, "mutationType": { "name": "Mutation" } })
    );
    // User's fields come from both subgraphs; federation internals are not exposed.
    let fields: Vec<&str> = answer["data"]["user"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["id", "name", "topPosts"]);
    let answer = lab
        .query("{ __schema { queryType { fields { name } } } }")
        .await;
    let roots: Vec<&str> = answer["data"]["__schema"]["queryType"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(roots, ["me", "topPosts", "getPost"]);
}

#[tokio::test]
async fn operation_name_picks_one_of_several_operations() {
    let lab = Lab::start().await;
    let doc = "query A { me { id } } query B { topPosts(count: 1) { pid } }";
    assert_eq!(
        lab.post_json(&json!({ "query": doc, "operationName": "B" }))
            .await,
        json!({ "data": { "topPosts": [{ "pid": "p1" }] } })
    );
    assert_eq!(
        lab.post_json(&json!({ "query": doc, "operationName": "A" }))
            .await,
        json!({ "data": { "me": { "id": "u1" } } })
    );
}

fn url(lab: &Lab, params: &[(&str, &str)]) -> reqwest::Url {
    reqwest::Url::parse_with_params(&lab.gateway.url(), params).unwrap()
}

#[tokio::test]
async fn get_requests_run_queries_but_not_mutations() {
    let lab = Lab::start().await;
    let r = lab
        .http
        .get(url(
            &lab,
            &[
                ("query", "query($c: Int) { topPosts(count: $c) { pid } }"),
                ("variables", r#"{"c":1}"#),
            ],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.text().await.unwrap(),
        r#"{"data":{"topPosts":[{"pid":"p1"}]}}"#
    );
    let r = lab
        .http
        .get(url(
            &lab,
            &[("query", r#"mutation { createUser(name: "x") { id } }"#)],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["allow"], "POST");
}

#[tokio::test]
async fn mutations_run_in_document_order_and_reads_see_them() {
    let lab = Lab::start().await;
    let answer = lab
        .query(
            r#"mutation {
            a: createUser(name: "Ann") { id name }
            b: updateUser(id: "u3", name: "Anna") { id name }
            c: updatePostTitle(pid: "p1", title: "Fresh") { pid title author { name } }
            d: createUser(name: "Bob") { id }
        }"#,
        )
        .await;
    assert_eq!(
        answer,
        json!({ "data": {
            "a": { "id": "u3", "name": "Ann" },
            "b": { "id": "u3", "name": "Anna" },
            "c": { "pid": "p1", "title": "Fresh", "author": { "name": "John" } },
            "d": { "id": "u4" }
        } })
    );
    let answer = lab
        .query(r#"{ getPost(pid: "p1") { title } me { topPosts(count: 1) { title } } }"#)
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "getPost": { "title": "Fresh" }, "me": { "topPosts": [{ "title": "Fresh" }] } } })
    );
    let answer = lab
        .query_with(
            "{ me { name } }",
            json!(null),
            &[("authorization", "Bearer u3")],
        )
        .await;
    assert_eq!(answer, json!({ "data": { "me": { "name": "Anna" } } }));
    // An unknown id is a GraphQL error with a path; the other fields still resolve.
    let answer = lab.query(r#"mutation { bad: updateUser(id: "u99", name: "x") { id } ok: createUser(name: "Cy") { id } }"#).await;
    assert_eq!(answer["data"], json!({ "bad": null, "ok": { "id": "u5" } }));
    assert_eq!(answer["errors"][0]["path"], json!(["bad"]));
    assert!(answer["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("u99"));
}

#[tokio::test]
async fn concurrent_create_user_hands_out_distinct_ids() {
    let lab = Lab::start().await;
    let calls = (0..40).map(|i| {
        let lab = &lab;
        async move {
            lab.query(&format!(
                r#"mutation {{ createUser(name: "n{i}") {{ id }} }}"#
            ))
            .await
        }
    });
    let answers = futures::future::join_all(calls).await;
    let mut ids: Vec<String> = answers
        .iter()
        .map(|a| a["data"]["createUser"]["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 40);
}

#[tokio::test]
async fn authorization_picks_me_and_is_forwarded_to_the_subgraphs() {
    let lab = Lab::start().await;
    let query = "{ me { id name topPosts(count: 5) { pid } } }";
    let as_u2 = lab
        .query_with(query, json!(null), &[("authorization", "Bearer u2")])
        .await;
    assert_eq!(
        as_u2,
        json!({ "data": { "me": { "id": "u2", "name": "Jane", "topPosts": [{ "pid": "p2" }] } } })
    );
    let anonymous = lab.query(query).await;
    assert_eq!(anonymous["data"]["me"]["id"], "u1");
    let as_u1 = lab
        .query_with(query, json!(null), &[("authorization", "Bearer u1")])
        .await;
    assert_eq!(
        as_u1["data"]["me"]["topPosts"],
        json!([{ "pid": "p1" }, { "pid": "p3" }, { "pid": "p4" }])
    );
    let unknown = lab
        .query_with(query, json!(null), &[("authorization", "Bearer nobody")])
        .await;
    assert_eq!(unknown, json!({ "data": { "me": null } }));
}

#[tokio::test]
async fn a_subgraph_that_is_down_turns_only_its_fields_into_errors() {
    let mut lab = Lab::start().await;
    let user_addr = lab.stop_user().await;
    let answer = lab
        .query("{ me { id } topPosts(count: 2) { pid author { id name } } }")
        .await;
    assert_eq!(answer["data"]["me"], json!(null));
    assert_eq!(answer["data"]["topPosts"][0]["pid"], "p1");
    let errors = answer["errors"].as_array().unwrap();
    assert!(
        errors
            .iter()
            .all(|e| !e["message"].as_str().unwrap().starts_with("internal")),
        "{answer}"
    );
    assert!(
        errors.iter().any(|e| e["path"] == json!(["me"])
            && e["message"]
                .as_str()
                .unwrap()
                .contains("subgraph user is unavailable")),
        "{answer}"
    );
    // The author's entity fetch failed: the error is at the field it left without a
    // value, and since `name` is `String!`, the null propagates to the nullable
    // `author`.
    assert!(
        errors
            .iter()
            .any(|e| e["path"] == json!(["topPosts", 0, "author", "name"])),
        "{answer}"
    );
    assert_eq!(
        answer["data"]["topPosts"][0]["author"],
        json!(null),
        "{answer}"
    );
    // The subgraph comes back on the same address: the next request sees it.
    let back = Server::start_on(user_addr, common::user_router()).await;
    let answer = lab.query("{ me { id } }").await;
    assert_eq!(answer, json!({ "data": { "me": { "id": "u1" } } }));
    drop(back);
}

#[tokio::test]
async fn subgraph_errors_come_back_with_their_paths() {
    let lab = Lab::start().await;
    // updateUser fails inside the users subgraph; the error keeps its path.
    let answer = lab
        .query(r#"mutation { updatePostTitle(pid: "p404", title: "x") { pid } }"#)
        .await;
    assert_eq!(answer["data"], json!({ "updatePostTitle": null }));
    assert_eq!(answer["errors"][0]["path"], json!(["updatePostTitle"]));
}

#[tokio::test]
async fn metrics_report_requests_upstream_requests_and_latency() {
    let lab = Lab::start().await;
    lab.query(SEED).await;
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(common::metric(&text, "gateway_requests_total"), Some(1.0));
    assert!(
        text.contains("gateway_upstream_requests_total{subgraph=\"user\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("gateway_upstream_requests_total{subgraph=\"post\"} 2"),
        "{text}"
    );
    assert_eq!(
        common::metric(&text, "gateway_request_duration_seconds_count"),
        Some(1.0)
    );
    let health = lab
        .http
        .get(format!("http://{}/health", lab.gateway.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn responses_keep_query_order_for_named_operations_fragments_and_aliases() {
    let lab = Lab::start().await;
    let named = format!("query Seed {}", &SEED["query ".len()..]);
    let (_, body) = lab
        .post_raw(serde_json::to_vec(&json!({ "query": named })).unwrap())
        .await;
    assert_eq!(body, SEED_ANSWER);
    // Post-service fields first in the text, user-service fields after, through a
    // fragment and aliases: the answer follows the text, not which subgraph was faster.
    let query = "query Q { z: topPosts(count: 1) { ...P } a: me { ... on User { topPosts(count: 1) { title } n: name } } } fragment P on Post { title pid }";
    let (_, body) = lab
        .post_raw(serde_json::to_vec(&json!({ "query": query })).unwrap())
        .await;
    assert_eq!(
        body,
        r#"{"data":{"z":[{"title":"Post 1","pid":"p1"}],"a":{"topPosts":[{"title":"Post 1"}],"n":"John"}}}"#
    );
}

#[tokio::test]
async fn a_subgraph_answer_over_the_body_limit_is_an_error_at_its_fields() {
    let lab = Lab::start_with(|c| c.max_upstream_body_bytes = 120).await;
    let answer = lab
        .query("{ me { id } topPosts(count: 4) { pid title content } }")
        .await;
    // users' small answer fits; posts' does not.
    assert_eq!(answer["data"]["me"], json!({ "id": "u1" }));
    assert_eq!(answer["data"]["topPosts"], json!(null));
    assert_eq!(answer["errors"][0]["path"], json!(["topPosts"]));
    assert!(
        answer["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("subgraph post answered more than 120 bytes"),
        "{answer}"
    );
}
