//! What the cache shares between operations and what it holds, as `/metrics` says it:
//! hits on entries another operation stored (`gateway_cache_cross_operation_total`),
//! entries and their bytes per namespace (`gateway_cache_entries`,
//! `gateway_cache_bytes`); and `POST /validate`, which checks and plans an operation
//! without running it.

mod common;

use common::{cache, sample, Lab};
use serde_json::{json, Value};

/// `how` = `hit` or `in_flight` of `namespace`.
fn crossed(text: &str, namespace: &str, how: &str) -> f64 {
    sample(
        text,
        &format!("gateway_cache_cross_operation_total{{namespace=\"{namespace}\",how=\"{how}\"}}"),
    )
    .unwrap_or_else(|| panic!("no cross-operation counter for {namespace}/{how} in\n{text}"))
}

/// The sum of every sample of `name` whose labels contain `needle`.
fn summed(text: &str, name: &str, needle: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(needle))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The entity namespace of `User` entities the queries below fetch (`User.<fields>`).
fn user_namespace(text: &str) -> String {
    text.lines()
        .filter_map(|l| l.strip_prefix("gateway_cache_misses_total{namespace=\""))
        .filter_map(|l| l.split('"').next())
        .find(|n| n.starts_with("User."))
        .unwrap_or_else(|| panic!("no User namespace in\n{text}"))
        .to_string()
}

#[tokio::test]
async fn a_hit_on_an_entry_another_operation_stored_is_counted_per_namespace() {
    let lab = Lab::start_with(|c| c.cache = cache(10.0)).await;
    let by_post = "{ getPost(pid: \"p1\") { author { name } } }";
    let by_list = "{ topPosts(count: 1) { author { name } } }";
    // getPost stores p1 and its author u1's name; the list's author u1 is that entry.
    lab.query(by_post).await;
    let text = lab.metrics(&lab.gateway).await;
    let user = user_namespace(&text);
    assert_eq!(crossed(&text, &user, "hit"), 0.0);
    lab.query(by_list).await;
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(crossed(&text, &user, "hit"), 1.0, "{text}");
    // The same operation again: its own entries (and getPost's u1 once more).
    lab.query(by_list).await;
    lab.query(by_post).await;
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(crossed(&text, &user, "hit"), 2.0, "{text}");
    assert_eq!(crossed(&text, "Query.topPosts", "hit"), 0.0);
    assert_eq!(crossed(&text, "Query.getPost", "hit"), 0.0);
    // Every hit is counted, and the cross-operation ones are among them.
    let hits = sample(
        &text,
        &format!("gateway_cache_hits_total{{namespace=\"{user}\"}}"),
    )
    .unwrap();
    assert!(hits >= 3.0, "{text}");
    // A differently named operation of the same text is another operation.
    let named = "query A { topPosts(count: 1) { author { name } } } query B { me { id } }";
    lab.post_json(&json!({ "query": named, "operationName": "A" }))
        .await;
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(crossed(&text, &user, "hit"), 3.0, "{text}");
}

#[tokio::test]
async fn what_the_store_holds_is_counted_per_namespace_and_leaves_with_an_invalidation() {
    let lab = Lab::start_with(|c| c.cache = cache(10.0)).await;
    lab.query("{ getPost(pid: \"p1\") { pid title } }").await;
    let text = lab.metrics(&lab.gateway).await;
    let entries = |t: &str| sample(t, "gateway_cache_entries{namespace=\"Query.getPost\"}");
    let bytes = |t: &str| sample(t, "gateway_cache_bytes{namespace=\"Query.getPost\"}");
    assert_eq!(entries(&text), Some(1.0), "{text}");
    let one = bytes(&text).unwrap();
    assert!(
        one > 64.0,
        "an entry holds its answer and bookkeeping: {one}"
    );
    lab.query("{ getPost(pid: \"p2\") { pid title } }").await;
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(entries(&text), Some(2.0));
    let two = bytes(&text).unwrap();
    assert!(two > one * 1.5 && two < one * 2.5, "{one} then {two}");
    // A bigger answer holds more bytes.
    lab.query("{ topPosts(count: 10) { pid title } }").await;
    let text = lab.metrics(&lab.gateway).await;
    let list = sample(&text, "gateway_cache_bytes{namespace=\"Query.topPosts\"}").unwrap();
    assert!(list > one * 1.5, "ten posts {list} against one {one}");
    // A mutation on p1 drops the entries that carry it.
    let retitled = lab
        .query("mutation { updatePostTitle(pid: \"p1\", title: \"new\") { pid title } }")
        .await;
    assert_eq!(retitled["data"]["updatePostTitle"]["title"], "new");
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(entries(&text), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, "gateway_cache_entries{namespace=\"Query.topPosts\"}"),
        Some(0.0),
        "the list held p1 too: {text}"
    );
    assert!(summed(&text, "gateway_cache_bytes", "namespace=") > 0.0);
}

async fn validate(lab: &Lab, body: Value) -> (u16, Value) {
    let r = lab
        .http
        .post(format!("http://{}/validate", lab.gateway.addr))
        .json(&body)
        .send()
        .await
        .expect("the gateway answers /validate");
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test]
async fn validate_checks_and_plans_an_operation_without_running_it() {
    let lab = Lab::start().await;
    let before = lab.subgraph_requests().await;
    let (status, answer) = validate(&lab, json!({ "query": "{ me { id name } }" })).await;
    assert_eq!(
        (status, answer),
        (
            200,
            json!({ "valid": true, "operation": "query", "estimatedCost": 1 })
        )
    );
    // A mutation is validated, and not run.
    let mutation = "mutation($p: ID!, $t: String!) { updatePostTitle(pid: $p, title: $t) { pid } }";
    let (status, answer) = validate(
        &lab,
        json!({ "query": mutation, "variables": { "p": "p1", "t": "changed" } }),
    )
    .await;
    assert_eq!(
        (status, answer),
        (
            200,
            json!({ "valid": true, "operation": "mutation", "estimatedCost": 10 })
        )
    );
    assert_eq!(
        lab.subgraph_requests().await,
        before,
        "nothing reached a subgraph"
    );
    let title = lab.query("{ getPost(pid: \"p1\") { title } }").await;
    assert_ne!(title["data"]["getPost"]["title"], "changed");
    // An unknown field: the error with its place in the document.
    let (status, answer) = validate(&lab, json!({ "query": "{\n  me {\n    nme\n  }\n}" })).await;
    assert_eq!(status, 200);
    let error = &answer["errors"][0];
    assert!(
        error["message"].as_str().unwrap().contains("nme"),
        "{answer}"
    );
    assert_eq!(error["locations"][0]["line"], 3, "{answer}");
    assert!(answer.get("valid").is_none());
    // Variables that do not fit their types.
    let (_, answer) = validate(
        &lab,
        json!({ "query": mutation, "variables": { "p": "p1", "t": 5 } }),
    )
    .await;
    assert!(answer["errors"][0]["message"].is_string(), "{answer}");
    let (_, answer) = validate(&lab, json!({ "query": mutation })).await;
    assert!(answer["errors"][0]["message"].is_string(), "{answer}");
}
