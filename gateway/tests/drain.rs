//! The gateway process's graceful drain: SIGTERM under load, and no request the
//! gateway accepted fails or is reset.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{GatewayProcess, Server};

const SEED: &str = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";
const SEED_ANSWER: &str = r#"{"data":{"me":{"id":"u1","name":"John","nickname":"John","topPosts":[{"pid":"p1","author":{"id":"u1"}},{"pid":"p3","author":{"id":"u1"}}]},"topPosts":[{"pid":"p1"},{"pid":"p2"}]}}"#;

/// The number in the gateway's last words: `(N GraphQL requests in all)`.
fn answered_in_all(log: &str) -> Option<u64> {
    let (before, _) = log.rsplit_once(" GraphQL requests")?;
    before.rsplit(['(', ' ']).next()?.parse().ok()
}

#[tokio::test]
async fn sigterm_under_load_answers_every_accepted_request_and_exits_0() {
    // Each post-service answer takes 150 ms, so requests are in progress at the signal.
    let user = Server::start(common::user_router()).await;
    let post = Server::start(common::post_router_delayed(Duration::from_millis(150))).await;
    let log_path = std::env::temp_dir().join(format!("gateway-drain-{}.log", std::process::id()));
    let log = std::fs::File::create(&log_path).unwrap();
    // Three shards (current-thread runtimes), so connections in progress sit on
    // several threads at the signal, whatever the machine's core count.
    let mut gateway = GatewayProcess::start_logged(
        &user,
        &post,
        &["--drain-timeout", "5s", "--shards", "3"],
        log,
    )
    .await;
    let url = format!("http://{}/graphql", gateway.addr);

    let answered = Arc::new(AtomicU64::new(0));
    let wrong = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..16)
        .map(|_| {
            let (url, answered, wrong) = (url.clone(), answered.clone(), wrong.clone());
            tokio::spawn(async move {
                // One keep-alive connection per client, as a load generator has.
                let http = reqwest::Client::builder()
                    .pool_max_idle_per_host(1)
                    .build()
                    .unwrap();
                for _ in 0..500 {
                    let response = http
                        .post(&url)
                        .json(&serde_json::json!({ "query": SEED }))
                        .send()
                        .await;
                    let Ok(response) = response else {
                        // Refused or closed before any answer: not accepted. Stop.
                        return;
                    };
                    let status = response.status();
                    match response.text().await {
                        Ok(body) if status == 200 && body == SEED_ANSWER => {
                            answered.fetch_add(1, Ordering::SeqCst);
                        }
                        // A status, a body cut short or reset, a wrong answer: an
                        // accepted request that failed.
                        other => {
                            eprintln!("failed after acceptance: {status} {other:?}");
                            wrong.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = answered.load(Ordering::SeqCst);
    assert!(before > 0, "the load is running");
    let status = gateway.terminate().await;
    for c in clients {
        c.await.unwrap();
    }
    let log = std::fs::read_to_string(&log_path).unwrap();
    std::fs::remove_file(&log_path).ok();
    assert!(
        status.success(),
        "exit 0 after the drain: {status}; log:\n{log}"
    );
    assert!(log.contains("drained, every request answered"), "{log}");
    assert_eq!(
        wrong.load(Ordering::SeqCst),
        0,
        "no accepted request failed; log:\n{log}"
    );
    // What the gateway answered is exactly what its clients received intact.
    assert_eq!(
        answered_in_all(&log),
        Some(answered.load(Ordering::SeqCst)),
        "log:\n{log}"
    );
    // The requests in progress when the signal came (waiting on post-service) were
    // answered during the drain.
    assert!(answered.load(Ordering::SeqCst) > before);
}

#[tokio::test]
async fn a_request_stuck_past_the_drain_timeout_is_cut_and_the_gateway_still_exits_0() {
    let user = Server::start(common::user_router()).await;
    let post = Server::start(common::post_router_delayed(Duration::from_secs(30))).await;
    let log_path =
        std::env::temp_dir().join(format!("gateway-drain-cut-{}.log", std::process::id()));
    let log = std::fs::File::create(&log_path).unwrap();
    let mut gateway =
        GatewayProcess::start_logged(&user, &post, &["--drain-timeout", "300ms"], log).await;
    let url = format!("http://{}/graphql", gateway.addr);
    let stuck = tokio::spawn(async move {
        reqwest::Client::new()
            .post(url)
            .json(&serde_json::json!({ "query": "{ topPosts(count: 1) { pid } }" }))
            .send()
            .await
            .is_err()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let status = gateway.terminate().await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(status.success(), "{status}");
    assert!(stuck.await.unwrap(), "the stuck request was cut");
    let log = std::fs::read_to_string(&log_path).unwrap();
    std::fs::remove_file(&log_path).ok();
    assert!(
        log.contains("--drain-timeout 300ms ran out; closed 1 connection"),
        "{log}"
    );
}
