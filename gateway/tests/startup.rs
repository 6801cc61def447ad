//! Start-up and the upstream connection: SDL read with retries, composition that
//! fails clearly, and a keep-alive connection reset under a query.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::post;
use common::{config, Server};
use gateway::supergraph::Subgraph;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn subgraph(name: &str, server: &Server) -> Subgraph {
    Subgraph {
        name: name.into(),
        url: server.url(),
    }
}

#[tokio::test]
async fn waits_for_subgraphs_that_start_late() {
    // Reserve a port, leave it closed, and start the subgraph there only later.
    let port = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let post = Server::start(common::post_router()).await;
    let cfg = config(vec![
        Subgraph {
            name: "user".into(),
            url: format!("http://{port}/graphql"),
        },
        subgraph("post", &post),
    ]);
    let starting = tokio::spawn(async move { gateway::startup::build_app(&cfg).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!starting.is_finished());
    let _user = Server::start_on(port, common::user_router()).await;
    let app = tokio::time::timeout(Duration::from_secs(10), starting)
        .await
        .unwrap()
        .unwrap();
    assert!(app.is_ok(), "{:?}", app.err());
}

#[tokio::test]
async fn gives_up_on_a_missing_subgraph_with_a_clear_message() {
    let port = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let mut cfg = config(vec![Subgraph {
        name: "user".into(),
        url: format!("http://{port}/graphql"),
    }]);
    cfg.startup.deadline = Duration::from_millis(300);
    let err = gateway::startup::build_app(&cfg)
        .await
        .err()
        .expect("no subgraph, no gateway");
    let text = format!("{err:#}");
    assert!(
        text.contains("subgraph user at http://")
            && text.contains("did not answer `_service { sdl }`"),
        "{text}"
    );
}

/// A subgraph that answers `_service { sdl }` with fixed SDL.
fn fixed_sdl(sdl: &'static str) -> axum::Router {
    axum::Router::new().route(
        "/graphql",
        post(move || async move { axum::Json(json!({ "data": { "_service": { "sdl": sdl } } })) }),
    )
}

#[tokio::test]
async fn composition_failure_names_every_problem() {
    let user = Server::start(common::user_router()).await;
    let rival = Server::start(fixed_sdl(
        r#"type Query { me: User } type User @key(fields: "id") { id: Int! }"#,
    ))
    .await;
    let cfg = config(vec![subgraph("user", &user), subgraph("rival", &rival)]);
    let err = gateway::startup::build_app(&cfg)
        .await
        .err()
        .expect("composition must fail");
    let text = format!("{err:#}");
    assert!(text.contains("cannot compose the supergraph"), "{text}");
    assert!(
        text.contains("Query.me is defined by several subgraphs (user, rival)"),
        "{text}"
    );
    assert!(
        text.contains("User.id has type Int! in subgraph rival"),
        "{text}"
    );
}

/// A subgraph on raw TCP that serves the first request of each connection, then reads
/// the next one and drops the connection without answering: a keep-alive connection
/// reset under the client.
async fn flaky_subgraph() -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let counter = counter.clone();
            tokio::spawn(async move {
                let Some(request) = read_request(&mut conn).await else {
                    return;
                };
                let body = if request.contains("_service") {
                    json!({ "data": { "_service": { "sdl": "type Query { hello: String }" } } })
                        .to_string()
                } else {
                    json!({ "data": { "hello": "world" } }).to_string()
                };
                counter.fetch_add(1, Ordering::SeqCst);
                let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
                let _ = conn.write_all(head.as_bytes()).await;
                let _ = conn.write_all(body.as_bytes()).await;
                let _ = read_request(&mut conn).await; // then drop: reset
            });
        }
    });
    (addr, served)
}

async fn read_request(conn: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return Some(text);
            }
        }
    }
}

#[tokio::test]
async fn a_reset_keep_alive_connection_is_retried_once_for_queries() {
    let (addr, served) = flaky_subgraph().await;
    let cfg = config(vec![Subgraph {
        name: "flaky".into(),
        url: format!("http://{addr}/graphql"),
    }]);
    let app = gateway::startup::build_app(&cfg).await.unwrap();
    let gateway = Server::start(gateway::server::router(app)).await;
    let http = reqwest::Client::new();
    for _ in 0..3 {
        let r = http
            .post(gateway.url())
            .json(&json!({ "query": "{ hello }" }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.text().await.unwrap(), r#"{"data":{"hello":"world"}}"#);
    }
    // SDL + three queries were answered; queries 2 and 3 each met a reset first.
    assert_eq!(served.load(Ordering::SeqCst), 4);
    let metrics = common::metrics_of(&http, gateway.addr).await;
    assert!(
        metrics.contains("gateway_upstream_errors_total{subgraph=\"flaky\"} 2"),
        "{metrics}"
    );
}

/// A subgraph on raw TCP whose answers come in chunks (with a chunk extension and a
/// trailer) and end with `connection: close`, so every exchange needs a new
/// connection.
async fn chunked_subgraph() -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counter = connections.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let Some(request) = read_request(&mut conn).await else {
                    return;
                };
                let body = if request.contains("_service") {
                    json!({ "data": { "_service": { "sdl": "type Query { hello: String }" } } })
                        .to_string()
                } else {
                    json!({ "data": { "hello": "world" } }).to_string()
                };
                let (a, b) = body.split_at(body.len() / 2);
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n{:x};ext=1\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\nx-trailer: 1\r\n\r\n",
                    a.len(),
                    b.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    });
    (addr, connections)
}

#[tokio::test]
async fn chunked_answers_and_connection_close_are_read_as_http_1_1_says() {
    let (addr, connections) = chunked_subgraph().await;
    let cfg = config(vec![Subgraph {
        name: "chunky".into(),
        url: format!("http://{addr}/graphql"),
    }]);
    let app = gateway::startup::build_app(&cfg).await.unwrap();
    let gateway = Server::start(gateway::server::router(app)).await;
    let http = reqwest::Client::new();
    for _ in 0..3 {
        let r = http
            .post(gateway.url())
            .json(&json!({ "query": "{ hello }" }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.text().await.unwrap(), r#"{"data":{"hello":"world"}}"#);
    }
    // The SDL read at start-up (its own client) and one connection per query.
    assert_eq!(connections.load(Ordering::SeqCst), 4);
    let metrics = common::metrics_of(&http, gateway.addr).await;
    assert!(
        metrics.contains("gateway_upstream_errors_total{subgraph=\"chunky\"} 0"),
        "{metrics}"
    );
}
