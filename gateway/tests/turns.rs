//! Turns at execution (`--max-executing-requests`): past the limit a request waits its
//! turn and is then served; a request that shares another's execution waits without a
//! turn; a wait counts against the request timeout, and a request that times out gives
//! its turn back.

mod common;

use std::time::Duration;

use common::{sample, Lab};
use futures::future::join_all;
use gateway::caching::requests::RequestStrategy;

const POSTS: &str = "{ topPosts(count: 2) { pid title } }";

/// `n` requests for `query` sent at once; each answer's status and body.
async fn at_once(lab: &Lab, query: &str, n: usize) -> Vec<(u16, serde_json::Value)> {
    join_all((0..n).map(|_| async {
        let r = lab
            .http
            .post(lab.gateway.url())
            .json(&serde_json::json!({ "query": query }))
            .send()
            .await
            .expect("the gateway answers");
        (r.status().as_u16(), r.json().await.expect("a JSON body"))
    }))
    .await
}

#[tokio::test]
async fn past_the_limit_requests_wait_their_turn_and_every_one_is_served() {
    // Posts answer after 300 ms: the three requests are in flight together.
    let lab = Lab::start_delayed(Duration::from_millis(300), |c| {
        c.requests.max_executing = 1;
    })
    .await;
    let answers = at_once(&lab, POSTS, 3).await;
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["data"]["topPosts"][0]["pid"], "p1", "{body}");
        assert!(body.get("errors").is_none(), "{body}");
    }
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(sample(&text, "gateway_executing_requests_limit"), Some(1.0));
    assert_eq!(
        sample(&text, "gateway_execution_waits_total"),
        Some(2.0),
        "one executes, the other two wait: {text}"
    );
}

#[tokio::test]
async fn without_a_limit_no_request_waits() {
    let lab = Lab::start_delayed(Duration::from_millis(300), |_| {}).await;
    let answers = at_once(&lab, POSTS, 3).await;
    assert!(answers.iter().all(|(s, _)| *s == 200), "{answers:?}");
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(sample(&text, "gateway_executing_requests_limit"), Some(0.0));
    assert_eq!(sample(&text, "gateway_execution_waits_total"), Some(0.0));
}

#[tokio::test]
async fn requests_that_share_an_execution_wait_for_it_without_a_turn() {
    // One turn, and eight identical requests coalesced onto one execution: were the
    // seven that share it to take turns, they would wait behind the one they wait for.
    let lab = Lab::start_delayed(Duration::from_millis(300), |c| {
        c.requests.max_executing = 1;
        c.request_strategy = Some(RequestStrategy::Coalesce);
    })
    .await;
    let before = lab.subgraph_requests().await.1;
    let answers = at_once(&lab, POSTS, 8).await;
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(*body, answers[0].1);
    }
    assert_eq!(lab.subgraph_requests().await.1, before + 1, "one execution");
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(
        sample(&text, "gateway_execution_waits_total"),
        Some(0.0),
        "{text}"
    );
}

#[tokio::test]
async fn a_wait_counts_against_the_timeout_and_a_timed_out_request_gives_its_turn_back() {
    // Posts take 3 s, past the 500 ms request timeout. With one turn, the first request
    // times out executing and the second waiting; then a request that needs no
    // subgraph is served within its own timeout, which it could not be had either of
    // them kept the turn.
    let lab = Lab::start_delayed(Duration::from_secs(3), |c| {
        c.requests.max_executing = 1;
        c.requests.request_timeout = Duration::from_millis(500);
    })
    .await;
    let answers = at_once(&lab, POSTS, 2).await;
    for (status, body) in &answers {
        assert_eq!(*status, 504, "{body}");
        let message = body["errors"][0]["message"].as_str().unwrap_or_default();
        assert!(message.contains("did not complete"), "{body}");
    }
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(
        sample(&text, "gateway_execution_waits_total"),
        Some(1.0),
        "{text}"
    );
    let answer = lab.query("{ __typename }").await;
    assert_eq!(answer["data"]["__typename"], "Query", "{answer}");
}
