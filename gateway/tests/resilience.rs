//! Under faults: a subgraph that hangs or cannot be reached costs only its own fields
//! and only its own timeout; its circuit breaker fails them at once and probes it back;
//! deduplicated followers of a hung fetch wait no longer than its leader.

mod common;

use std::time::{Duration, Instant};

use common::{sample, Lab, Server};
use gateway::server::load::LoadLimits;
use gateway::upstream::{SubgraphLimits, UpstreamSettings};
use serde_json::{json, Value};
use subgraph_host::faults::FaultPlan;

const SEED: &str = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";

/// A post-service that never answers a GraphQL request (its schema read at start is
/// never faulted).
fn hanging_posts() -> axum::Router {
    subgraph_host::router_with(
        "post",
        subgraph_host::Executors::from(post_service::schema()),
        subgraph_host::Options {
            faults: FaultPlan {
                hang_rate: 1.0,
                ..FaultPlan::default()
            },
            ..Default::default()
        },
    )
}

/// Limits: `post_timeout` for post-service, 10 s for the others; the breaker as given.
fn limits(
    post_timeout: Duration,
    breaker: cache_core::breaker::BreakerSettings,
) -> UpstreamSettings {
    let defaults = SubgraphLimits {
        request_timeout: Duration::from_secs(10),
        breaker: breaker.clone(),
        ..SubgraphLimits::default()
    };
    UpstreamSettings {
        per_subgraph: vec![
            ("user".into(), defaults.clone()),
            (
                "post".into(),
                SubgraphLimits {
                    request_timeout: post_timeout,
                    breaker,
                    ..SubgraphLimits::default()
                },
            ),
        ],
        defaults,
    }
}

/// A breaker that never opens.
fn no_breaker() -> cache_core::breaker::BreakerSettings {
    cache_core::breaker::BreakerSettings {
        consecutive_failures: u32::MAX,
        error_ratio: None,
        open_for: Duration::from_secs(1),
        probes: 1,
    }
}

/// The seed query's answer with post-service's fields failed: user-service's resolve.
fn assert_only_post_fields_failed(answer: &Value, message: &str) {
    assert_eq!(answer["data"]["me"]["id"], "u1", "{answer}");
    assert_eq!(answer["data"]["me"]["name"], "John", "{answer}");
    assert_eq!(answer["data"]["me"]["nickname"], "John", "{answer}");
    let errors = answer["errors"].as_array().expect("errors");
    let paths: Vec<&Value> = errors.iter().map(|e| &e["path"]).collect();
    assert!(paths.contains(&&json!(["topPosts"])), "{answer}");
    assert!(paths.contains(&&json!(["me", "topPosts"])), "{answer}");
    for e in errors {
        let text = e["message"].as_str().unwrap();
        assert!(
            text.contains("subgraph post") && text.contains(message),
            "{answer}"
        );
        let path = e["path"].as_array().unwrap();
        assert_eq!(
            path.last(),
            Some(&json!("topPosts")),
            "only post's fields: {answer}"
        );
    }
}

#[tokio::test]
async fn a_hanging_subgraph_costs_only_its_fields_and_only_its_own_timeout() {
    let lab = Lab::start_custom(hanging_posts(), LoadLimits::NONE, |c| {
        c.upstream = limits(Duration::from_millis(300), no_breaker())
    })
    .await;
    let started = Instant::now();
    let answer = lab.query(SEED).await;
    let took = started.elapsed();
    assert_only_post_fields_failed(&answer, "did not answer within 300ms");
    // Against the 10 s every other subgraph gets: post's own timeout bounded the wait.
    assert!(took < Duration::from_secs(5), "{took:?}");
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(
        sample(
            &text,
            r#"gateway_upstream_timeouts_total{subgraph="post",phase="request"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"gateway_upstream_timeouts_total{subgraph="user",phase="request"}"#
        ),
        Some(0.0)
    );
}

#[tokio::test]
async fn deduplicated_followers_of_a_hung_fetch_wait_no_longer_than_its_timeout() {
    let lab = Lab::start_custom(hanging_posts(), LoadLimits::NONE, |c| {
        c.upstream = limits(Duration::from_millis(400), no_breaker());
        c.cache = common::cache(0.0);
    })
    .await;
    let started = Instant::now();
    let answers = futures::future::join_all((0..20).map(|_| lab.query(SEED))).await;
    let took = started.elapsed();
    for answer in &answers {
        assert_only_post_fields_failed(answer, "did not answer within 400ms");
    }
    assert!(took < Duration::from_secs(5), "{took:?}");
    let text = lab.metrics(&lab.gateway).await;
    let dedupes: f64 = text
        .lines()
        .filter(|l| l.starts_with("gateway_cache_dedupes_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(dedupes > 0.0, "the 20 requests shared fetches: {text}");
    let post_requests = lab.counter(&lab.post, "subgraph_requests_total").await;
    assert!(
        post_requests < 40,
        "fewer than 2 post requests per client request: {post_requests}"
    );
}

#[tokio::test]
async fn an_open_breaker_fails_the_fields_at_once_and_a_probe_closes_it_again() {
    let breaker = cache_core::breaker::BreakerSettings {
        consecutive_failures: 2,
        error_ratio: None,
        open_for: Duration::from_millis(700),
        probes: 1,
    };
    let mut lab = Lab::start_custom(hanging_posts(), LoadLimits::NONE, |c| {
        c.upstream = limits(Duration::from_secs(2), breaker)
    })
    .await;
    // Two timeouts in a row (one request: topPosts, then me.topPosts) open it.
    let answer = lab.query(SEED).await;
    assert_only_post_fields_failed(&answer, "did not answer within 2s");
    let started = Instant::now();
    let answer = lab.query(SEED).await;
    let took = started.elapsed();
    assert_only_post_fields_failed(&answer, "circuit breaker is open");
    // Refused by the breaker (the message says so), not by the 2 s timeout a call let
    // through would wait for.
    assert!(
        took < Duration::from_secs(2),
        "no 2 s wait while it is open: {took:?}"
    );
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(
        sample(&text, r#"gateway_upstream_breaker_state{subgraph="post"}"#),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, r#"gateway_upstream_breaker_state{subgraph="user"}"#),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"gateway_upstream_breaker_transitions_total{subgraph="post",to="open"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, r#"gateway_upstream_refused_total{subgraph="post"}"#),
        Some(2.0)
    );

    // post-service comes back healthy on its address; once the breaker's time is up,
    // one probe goes through (a second fetch meanwhile would be refused) and closes it.
    let addr = lab.stop_post().await;
    let back = Server::start_on(addr, common::post_router()).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let answer = lab.query("{ topPosts(count: 2) { pid } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "topPosts": [{ "pid": "p1" }, { "pid": "p2" }] } })
    );
    let answer = lab.query(SEED).await;
    assert!(answer.get("errors").is_none(), "{answer}");
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(
        sample(&text, r#"gateway_upstream_breaker_state{subgraph="post"}"#),
        Some(0.0)
    );
    for to in ["half_open", "closed"] {
        assert_eq!(
            sample(
                &text,
                &format!(
                    r#"gateway_upstream_breaker_transitions_total{{subgraph="post",to="{to}"}}"#
                )
            ),
            Some(1.0),
            "{to}: {text}"
        );
    }
    drop(back);
}

#[tokio::test]
async fn a_subgraph_that_accepts_no_connection_is_cut_by_its_connect_timeout() {
    let mut lab = Lab::start_with(|c| {
        c.upstream = UpstreamSettings::uniform(SubgraphLimits {
            connect_timeout: Duration::from_millis(300),
            request_timeout: Duration::from_secs(10),
            breaker: no_breaker(),
        })
    })
    .await;
    // Post-service's address now holds a listener that never accepts, its backlog full:
    // the kernel drops new connections' SYNs and a connect hangs.
    let addr = lab.stop_post().await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_reuseaddr(true).unwrap();
    socket.bind(addr).unwrap();
    let listener = socket.listen(0).unwrap();
    let mut fillers = Vec::new();
    for _ in 0..4 {
        if let Ok(Ok(c)) = tokio::time::timeout(
            Duration::from_millis(200),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            fillers.push(c);
        }
    }
    let started = Instant::now();
    let answer = lab.query("{ topPosts(count: 1) { pid } }").await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let message = answer["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("subgraph post could not be reached: no connection within 300ms"),
        "{answer}"
    );
    assert_eq!(answer["errors"][0]["path"], json!(["topPosts"]));
    let text = lab.metrics(&lab.gateway).await;
    assert!(
        sample(
            &text,
            r#"gateway_upstream_timeouts_total{subgraph="post",phase="connect"}"#
        ) >= Some(1.0),
        "{text}"
    );
    drop((listener, fillers));
}
