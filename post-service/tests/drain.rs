//! The graceful drain of a real `post-service` process on SIGTERM: requests in
//! progress are answered, new connections are refused, the process exits 0; a request
//! that hangs is cut at `--drain-timeout` rather than holding the drain forever; and
//! under load from several clients, no request whose answer began is cut short.

mod common;

use std::time::{Duration, Instant};

use common::Process;
use serde_json::json;

const QUERY: &str = "{ topPosts(count: 2) { pid } }";

fn body() -> serde_json::Value {
    json!({ "query": QUERY })
}

#[test]
fn requests_in_progress_finish_then_the_process_exits_0() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut service = Process::start(
        "post-service",
        &["--delay-ms", "600", "--drain-timeout", "5s"],
    );
    let url = service.url();
    let http = common::client();
    let in_flight = rt.spawn({
        let (http, url) = (http.clone(), url.clone());
        async move {
            let r = http.post(url).json(&body()).send().await.unwrap();
            (
                r.status().as_u16(),
                r.headers().get("connection").cloned(),
                r.text().await.unwrap(),
            )
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    let stopped_at = Instant::now();
    service.terminate();
    std::thread::sleep(Duration::from_millis(100));
    // New connections are refused while the drain runs.
    let refused =
        rt.block_on(async { reqwest::Client::new().post(&url).json(&body()).send().await });
    assert!(
        refused.is_err_and(|e| e.is_connect()),
        "a new connection was accepted"
    );
    let (status, connection, text) = rt.block_on(in_flight).unwrap();
    assert_eq!(status, 200);
    assert_eq!(text, r#"{"data":{"topPosts":[{"pid":"p1"},{"pid":"p2"}]}}"#);
    assert_eq!(
        connection.as_ref().map(|v| v.to_str().unwrap()),
        Some("close")
    );
    let (exit, printed) = service.wait_exit(Duration::from_secs(5));
    assert!(exit.success(), "{exit:?}: {printed}");
    assert!(
        printed.contains("drained, every request answered"),
        "{printed}"
    );
    assert!(stopped_at.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_hung_request_is_cut_at_the_drain_timeout() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut service = Process::start(
        "post-service",
        &["--hang-rate", "1", "--drain-timeout", "300ms"],
    );
    let url = service.url();
    let hung = rt.spawn(async move {
        reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap()
            .post(url)
            .json(&body())
            .send()
            .await
    });
    std::thread::sleep(Duration::from_millis(200));
    let stopped_at = Instant::now();
    service.terminate();
    let (exit, printed) = service.wait_exit(Duration::from_secs(5));
    let took = stopped_at.elapsed();
    assert!(exit.success(), "{exit:?}: {printed}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(printed.contains("closed 1 connection"), "{printed}");
    // The hung client sees its connection closed, not an answer.
    let outcome = rt.block_on(hung).unwrap();
    assert!(outcome.is_err(), "{outcome:?}");
}

#[test]
fn under_load_no_answer_is_cut_short() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut service = Process::start(
        "post-service",
        &["--delay-ms", "20", "--drain-timeout", "5s"],
    );
    let url = service.url();
    // 8 clients, each sending requests one after another for at most 2 s.
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            rt.spawn(async move {
                let http = reqwest::Client::new();
                let (mut answered, mut refused) = (0, 0);
                let until = Instant::now() + Duration::from_secs(2);
                while Instant::now() < until {
                    match http.post(&url).json(&body()).send().await {
                        Ok(r) => {
                            // A response that began must arrive whole and right.
                            assert_eq!(r.status(), 200);
                            let text = r.text().await.expect("a whole body");
                            assert_eq!(
                                text,
                                r#"{"data":{"topPosts":[{"pid":"p1"},{"pid":"p2"}]}}"#
                            );
                            answered += 1;
                        }
                        // After the drain began: no connection, or one closed before
                        // its request was read.
                        Err(_) => {
                            refused += 1;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
                (answered, refused)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    service.terminate();
    let (exit, printed) = service.wait_exit(Duration::from_secs(5));
    assert!(exit.success(), "{exit:?}: {printed}");
    assert!(
        printed.contains("drained, every request answered"),
        "{printed}"
    );
    let (mut answered, mut refused) = (0, 0);
    for c in clients {
        let (a, r) = rt.block_on(c).unwrap();
        answered += a;
        refused += r;
    }
    assert!(answered > 50, "{answered} answered before the drain");
    assert!(refused > 0, "no client noticed the stop");
}
