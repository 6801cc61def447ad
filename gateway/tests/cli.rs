//! The gateway binary's flags, through the process: what each accepts, and what it
//! refuses with a message naming the flag.

mod common;

use std::process::Command;

use common::{post_router, user_router, GatewayProcess, Server};

#[tokio::test]
async fn invalidation_takes_on_and_off() {
    let (user, post) = (
        Server::start(user_router()).await,
        Server::start(post_router()).await,
    );
    let read = r#"{ getPost(pid: "p1") { title } }"#;
    let write = |title: &str| {
        format!(r#"mutation {{ updatePostTitle(pid: "p1", title: "{title}") {{ pid }} }}"#)
    };
    let on = GatewayProcess::start(&user, &post, &["--ttl", "3600", "--invalidation", "on"]).await;
    on.query(read).await;
    on.query(&write("A")).await;
    assert_eq!(on.query(read).await["data"]["getPost"]["title"], "A");
    let off =
        GatewayProcess::start(&user, &post, &["--ttl", "3600", "--invalidation", "off"]).await;
    off.query(read).await;
    off.query(&write("B")).await;
    // Kept until its ttl: the write is not seen through this gateway.
    assert_eq!(off.query(read).await["data"]["getPost"]["title"], "A");
    assert_eq!(
        on.query(read).await["data"]["getPost"]["title"],
        "A",
        "on's entry was refreshed by its own write only"
    );
}

#[test]
fn a_bad_switch_value_is_refused_by_name() {
    let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args([
            "--subgraph",
            "a=http://127.0.0.1:1/graphql",
            "--invalidation",
            "maybe",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--invalidation") && stderr.contains("expected on or off"),
        "{stderr}"
    );
}

#[test]
fn bad_limits_are_refused_by_name() {
    let refused = |args: &[&str], expected: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
            .args(["--subgraph", "post=http://127.0.0.1:1/graphql"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    };
    refused(
        &["--subgraph-timeout", "user=1s"],
        "--subgraph-timeout user=1s: no subgraph is named \"user\"",
    );
    refused(
        &["--subgraph-timeout", "post=soon"],
        "--subgraph-timeout post=soon",
    );
    refused(
        &["--subgraph-connect-timeout", "0s"],
        "must be more than zero",
    );
    refused(
        &["--breaker-error-ratio", "post=2"],
        "--breaker-error-ratio post=2",
    );
    refused(&["--breaker-probes", "many"], "--breaker-probes many");
    refused(&["--drain-timeout", "forever"], "--drain-timeout");
    refused(&["--max-connections", "lots"], "--max-connections");
    refused(&["--worker-threads", "0"], "--worker-threads");
}

#[tokio::test]
async fn every_worker_thread_count_gives_the_same_answers_and_drains() {
    let (user, post) = (
        Server::start(user_router()).await,
        Server::start(post_router()).await,
    );
    let seed = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";
    let mut answers = Vec::new();
    for threads in [None, Some("1"), Some("3")] {
        let mut args = vec!["--ttl", "0"];
        args.extend(threads.iter().flat_map(|n| ["--worker-threads", n]));
        let mut gateway = GatewayProcess::start(&user, &post, &args).await;
        // Identical queries at once, so that they join each other's fetches (on one
        // thread, too).
        let replies = futures::future::join_all((0..20).map(|_| gateway.query(seed))).await;
        assert!(replies.iter().all(|r| *r == replies[0]), "{threads:?}");
        answers.push(replies[0].clone());
        assert_eq!(gateway.terminate().await.code(), Some(0), "{threads:?}");
    }
    assert_eq!(answers[0]["data"]["me"]["topPosts"][1]["pid"], "p3");
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
}
