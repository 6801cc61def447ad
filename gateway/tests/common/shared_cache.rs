//! What the Redis tests of one Redis (`tests/redis.rs`) and of a Redis Cluster
//! (`tests/redis_cluster.rs`) both do, given the flag that names the Redis
//! (`["--redis", URL]` or `["--redis-cluster", SEEDS]`).

use std::process::Command;
use std::time::{Duration, Instant};

use super::{metric, metrics_of, post_router, user_router, GatewayProcess as Gateway, Server};

/// A `--policy` file of this test, removed when dropped.
pub struct PolicyFile(pub String);

impl PolicyFile {
    pub fn new(name: &str, toml: &str) -> PolicyFile {
        let path = std::env::temp_dir().join(format!("gw-{name}-{}.toml", std::process::id()));
        std::fs::write(&path, toml).unwrap();
        PolicyFile(path.to_str().unwrap().to_string())
    }
}

impl Drop for PolicyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub async fn subgraph_requests(user: &Server, post: &Server) -> f64 {
    let http = reqwest::Client::new();
    let mut total = 0.0;
    for s in [user, post] {
        let text = metrics_of(&http, s.addr).await;
        total += metric(&text, "subgraph_requests_total").unwrap();
    }
    total
}

pub const READ: &str =
    r#"{ getPost(pid: "p1") { pid title } topPosts(count: 2) { pid title author { name } } }"#;

/// Two gateways over one Redis (`redis` = `["--redis", URL]` or `["--redis-cluster",
/// SEEDS]`, kept running by the caller) with `--storage storage`: B answers from what A
/// stored, and sees A's mutation (layered: through the invalidation message).
pub async fn shared_cache_across_two_gateways(storage: &str, redis: [&str; 2]) {
    let (user, post) = (
        Server::start(user_router()).await,
        Server::start(post_router()).await,
    );
    // A long L1 ttl: only the invalidation message can make B's L1 fresh (the redis
    // storage has no L1, and refuses --l1-ttl).
    let mut args = vec!["--ttl", "10", "--storage", storage, redis[0], redis[1]];
    if storage == "layered" {
        args.extend(["--l1-ttl", "60"]);
    }
    let a = Gateway::start(&user, &post, &args).await;
    let b = Gateway::start(&user, &post, &args).await;

    let first = a.query(READ).await;
    assert_eq!(first["data"]["getPost"]["title"], "Post 1", "{first}");
    let before = subgraph_requests(&user, &post).await;
    let through_b = b.query(READ).await;
    assert_eq!(through_b, first);
    assert_eq!(
        subgraph_requests(&user, &post).await,
        before,
        "{storage}: gateway B answered from the shared cache without the subgraphs"
    );

    if storage == "layered" {
        // B must listen before A publishes.
        let deadline = Instant::now() + Duration::from_secs(5);
        while b.metric("gateway_cache_invalidation_subscribed").await < 1.0 {
            assert!(Instant::now() < deadline, "B never subscribed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let renamed = a
        .query(r#"mutation { updatePostTitle(pid: "p1", title: "Renamed") { pid title } }"#)
        .await;
    assert_eq!(renamed["data"]["updatePostTitle"]["title"], "Renamed");
    // Redis is invalidated before A answers; B's L1 hears of it over pub/sub, which
    // is asynchronous: allow it a bounded moment.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let after = b.query(READ).await;
        let fresh = after["data"]["getPost"]["title"] == "Renamed"
            && after["data"]["topPosts"][0]["title"] == "Renamed";
        if fresh {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{storage}: B still serves the old title: {after}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if storage == "layered" {
        assert!(
            b.metric("gateway_cache_invalidation_messages_total{direction=\"received\"}")
                .await
                >= 1.0
        );
    }
}

/// Through a gateway over `redis`: getPost lives 200 ms, topPosts a minute, so the
/// reference sets Post:p1 and Post:p2 outlive getPost's entries and keep naming them
/// until a collection. Returns once getPost's entries have expired.
pub async fn store_for_gc(user: &Server, post: &Server, redis: [&str; 2]) {
    {
        let policy = PolicyFile::new("redis-gc", "[policy.\"Query.getPost\"]\nttl = 0.2\n");
        let args = [
            "--ttl",
            "60",
            "--policy",
            &policy.0,
            "--storage",
            "redis",
            redis[0],
            redis[1],
        ];
        let gw = Gateway::start(user, post, &args).await;
        for q in [
            r#"{ getPost(pid: "p1") { pid title } }"#,
            r#"{ getPost(pid: "p2") { pid title } }"#,
            r#"{ topPosts(count: 2) { pid title } }"#,
        ] {
            gw.query(q).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
}

/// `gateway redis-gc <redis> <extra…>`, which must succeed; its report.
pub fn redis_gc(redis: [&str; 2], extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["redis-gc", redis[0], redis[1]])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
