//! A Redis 50 ms away trips the gateway's Redis breaker cleanly: a real redis-server
//! behind a real `loadgen netproxy --rtt 50ms`, user-service, post-service and a
//! gateway with `--storage redis --redis-timeout-ms 20`, each a process of this
//! workspace's build on a free port, stopped by PID. Every answer must be right and
//! come from the subgraphs; `/metrics` must show the timeouts, the breaker's trip and
//! the calls it refused without touching the network.
//!
//! The service binaries must be built next to loadgen's (`cargo build --workspace`
//! before `cargo test --workspace`); the test says so when they are missing, and fails
//! (it does not skip) without redis-server.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use hyper::Method;
use loadgen::matrix::http_probe;
use loadgen::matrix::network::{self, Link};
use loadgen::matrix::redis_server;
use loadgen::matrix::scraping::{scrape, Scrape};
use loadgen::matrix::services::{free_ports, ServiceProcess};
use loadgen::matrix::settings::Binaries;

const SEED_QUERY: &str =
    "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";
const SEED_ANSWER: &str = r#"{"data":{"me":{"id":"u1","name":"John","nickname":"John","topPosts":[{"pid":"p1","author":{"id":"u1"}},{"pid":"p3","author":{"id":"u1"}}]},"topPosts":[{"pid":"p1"},{"pid":"p2"}]}}"#;
/// Queries sent, one after another.
const QUERIES: usize = 40;
const DEADLINE: Duration = Duration::from_secs(10);

fn sum(scrape: &Scrape, name: &str) -> f64 {
    scrape
        .sum(name)
        .unwrap_or_else(|| panic!("{name} is not on the gateway's /metrics"))
}

#[test]
fn a_redis_50ms_away_trips_the_breaker_and_every_answer_comes_from_the_subgraphs() {
    let redis_binary = redis_server::find_on_path().unwrap_or_else(|| {
        panic!(
            "redis-server is not on PATH, so this test cannot run (it does not skip): install \
             the Debian package redis-server (apt-get install redis-server)"
        )
    });
    let bins = Binaries::locate(Path::new(env!("CARGO_BIN_EXE_loadgen")).parent())
        .expect("the services built next to loadgen (`cargo build --workspace` first)");
    let logs = std::env::temp_dir().join(format!("loadgen-slow-redis-{}", std::process::id()));
    std::fs::create_dir_all(&logs).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ports = free_ports(5).unwrap();
    let addr = |i: usize| SocketAddr::from(([127, 0, 0, 1], ports[i]));

    let mut redis = redis_server::start(&redis_binary, ports[0], &logs.join("redis.log")).unwrap();
    runtime
        .block_on(redis_server::wait_ready(
            &mut redis,
            Duration::from_secs(20),
        ))
        .unwrap();
    let link = Link {
        service: network::REDIS.into(),
        rtt: Duration::from_millis(50),
        jitter: Duration::ZERO,
    };
    let (_proxy, _) = network::start_proxy(
        Path::new(env!("CARGO_BIN_EXE_loadgen")),
        &link,
        0,
        ports[1],
        redis.addr,
        &logs.join("netproxy.log"),
    )
    .unwrap();
    let subgraph = |name: &str, binary: &Path, i: usize| {
        let mut p = ServiceProcess::spawn(
            name,
            binary,
            &["--listen".into(), addr(i).to_string()],
            addr(i),
            &logs.join(format!("{name}.log")),
        )
        .unwrap();
        runtime.block_on(p.wait_healthy(DEADLINE * 6)).unwrap();
        p
    };
    let user = subgraph("user-service", &bins.find("user-service").unwrap(), 2);
    let post = subgraph("post-service", &bins.find("post-service").unwrap(), 3);
    let gateway_args: Vec<String> = [
        "--listen",
        &addr(4).to_string(),
        "--subgraph",
        &format!("user=http://{}/graphql", user.addr),
        "--subgraph",
        &format!("post=http://{}/graphql", post.addr),
        "--ttl",
        "10",
        "--storage",
        "redis",
        "--redis",
        &format!("redis://{}", addr(1)),
        "--redis-timeout-ms",
        "20",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut gateway = ServiceProcess::spawn(
        "gateway",
        &bins.gateway,
        &gateway_args,
        addr(4),
        &logs.join("gateway.log"),
    )
    .unwrap();
    runtime
        .block_on(gateway.wait_healthy(DEADLINE * 6))
        .unwrap();

    let expected: serde_json::Value = serde_json::from_str(SEED_ANSWER).unwrap();
    let body = serde_json::json!({ "query": SEED_QUERY }).to_string();
    for i in 0..QUERIES {
        let answer = runtime
            .block_on(http_probe::request(
                gateway.addr,
                Method::POST,
                "/graphql",
                &["content-type: application/json".into()],
                Some(body.clone()),
                DEADLINE,
            ))
            .unwrap();
        let got: Option<serde_json::Value> = serde_json::from_slice(&answer.body).ok();
        assert!(
            answer.status == 200 && got.as_ref() == Some(&expected),
            "query {i}: HTTP {} {}",
            answer.status,
            answer.text()
        );
    }

    let metrics = runtime.block_on(scrape(gateway.addr)).unwrap();
    let upstream = runtime.block_on(scrape(post.addr)).unwrap();
    let (timeouts, trips, rejected) = (
        sum(&metrics, "gateway_redis_timeouts_total"),
        sum(&metrics, "gateway_redis_breaker_trips_total"),
        sum(&metrics, "gateway_redis_rejected_total"),
    );
    let hits = sum(&metrics, "gateway_cache_hits_total");
    eprintln!(
        "timeouts {timeouts}, breaker trips {trips}, refused by the open breaker {rejected}, \
         cache hits {hits}; gateway log:\n{}",
        gateway.log_tail(5)
    );
    // Five timeouts in a row open the breaker; it refuses calls while open.
    assert!(timeouts >= 5.0, "timeouts {timeouts}");
    assert!(trips >= 1.0, "breaker trips {trips}");
    assert!(
        rejected >= 1.0,
        "calls refused by the open breaker: {rejected}"
    );
    // Nothing was read from Redis in time: every answer came from the subgraphs, and
    // each query asked post-service at least once.
    assert_eq!(
        hits, 0.0,
        "cache hits with a Redis that never answers in time"
    );
    let post_requests = upstream
        .sum("subgraph_requests_total")
        .expect("subgraph_requests_total on post-service");
    assert!(
        post_requests >= QUERIES as f64,
        "post-service answered {post_requests} requests for {QUERIES} queries"
    );
    assert_eq!(
        sum(&metrics, "gateway_requests_total"),
        QUERIES as f64,
        "every query was answered once"
    );
    let errors = metrics.sum("gateway_request_errors_total").unwrap_or(0.0);
    assert_eq!(errors, 0.0, "gateway_request_errors_total");
    drop(gateway);
    std::fs::remove_dir_all(&logs).ok();
}
