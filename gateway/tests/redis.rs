//! The shared Redis tier through real processes: gateway processes (this crate's
//! binary) over one `redis-server`, which each test starts on a free port and stops by
//! PID; the subgraphs run in this process. Without `redis-server` installed these
//! tests fail and say so (scripts/test.sh installs it).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::shared_cache::{
    redis_gc, shared_cache_across_two_gateways, store_for_gc, subgraph_requests, PolicyFile, READ,
};
use common::{free_port, post_router, user_router, GatewayProcess as Gateway, Server};

/// A `redis-server` of this test, stopped by PID when dropped.
struct Redis {
    port: u16,
    child: Option<Child>,
}

impl Redis {
    fn start() -> Redis {
        Redis::start_on(free_port())
    }

    fn start_on(port: u16) -> Redis {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start redis-server ({e}): install the Debian package redis-server (scripts/test.sh does)")
            });
        let redis = Redis {
            port,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while redis.try_command(&["PING"]).as_deref() != Some("+PONG") {
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        redis
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kill the server by PID (SIGKILL: no goodbye to its clients).
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// One command over RESP; the first line of the reply.
    fn try_command(&self, args: &[&str]) -> Option<String> {
        let mut conn = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut request = format!("*{}\r\n", args.len());
        for a in args {
            request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        conn.write_all(request.as_bytes()).ok()?;
        let mut buf = [0u8; 512];
        let n = conn.read(&mut buf).ok()?;
        let text = String::from_utf8_lossy(&buf[..n]).to_string();
        text.lines().next().map(str::to_string)
    }

    fn dbsize(&self) -> u64 {
        let reply = self.try_command(&["DBSIZE"]).expect("DBSIZE");
        reply.trim_start_matches(':').parse().unwrap()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test]
async fn two_gateways_share_redis_and_see_each_others_mutations() {
    let redis = Redis::start();
    shared_cache_across_two_gateways("redis", ["--redis", &redis.url()]).await;
}

#[tokio::test]
async fn two_layered_gateways_share_redis_and_drop_each_others_l1() {
    let redis = Redis::start();
    shared_cache_across_two_gateways("layered", ["--redis", &redis.url()]).await;
}

#[tokio::test]
async fn a_redis_that_is_down_at_start_costs_no_answers() {
    let (user, post) = (
        Server::start(user_router()).await,
        Server::start(post_router()).await,
    );
    let dead = format!("redis://127.0.0.1:{}", free_port());
    let gw = Gateway::start(
        &user,
        &post,
        &["--ttl", "10", "--storage", "redis", "--redis", &dead],
    )
    .await;
    for _ in 0..20 {
        let answer = gw.query(READ).await;
        assert_eq!(answer["data"]["getPost"]["title"], "Post 1", "{answer}");
        assert!(answer.get("errors").is_none(), "{answer}");
    }
    assert!(gw.metric("gateway_redis_errors_total").await >= 1.0);
    assert!(gw.metric("gateway_redis_breaker_trips_total").await >= 1.0);
    assert!(
        gw.metric("gateway_redis_rejected_total").await >= 1.0,
        "the open breaker answers at once"
    );
}

#[tokio::test]
async fn killing_redis_under_load_costs_no_answers_and_it_fills_again() {
    let (user, post) = (
        Server::start(user_router()).await,
        Server::start(post_router()).await,
    );
    let mut redis = Redis::start();
    let port = redis.port;
    let url = redis.url();
    let gw = Arc::new(
        Gateway::start(
            &user,
            &post,
            &["--ttl", "1", "--storage", "redis", "--redis", &url],
        )
        .await,
    );
    let expected = gw.query(READ).await;
    assert!(redis.dbsize() > 0);

    let (ok, bad) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let stop_at = Instant::now() + Duration::from_secs(4);
    let mut clients = Vec::new();
    for _ in 0..8 {
        let (gw, expected, ok, bad) = (gw.clone(), expected.clone(), ok.clone(), bad.clone());
        clients.push(tokio::spawn(async move {
            // Bounded: by time, and by count.
            for _ in 0..100_000 {
                if Instant::now() >= stop_at {
                    break;
                }
                let answer = gw.query(READ).await;
                if answer == expected {
                    ok.fetch_add(1, Ordering::Relaxed);
                } else {
                    bad.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    redis.kill();
    let served_before_kill = ok.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let restarted = Redis::start_on(port);
    for c in clients {
        c.await.unwrap();
    }
    let (ok, bad) = (ok.load(Ordering::Relaxed), bad.load(Ordering::Relaxed));
    eprintln!(
        "fault test: {ok} right answers ({served_before_kill} before the kill), {bad} wrong; redis errors {}, breaker trips {}, rejected at once {}",
        gw.metric("gateway_redis_errors_total").await,
        gw.metric("gateway_redis_breaker_trips_total").await,
        gw.metric("gateway_redis_rejected_total").await,
    );
    assert_eq!(bad, 0, "answers lost while Redis was killed ({ok} good)");
    assert!(
        ok > served_before_kill,
        "the gateway kept answering after the kill"
    );
    assert!(gw.metric("gateway_redis_errors_total").await >= 1.0);
    // The restarted Redis fills again once the breaker lets calls through.
    let deadline = Instant::now() + Duration::from_secs(10);
    while restarted.dbsize() == 0 {
        assert!(
            Instant::now() < deadline,
            "the restarted Redis was never written to"
        );
        let _ = gw.query(r#"{ getPost(pid: "p2") { pid } }"#).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn redis_gc_reports_the_members_of_expired_entries() {
    let (user, post) = (
        Server::start(user_router()).await,
        Server::start(post_router()).await,
    );
    let redis = Redis::start();
    let url = redis.url();
    store_for_gc(&user, &post, ["--redis", &url]).await;
    let gc = |strict: bool| redis_gc(["--redis", &url], if strict { &["--strict"] } else { &[] });
    let report = gc(true);
    let number_before = |text: &str, word: &str| -> u64 {
        let words: Vec<&str> = text.split_whitespace().collect();
        let i = words
            .iter()
            .position(|w| *w == word)
            .unwrap_or_else(|| panic!("{word} in {text}"));
        words[i - 1].parse().unwrap()
    };
    assert!(report.contains("strict"), "{report}");
    assert_eq!(number_before(&report, "reference"), 2, "{report}");
    assert_eq!(number_before(&report, "members;"), 4, "{report}");
    assert_eq!(number_before(&report, "members"), 2, "removed: {report}");
    assert_eq!(number_before(&report, "emptied"), 0, "{report}");
    // A second pass finds nothing left to remove.
    let again = gc(false);
    assert!(
        again.contains("lazy") && again.contains("removed 0 members"),
        "{again}"
    );

    let bad = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["redis-gc"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--redis"));
}

#[test]
fn storage_flags_that_do_not_fit_are_refused_by_name() {
    let file = PolicyFile::new("mixed", "[policy.\"Query.me\"]\nstorage = \"layered\"\n");
    let policy = &file.0;
    let url = "redis://127.0.0.1:1";
    for (args, needle) in [
        (
            vec!["--ttl", "10", "--storage", "redis"],
            "--storage redis: needs --redis URL",
        ),
        (
            vec!["--ttl", "10", "--redis", url],
            "--redis is used only with",
        ),
        (
            vec!["--storage", "layered", "--redis", url],
            "give --ttl or --policy too",
        ),
        (vec!["--ttl", "10", "--storage", "disk"], "not a storage"),
        (
            vec!["--ttl", "10", "--storage", "redis", "--redis", "http://x"],
            "expected redis://",
        ),
        (
            vec![
                "--ttl",
                "10",
                "--storage",
                "redis",
                "--redis",
                url,
                "--policy",
                policy,
            ],
            "cannot be mixed",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
            .args(["--subgraph", "user=http://127.0.0.1:1/graphql"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn a_policy_keeps_one_field_in_memory_while_the_rest_is_shared() {
    let (user, post) = (
        Server::start(user_router()).await,
        Server::start(post_router()).await,
    );
    let redis = Redis::start();
    let url = redis.url();
    let policy = PolicyFile::new(
        "local",
        "[policy.\"Query.topPosts\"]\nstorage = \"memory\"\n",
    );
    let args = [
        "--ttl",
        "10",
        "--storage",
        "redis",
        "--redis",
        &url,
        "--policy",
        &policy.0,
    ];
    let a = Gateway::start(&user, &post, &args).await;
    let b = Gateway::start(&user, &post, &args).await;
    let shared = r#"{ getPost(pid: "p1") { pid title } }"#;
    let local = r#"{ topPosts(count: 2) { pid } }"#;
    a.query(shared).await;
    a.query(local).await;
    let before = subgraph_requests(&user, &post).await;
    b.query(shared).await;
    assert_eq!(
        subgraph_requests(&user, &post).await,
        before,
        "getPost is shared through Redis"
    );
    b.query(local).await;
    assert_eq!(
        subgraph_requests(&user, &post).await,
        before + 1.0,
        "topPosts lives in each gateway's memory, so B fetches it itself"
    );
    // And B's own memory now answers it.
    b.query(local).await;
    assert_eq!(subgraph_requests(&user, &post).await, before + 1.0);
}

/// An APQ registration sent to one gateway is known to another on the same Redis
/// (issue 55): the second answers the hash alone without ever being sent the text.
#[tokio::test]
async fn apq_registrations_reach_every_gateway_sharing_redis() {
    let redis = Redis::start();
    let user = Server::start(user_router()).await;
    let post = Server::start(post_router()).await;
    let url = redis.url();
    let flags = ["--ttl", "10", "--storage", "redis", "--redis", &url];
    let a = Gateway::start(&user, &post, &flags).await;
    let b = Gateway::start(&user, &post, &flags).await;
    let query = "{ topPosts(count: 2) { pid title } }";
    let hash = common::sha256_hex(query);
    let named = serde_json::json!({
        "extensions": { "persistedQuery": { "version": 1, "sha256Hash": hash } }
    });
    let unknown = b.post_json(&named).await;
    assert_eq!(
        unknown["errors"][0]["extensions"]["code"], "PERSISTED_QUERY_NOT_FOUND",
        "{unknown}"
    );
    let mut with_text = named.clone();
    with_text["query"] = query.into();
    let expected = a.post_json(&with_text).await;
    assert!(expected["data"]["topPosts"].is_array(), "{expected}");
    // The registration is written to Redis in the background: wait for it (bounded).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = b.post_json(&named).await;
        if answer == expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "gateway b never learnt the hash: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fleet_hits = b
        .metric("gateway_persisted_documents_total{outcome=\"apq_fleet_hit\"}")
        .await;
    assert_eq!(fleet_hits, 1.0);
    // Kept locally from then on.
    assert_eq!(b.post_json(&named).await, expected);
    let local_hits = b
        .metric("gateway_persisted_documents_total{outcome=\"apq_hit\"}")
        .await;
    assert_eq!(local_hits, 1.0);
}

/// `POST /invalidate` on one gateway's admin listener reaches another gateway on the
/// same Redis (issue 55): the shared entries go, and the layered store's broadcast
/// empties the other's L1, so its next read is fetched again.
#[tokio::test]
async fn an_invalidation_from_outside_reaches_every_gateway_on_the_redis() {
    use common::shared_cache::{subgraph_requests, READ};
    let redis = Redis::start();
    let user = Server::start(user_router()).await;
    let post = Server::start(post_router()).await;
    let url = redis.url();
    let admin = format!("127.0.0.1:{}", free_port());
    let layered = ["--ttl", "60", "--storage", "layered", "--redis", &url];
    let a = Gateway::start(
        &user,
        &post,
        &[&layered[..], &["--admin-listen", &admin]].concat(),
    )
    .await;
    let b = Gateway::start(&user, &post, &layered).await;
    let expected = a.query(READ).await;
    assert_eq!(b.query(READ).await, expected);
    let cached = subgraph_requests(&user, &post).await;
    assert_eq!(b.query(READ).await, expected);
    assert_eq!(
        subgraph_requests(&user, &post).await,
        cached,
        "b answers from its cache"
    );

    let answer: serde_json::Value = reqwest::Client::new()
        .post(format!("http://{admin}/invalidate"))
        .body(r#"{"types":["Post"]}"#)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        answer["dropped"]["resolver"].as_u64().unwrap() >= 1,
        "{answer}"
    );
    // The broadcast reaches b's L1 in the background: wait for it (bounded).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert_eq!(b.query(READ).await, expected);
        if subgraph_requests(&user, &post).await > cached {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "b kept serving what was invalidated"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
