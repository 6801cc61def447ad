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

/// The gateway started over one subgraph with `args` exits 2, and says `expected`.
fn refused(args: &[&str], expected: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["--subgraph", "post=http://127.0.0.1:1/graphql"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(expected), "{args:?}: {stderr}");
}

#[test]
fn bad_request_strategies_are_refused_by_name() {
    for (args, expected) in [
        (
            &["--request-strategy", "everything"][..],
            "no request strategy of that name",
        ),
        (
            &["--request-strategy", "response:ttl=0"],
            "ttl must be positive",
        ),
        (
            &["--request-strategy", "response:ttl=abc"],
            "is not a number of seconds",
        ),
        (
            &["--request-strategy", "response:size=3"],
            "no parameter \"size\"",
        ),
        (
            &["--request-strategy", "coalesce:ttl=3"],
            "takes no parameters",
        ),
        // The response store needs a lifetime: its own, or --ttl's.
        (&["--request-strategy", "response"], "give its ttl"),
    ] {
        refused(args, "--request-strategy");
        refused(args, expected);
    }
}

#[test]
fn bad_limits_are_refused_by_name() {
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
    refused(&["--shards", "0"], "--shards");
    refused(
        &["--shards", "2", "--worker-threads", "2"],
        "cannot be used with",
    );
    // The operation limits (docs/gateway.md, "Limits").
    refused(&["--max-tokens", "0"], "--max-tokens");
    refused(&["--max-depth", "0"], "--max-depth");
    refused(&["--max-fields", "many"], "--max-fields");
    refused(&["--max-aliases", "some"], "--max-aliases");
    refused(&["--max-cost", "cheap"], "--max-cost");
    refused(&["--max-subgraph-requests", "0"], "--max-subgraph-requests");
    refused(&["--max-answer-bytes", "0"], "--max-answer-bytes");
    refused(&["--introspection", "maybe"], "--introspection");
    refused(&["--require-persisted"], "--persisted-documents");
    refused(&["--apq-cache-bytes", "lots"], "--apq-cache-bytes");
    let missing = std::env::temp_dir().join("gateway-cli-no-such-manifest.json");
    let missing = missing.to_str().unwrap();
    refused(&["--persisted-documents", missing], "--persisted-documents");
    let bad = std::env::temp_dir().join(format!(
        "gateway-cli-bad-manifest-{}.json",
        std::process::id()
    ));
    std::fs::write(&bad, r#"{"q1": "{ me { "}"#).unwrap();
    refused(
        &["--persisted-documents", bad.to_str().unwrap()],
        "the document of id \"q1\" does not parse",
    );
    std::fs::remove_file(&bad).unwrap();
}

#[tokio::test]
async fn every_runtime_gives_the_same_answers_and_drains() {
    let (user, post) = (
        Server::start(user_router()).await,
        Server::start(post_router()).await,
    );
    let seed = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";
    let mut answers = Vec::new();
    // The default (a shard per core), one thread, the pool, and three shards.
    for threads in [
        None,
        Some(("--worker-threads", "1")),
        Some(("--worker-threads", "3")),
        Some(("--shards", "3")),
    ] {
        let mut args = vec!["--ttl", "0"];
        args.extend(threads.iter().flat_map(|(flag, n)| [*flag, *n]));
        let mut gateway = GatewayProcess::start(&user, &post, &args).await;
        // Identical queries at once, so that they join each other's fetches (on one
        // thread, too, and across shards).
        let replies = futures::future::join_all((0..20).map(|_| gateway.query(seed))).await;
        assert!(replies.iter().all(|r| *r == replies[0]), "{threads:?}");
        answers.push(replies[0].clone());
        assert_eq!(gateway.terminate().await.code(), Some(0), "{threads:?}");
    }
    assert_eq!(answers[0]["data"]["me"]["topPosts"][1]["pid"], "p3");
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
}

/// The gateway binary's exit code and standard error for `args` (after a subgraph
/// that is never reached).
fn gateway_refusal(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["--subgraph", "post=http://127.0.0.1:1/graphql"])
        .args(["--startup-timeout-secs", "0"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn flags_that_would_cancel_another_are_refused_naming_both() {
    let file = |name: &str, toml: &str| common::shared_cache::PolicyFile::new(name, toml);
    let skip = file("skip", "[policy.\"Query.getPost\"]\nskip = true\nttl = 5\n");
    let invalidate = file(
        "invalidate",
        "[policy.\"Mutation.createUser\"]\ninvalidate = [\"Feed:top\"]\n",
    );
    let references = file(
        "references",
        "[policy.\"Query.topPosts\"]\nreferences = [\"Feed:top\"]\n",
    );
    let field_ttl = file(
        "field-ttl",
        "[policy.\"Query.getPost\"]\nttl = 0\nstrategies = [\"second-hit\"]\n",
    );
    let field_list = file(
        "field-list",
        "[policy.\"Query.getPost\"]\nstrategies = [\"early-refresh:beta=2\"]\n",
    );
    let zero_field = file("zero-field", "[policy.\"Query.me\"]\nttl = 0\n");
    let opted_out = file(
        "opted-out",
        "[policy.\"Query.me\"]\nttl = 0\nstrategies = []\n",
    );
    let layered_field = file(
        "layered-field",
        "[policy.\"Query.getPost\"]\nstorage = \"layered\"\n",
    );
    let redis = ["--storage", "redis", "--redis", "redis://127.0.0.1:1"];
    for (args, says) in [
        // Strategies with nothing to act on at ttl 0, or undone by a later one.
        (
            &["--ttl", "0", "--strategy", "second-hit"][..],
            &[
                "--ttl 0 and --strategy second-hit",
                "decides which values are kept",
            ][..],
        ),
        (
            &["--ttl", "0", "--strategy", "early-refresh"],
            &["--ttl 0 and --strategy early-refresh", "acts on fresh hits"],
        ),
        (
            &["--ttl", "0", "--stale", "5", "--strategy", "ttl-jitter"],
            &[
                "--ttl 0 and --strategy ttl-jitter",
                "list origin-ttl before it",
            ],
        ),
        (
            &["--policy", &field_list.0, "--strategy", "second-hit"],
            &["--ttl 0 and --strategy second-hit"],
        ),
        (
            &[
                "--ttl",
                "10",
                "--strategy",
                "ttl-jitter",
                "--strategy",
                "origin-ttl",
            ],
            &[
                "--strategy ttl-jitter and --strategy origin-ttl",
                "list ttl-jitter after origin-ttl",
            ],
        ),
        (
            &["--ttl", "10", "--policy", &field_ttl.0],
            &["Query.getPost.ttl = 0 and Query.getPost.strategies [\"second-hit\"]"],
        ),
        (
            &[
                "--ttl",
                "10",
                "--strategy",
                "early-refresh",
                "--policy",
                &zero_field.0,
            ],
            &[
                "Query.me.ttl = 0 and --strategy early-refresh",
                "give Query.me strategies = [] to run none",
            ],
        ),
        (
            &["--ttl", "0", "--policy", &field_list.0],
            &["--ttl 0 and Query.getPost.strategies [\"early-refresh:beta=2\"]"],
        ),
        // Policy fields that cancel each other, or that a flag cancels.
        (
            &["--ttl", "10", "--policy", &skip.0],
            &["Query.getPost.skip = true and Query.getPost.ttl"],
        ),
        (
            &[
                "--ttl",
                "10",
                "--invalidation",
                "off",
                "--policy",
                &invalidate.0,
            ],
            &[
                "--invalidation off and --policy",
                "Mutation.createUser.invalidate",
            ],
        ),
        (
            &[
                "--ttl",
                "10",
                "--invalidation",
                "off",
                "--policy",
                &references.0,
            ],
            &[
                "--invalidation off and --policy",
                "Query.topPosts.references",
            ],
        ),
        // A cache flag without a cache, or without the storage it sets.
        (
            &["--stale", "5"],
            &["--stale configures the cache: give --ttl or --policy"],
        ),
        (
            &["--invalidation", "off"],
            &["--invalidation configures the cache"],
        ),
        (
            &["--cache-max-entries", "5", "--cache-report-interval", "1"],
            &["--cache-max-entries and --cache-report-interval configure the cache"],
        ),
        (
            &["--ttl", "1", "--l1-ttl", "3", "--l1-max-entries", "9"],
            &[
                "--l1-ttl and --l1-max-entries set the layered storage's in-process L1",
                "--storage layered",
            ],
        ),
        (
            &["--ttl", "1", "--redis-autopipeline", "false"],
            &["--redis-autopipeline is used only with --storage redis or layered"],
        ),
        (
            &["--ttl", "1", "--redis-timeout-ms", "30"],
            &["--redis-timeout-ms is used only with --storage redis or layered"],
        ),
        (
            &[&["--ttl", "1", "--cache-max-entries", "5"][..], &redis[..]].concat(),
            &[
                "--cache-max-entries bounds the memory store",
                "--storage redis",
            ],
        ),
        (
            &[&["--ttl", "1", "--cache-eviction", "lru"][..], &redis[..]].concat(),
            &[
                "--cache-eviction bounds the memory store",
                "--storage redis",
            ],
        ),
        // Upstream limits.
        (
            &["--upstream-timeout-ms", "100", "--subgraph-timeout", "1s"],
            &["--upstream-timeout-ms and --subgraph-timeout 1s"],
        ),
        (
            &["--breaker-error-ratio", "0", "--breaker-window", "30s"],
            &["--breaker-window 30s", "--breaker-error-ratio 0"],
        ),
        (
            &[
                "--breaker-error-ratio",
                "post=0",
                "--breaker-min-requests",
                "post=5",
            ],
            &[
                "--breaker-min-requests post=5",
                "post's error-ratio rule is off",
            ],
        ),
        (
            &[
                "--breaker-failures",
                "0",
                "--breaker-error-ratio",
                "0",
                "--breaker-open-for",
                "2s",
            ],
            &[
                "--breaker-open-for 2s",
                "--breaker-failures 0 and --breaker-error-ratio 0",
            ],
        ),
        (
            &[
                "--breaker-failures",
                "post=0",
                "--breaker-error-ratio",
                "post=0",
                "--breaker-probes",
                "post=2",
            ],
            &["--breaker-probes post=2", "post's breaker never opens"],
        ),
        (
            &[
                "--subgraph-timeout",
                "1s",
                "--subgraph-connect-timeout",
                "5s",
            ],
            &[
                "--subgraph-connect-timeout 5s",
                "longer than post's request timeout",
            ],
        ),
    ] {
        let (code, stderr) = gateway_refusal(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        for needle in says {
            assert!(stderr.contains(needle), "{args:?}: {needle:?} in {stderr}");
        }
    }
    // The sensible neighbours pass the checks (and stop only at the unreachable
    // subgraph, exit code 1).
    for args in [
        &["--ttl", "0", "--strategy", "origin-ttl"][..],
        &["--ttl", "0", "--strategy", "stale-if-error"],
        &[
            "--ttl",
            "0",
            "--strategy",
            "origin-ttl",
            "--strategy",
            "second-hit",
            "--strategy",
            "early-refresh",
            "--strategy",
            "ttl-jitter",
        ],
        &["--ttl", "0", "--stale", "5", "--strategy", "second-hit"],
        &[
            "--ttl",
            "10",
            "--strategy",
            "early-refresh",
            "--policy",
            &opted_out.0,
        ],
        &[
            "--ttl",
            "10",
            "--strategy",
            "origin-ttl",
            "--strategy",
            "ttl-jitter",
        ],
        &[
            "--ttl",
            "1",
            "--policy",
            &layered_field.0,
            "--redis",
            "redis://127.0.0.1:1",
            "--l1-ttl",
            "3",
            "--cache-max-entries",
            "5",
        ],
        &[
            "--breaker-error-ratio",
            "0",
            "--breaker-error-ratio",
            "post=0.2",
            "--breaker-window",
            "30s",
        ],
        &[
            "--subgraph-timeout",
            "1s",
            "--subgraph-connect-timeout",
            "500ms",
        ],
        &[
            "--upstream-timeout-ms",
            "100",
            "--subgraph-timeout",
            "post=1s",
        ],
    ] {
        let (code, stderr) = gateway_refusal(args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("did not answer"), "{args:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_the_schema_makes_do_nothing_are_refused() {
    let (user, post) = (
        Server::start(user_router()).await,
        Server::start(post_router()).await,
    );
    for (name, toml, says) in [
        (
            "typo",
            "[policy.\"Query.getPots\"]\nttl = 5\n",
            "the composed schema has no field Query.getPots",
        ),
        (
            "mutation-ttl",
            "[policy.\"Mutation.createUser\"]\nttl = 5\n",
            "Mutation is the mutation type, and mutations are never cached",
        ),
        (
            "query-invalidate",
            "[policy.\"Query.getPost\"]\ninvalidate = [\"Post:*\"]\n",
            "Query.getPost.invalidate: only a mutation's policy invalidates",
        ),
        (
            "entity-args",
            "[policy.\"User.topPosts\"]\nkey = { args = [\"count\"] }\n",
            "User.topPosts.key.args: only root fields",
        ),
        (
            "unknown-arg",
            "[policy.\"Query.topPosts\"]\nkey = { args = [\"cnt\"] }\n",
            "Query.topPosts has no argument \"cnt\"",
        ),
    ] {
        let policy = common::shared_cache::PolicyFile::new(name, toml);
        let args = [
            "--subgraph".to_string(),
            format!("user={}", user.url()),
            "--subgraph".to_string(),
            format!("post={}", post.url()),
            "--ttl".to_string(),
            "10".to_string(),
            "--policy".to_string(),
            policy.0.clone(),
        ];
        let out = tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_gateway"))
                .args(&args)
                .args(["--listen", "127.0.0.1:0"])
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains(says), "{name}: {stderr}");
        assert!(
            stderr.contains(&policy.0),
            "{name}: names the file: {stderr}"
        );
    }
    // The documented example passes.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/policy.example.toml");
    let gateway = GatewayProcess::start(&user, &post, &["--ttl", "10", "--policy", example]).await;
    let answer = gateway.query("{ topPosts(count: 1) { pid } }").await;
    assert_eq!(answer["data"]["topPosts"][0]["pid"], "p1", "{answer}");
}
