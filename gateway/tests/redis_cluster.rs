//! `--redis-cluster` through real processes: gateway processes (this crate's binary)
//! over a three-master Redis Cluster that each test starts on free ports and stops by
//! PID (`local-redis-cluster`); the subgraphs run in this process. Without
//! `redis-server` and `redis-cli` installed these tests fail and say so. The checks
//! shared with the single-Redis tests are in `common::shared_cache`.

mod common;

use std::process::Command;

use common::shared_cache::{
    redis_gc, shared_cache_across_two_gateways, store_for_gc, subgraph_requests,
};
use common::{post_router, user_router, GatewayProcess as Gateway, Server};
use local_redis_cluster::LocalCluster;

/// The seed query of experiments/seed.toml.
const SEED: &str = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";

#[tokio::test]
async fn the_seed_query_is_answered_from_a_cluster_with_keys_on_every_master() {
    let (user, post) = (
        Server::start(user_router()).await,
        Server::start(post_router()).await,
    );
    let cluster = LocalCluster::start();
    let seeds = cluster.seeds();
    let args = [
        "--ttl",
        "10",
        "--storage",
        "redis",
        "--redis-cluster",
        &seeds,
    ];
    let a = Gateway::start(&user, &post, &args).await;
    let b = Gateway::start(&user, &post, &args).await;

    let first = a.query(SEED).await;
    assert_eq!(first["data"]["me"]["id"], "u1", "{first}");
    // More fields, more entries and reference sets to spread.
    for pid in ["p1", "p2", "p3"] {
        a.query(&format!(r#"{{ getPost(pid: "{pid}") {{ pid title }} }}"#))
            .await;
    }
    let before = subgraph_requests(&user, &post).await;
    for _ in 0..5 {
        assert_eq!(
            b.query(SEED).await,
            first,
            "B answers from the shared cluster"
        );
    }
    assert_eq!(
        subgraph_requests(&user, &post).await,
        before,
        "no subgraph was asked for B's seed queries"
    );
    let sizes = cluster.dbsizes();
    assert!(
        sizes.iter().all(|&n| n > 0),
        "keys on every master: {sizes:?}"
    );
    assert_eq!(b.metric("gateway_redis_errors_total").await, 0.0);
    assert!(b.metric("gateway_redis_keys_read_total").await >= 3.0);
}

#[tokio::test]
async fn two_gateways_share_a_cluster_and_see_each_others_mutations() {
    let cluster = LocalCluster::start();
    shared_cache_across_two_gateways("redis", ["--redis-cluster", &cluster.seeds()]).await;
}

#[tokio::test]
async fn layered_gateways_on_a_cluster_drop_each_others_l1_on_a_mutation() {
    let cluster = LocalCluster::start();
    shared_cache_across_two_gateways("layered", ["--redis-cluster", &cluster.seeds()]).await;
}

#[tokio::test]
async fn redis_gc_walks_every_master_of_a_cluster() {
    let (user, post) = (
        Server::start(user_router()).await,
        Server::start(post_router()).await,
    );
    let cluster = LocalCluster::start();
    let seeds = cluster.seeds();
    let redis = ["--redis-cluster", seeds.as_str()];
    store_for_gc(&user, &post, redis).await;
    let report = redis_gc(redis, &["--strict"]);
    assert!(
        report.contains("strict")
            && report.contains("scanned 2 reference sets with 4 members")
            && report.contains("removed 2 members")
            && report.contains("cursor 0"),
        "{report}"
    );
    // Lazy steps walk the masters one by one: the cursor names the next master until
    // the pass ends (bounded).
    let mut cursor = "0".to_string();
    for step in 0.. {
        assert!(step < 100, "the lazy pass ends");
        let text = redis_gc(redis, &["--cursor", &cursor]);
        assert!(text.contains("removed 0 members"), "{text}");
        cursor = text
            .split("cursor ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap()
            .to_string();
        if cursor == "0" {
            assert!(step >= 2, "three masters, one step each at least");
            break;
        }
    }
}

#[test]
fn cluster_flags_that_do_not_fit_are_refused_by_name() {
    let seeds = "redis://127.0.0.1:1,redis://127.0.0.1:2";
    for (args, needle) in [
        (
            vec![
                "--ttl",
                "10",
                "--storage",
                "redis",
                "--redis",
                "redis://127.0.0.1:3",
                "--redis-cluster",
                seeds,
            ],
            "--redis and --redis-cluster: give one of them",
        ),
        (
            vec!["--ttl", "10", "--redis-cluster", seeds],
            "--redis-cluster is used only with --storage redis or layered",
        ),
        (
            vec!["--storage", "layered", "--redis-cluster", seeds],
            "give --ttl or --policy too",
        ),
        (
            vec![
                "--ttl",
                "10",
                "--storage",
                "redis",
                "--redis-cluster",
                "redis://127.0.0.1:1,http://x:2",
            ],
            "--redis-cluster",
        ),
        (
            vec![
                "--ttl",
                "10",
                "--storage",
                "redis",
                "--redis-cluster",
                "redis://127.0.0.1:1/3",
            ],
            "a cluster has no database number",
        ),
        (
            vec!["--ttl", "10", "--storage", "redis", "--redis-cluster", ""],
            "is not redis://HOST:PORT",
        ),
        (
            vec!["--ttl", "10", "--storage", "layered"],
            "needs --redis URL or --redis-cluster URL[,URL...]",
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
    let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args([
            "redis-gc",
            "--redis",
            "redis://127.0.0.1:1",
            "--redis-cluster",
            seeds,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--redis-cluster"));
}
