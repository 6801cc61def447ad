//! More than the gateway may hold: requests past `--max-concurrent-requests` and
//! connections past `--max-connections` get `503` with `Retry-After` at once, the rest
//! are served, and the gateway serves again as soon as the load drops. An oversized body
//! gets its `413` even when the client writes all of it before reading.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{sample, Lab};
use gateway::server::load::LoadLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SEED: &str = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";

/// One HTTP/1.1 request on `stream`, written whole, then the answer's head and body
/// (read until `content-length` is met or the connection ends).
async fn exchange(stream: &mut TcpStream, addr: SocketAddr, body: &[u8]) -> String {
    let head = format!(
        "POST /graphql HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .await
        .expect("write the head");
    stream.write_all(body).await.expect("write the whole body");
    read_answer(stream).await
}

/// An HTTP/1.1 answer, read until its `content-length` is met or the connection ends.
async fn read_answer(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
            .await
            .expect("an answer in time")
            .expect("no reset");
        answer.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&answer).to_string();
        if n == 0 {
            return text;
        }
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_string)
                })
                .and_then(|v| v.trim().parse::<usize>().ok());
            if length.is_some_and(|l| body.len() >= l) {
                return text;
            }
        }
    }
}

fn seed_body() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({ "query": SEED })).unwrap()
}

#[tokio::test]
async fn past_the_request_limit_requests_get_503_with_retry_after_at_once() {
    // Every post-service answer takes 400 ms, so two requests stay in progress.
    let lab = Lab::start_custom(
        common::post_router_delayed(Duration::from_millis(400)),
        LoadLimits {
            max_connections: 0,
            max_requests: 2,
        },
        |_| {},
    )
    .await;
    let sent = Instant::now();
    let answers = futures::future::join_all((0..8).map(|_| async {
        let started = Instant::now();
        let r = lab
            .http
            .post(lab.gateway.url())
            .json(&serde_json::json!({ "query": SEED }))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let retry_after = r
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string());
        let body: serde_json::Value = r.json().await.unwrap();
        (status, retry_after, body, started.elapsed())
    }))
    .await;
    let shed: Vec<_> = answers.iter().filter(|a| a.0 == 503).collect();
    let served: Vec<_> = answers.iter().filter(|a| a.0 == 200).collect();
    assert_eq!(served.len() + shed.len(), 8);
    assert!(served.len() >= 2 && shed.len() >= 4, "{answers:?}");
    for (_, retry_after, body, took) in &shed {
        assert_eq!(retry_after.as_deref(), Some("1"));
        let message = body["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains("overloaded"), "{body}");
        assert_eq!(body["errors"][0]["extensions"]["code"], "OVERLOADED");
        assert!(
            *took < Duration::from_millis(400),
            "refused at once, not queued: {took:?}"
        );
    }
    for (_, _, body, _) in &served {
        assert_eq!(body["data"]["me"]["id"], "u1", "{body}");
    }
    assert!(sent.elapsed() < Duration::from_secs(5));
    // The load is gone: the next requests are served at once.
    for _ in 0..2 {
        let answer = lab.query(SEED).await;
        assert!(answer.get("errors").is_none(), "{answer}");
    }
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(
        sample(&text, r#"gateway_shed_total{reason="requests"}"#),
        Some(shed.len() as f64)
    );
    assert_eq!(sample(&text, "gateway_requests_in_progress"), Some(0.0));
    assert!(sample(&text, "gateway_tokio_tasks").is_some(), "{text}");
}

#[tokio::test]
async fn past_the_connection_limit_a_connection_gets_503_and_is_closed() {
    let lab = Lab::start_custom(
        common::post_router(),
        LoadLimits {
            max_connections: 2,
            max_requests: 0,
        },
        |_| {},
    )
    .await;
    let addr = lab.gateway.addr;
    let mut first = TcpStream::connect(addr).await.unwrap();
    let mut second = TcpStream::connect(addr).await.unwrap();
    for conn in [&mut first, &mut second] {
        let answer = exchange(conn, addr, &seed_body()).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    // A third connection, while two are open: refused with a complete answer, even
    // though its client writes its request before reading.
    let mut third = TcpStream::connect(addr).await.unwrap();
    let answer = exchange(&mut third, addr, &seed_body()).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(
        lower.contains("retry-after: 1") && lower.contains("connection: close"),
        "{answer}"
    );
    assert!(answer.contains("too many connections"), "{answer}");
    // One of the two closes: a new connection is served.
    drop(first);
    let started = Instant::now();
    loop {
        let mut fourth = TcpStream::connect(addr).await.unwrap();
        let answer = exchange(&mut fourth, addr, &seed_body()).await;
        if answer.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{answer}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let text = lab.metrics(&lab.gateway).await;
    assert!(
        sample(&text, r#"gateway_shed_total{reason="connections"}"#) >= Some(1.0),
        "{text}"
    );
    drop(second);
}

#[tokio::test]
async fn an_oversized_body_written_whole_before_reading_still_gets_its_413() {
    let lab = Lab::start().await;
    let addr = lab.gateway.addr;
    // Four times the 1 MiB limit, all of it written before a byte is read.
    let body = vec![b' '; 4 << 20];
    for _ in 0..3 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let answer = exchange(&mut stream, addr, &body).await;
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        assert!(answer.contains("larger than 1048576 bytes"), "{answer}");
    }
    // The gateway is unharmed.
    assert_eq!(lab.query("{ me { id } }").await["data"]["me"]["id"], "u1");
}
