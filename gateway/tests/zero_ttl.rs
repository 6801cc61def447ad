//! Each cache strategy at `--ttl 0`, through real HTTP against real subgraphs: the two
//! that act on their own run there (`origin-ttl` keeps what the subgraph allows,
//! `stale-if-error` keeps the last good answer for an outage), the three that need a
//! lifetime to act on run with `origin-ttl` beside them, concurrent identical calls
//! still share one fetch, and `/metrics` counts every decision. The three alone at
//! `--ttl 0` are refused at start-up (in-process here; the binary's refusals are in
//! `cli.rs`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::strategies::{decisions, posts, posts_asked, users, with_strategies, POST};
use common::{gateway_over, post_router, user_router, Lab, Server};
use gateway::caching::requests::RequestStrategy;
use serde_json::{json, Value};
use subgraph_host::cli::CacheControl;
use subgraph_host::faults::{Delay, FaultPlan};

fn fresh() -> Value {
    json!({"data": {"getPost": {"pid": "p1", "title": "Post 1"}}})
}

/// `gateway_cache_<counter>_total` of `Query.getPost`.
fn counted(text: &str, counter: &str) -> u64 {
    common::sample(
        text,
        &format!("gateway_cache_{counter}_total{{namespace=\"Query.getPost\"}}"),
    )
    .unwrap_or(0.0) as u64
}

#[tokio::test]
async fn origin_ttl_at_ttl_zero_keeps_what_the_subgraph_allows_and_nothing_else() {
    // The schema's hints: Post 60 s, `me` private.
    let lab = Lab::start_with(|c| c.cache = with_strategies(0.0, &["origin-ttl"])).await;
    let (users_before, posts_before) = lab.subgraph_requests().await;
    for _ in 0..3 {
        assert_eq!(lab.query(POST).await, fresh());
    }
    assert_eq!(
        posts_asked(&lab).await - posts_before,
        1,
        "max-age=60 at --ttl 0: kept"
    );
    for _ in 0..2 {
        assert_eq!(lab.query("{ me { id } }").await["data"]["me"]["id"], "u1");
    }
    assert_eq!(
        lab.subgraph_requests().await.0 - users_before,
        2,
        "private: never kept"
    );
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(
        decisions(&text, "Query.getPost", "origin-ttl", "max_age"),
        1,
        "{text}"
    );
    assert_eq!(counted(&text, "hits"), 2, "{text}");
    assert_eq!(
        decisions(&text, "Query.me", "origin-ttl", "private"),
        2,
        "{text}"
    );
    // No header at all: the fallback, ttl 0, keeps nothing.
    let bare = Lab::start_over(
        users(CacheControl::Off),
        posts(FaultPlan::default(), CacheControl::Off),
        |c| c.cache = with_strategies(0.0, &["origin-ttl"]),
    )
    .await;
    let before = posts_asked(&bare).await;
    bare.query(POST).await;
    bare.query(POST).await;
    assert_eq!(posts_asked(&bare).await - before, 2, "no header: not kept");
    let text = bare.metrics(&bare.gateway).await;
    assert_eq!(
        decisions(&text, "Query.getPost", "origin-ttl", "no_header"),
        2,
        "{text}"
    );
}

#[tokio::test]
async fn stale_if_error_at_ttl_zero_asks_every_time_and_answers_an_outage_with_the_last_answer() {
    let mut lab =
        Lab::start_with(|c| c.cache = with_strategies(0.0, &["stale-if-error:window=60s"])).await;
    let before = posts_asked(&lab).await;
    for _ in 0..2 {
        assert_eq!(lab.query(POST).await, fresh());
    }
    assert_eq!(posts_asked(&lab).await - before, 2, "every call fetches");
    // The posts subgraph goes away: the last good answer, flagged.
    lab.stop_post().await;
    let answer = lab.query(POST).await;
    assert_eq!(answer["data"], fresh()["data"], "{answer}");
    assert!(answer.get("errors").is_none(), "{answer}");
    assert_eq!(
        answer["extensions"]["staleIfError"][0]["path"],
        json!(["getPost"]),
        "{answer}"
    );
    // A post never fetched has nothing to fall back on.
    let other = lab.query(r#"{ getPost(pid: "p2") { pid } }"#).await;
    assert!(other["errors"].is_array(), "{other}");
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(
        decisions(&text, "Query.getPost", "stale-if-error", "served_stale"),
        1,
        "{text}"
    );
    assert_eq!(counted(&text, "hits"), 0, "{text}");
}

#[tokio::test]
async fn an_answer_served_stale_during_an_outage_is_never_stored_by_the_response_strategy() {
    // The response store keeps answers 2 s; stale-if-error keeps the last good post 60 s.
    let mut lab = Lab::start_with(|c| {
        c.cache = with_strategies(0.0, &["stale-if-error:window=60s"]);
        c.request_strategy = Some(RequestStrategy::parse("response:ttl=2").unwrap());
    })
    .await;
    assert_eq!(lab.query(POST).await, fresh());
    // Past the stored answer's 2 s, the posts subgraph goes away: the last good post,
    // flagged as served stale.
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let addr = lab.stop_post().await;
    let during = lab.query(POST).await;
    assert_eq!(during["data"], fresh()["data"], "{during}");
    assert!(during["extensions"]["staleIfError"].is_array(), "{during}");
    // Back at once: the next answer is fetched fresh, not the one written meanwhile.
    let _back = Server::start_on(addr, post_router()).await;
    let after = lab.query(POST).await;
    assert_eq!(
        after,
        fresh(),
        "the stale answer was stored and served again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn at_ttl_zero_a_strategy_keeps_concurrent_identical_calls_on_one_fetch() {
    // Each post fetch takes 300 ms: twenty identical queries sent at once overlap it.
    for specs in [&[][..], &["stale-if-error"][..], &["origin-ttl"][..]] {
        let lab = Arc::new(
            Lab::start_delayed(Duration::from_millis(300), |c| {
                c.cache = with_strategies(0.0, specs)
            })
            .await,
        );
        let before = posts_asked(&lab).await;
        let crowd = (0..20).map(|_| {
            let lab = Arc::clone(&lab);
            tokio::spawn(async move { lab.query(POST).await })
        });
        for answer in futures::future::join_all(crowd).await {
            assert_eq!(answer.unwrap(), fresh(), "{specs:?}");
        }
        let text = lab.metrics(&lab.gateway).await;
        let asked = posts_asked(&lab).await - before;
        // Twenty callers, one leader per fetch: those that arrived while a fetch was
        // in flight joined it.
        assert_eq!(
            counted(&text, "misses") + counted(&text, "dedupes") + counted(&text, "hits"),
            20,
            "{specs:?}: {text}"
        );
        assert_eq!(asked, counted(&text, "misses"), "{specs:?}: {text}");
        assert!(
            counted(&text, "dedupes") > 0 && asked < 20,
            "{specs:?}: {asked} fetches for 20 identical calls: {text}"
        );
    }
}

#[tokio::test]
async fn second_hit_and_ttl_jitter_at_ttl_zero_act_on_what_origin_ttl_keeps() {
    let lab = Lab::start_with(|c| {
        c.cache = with_strategies(0.0, &["origin-ttl", "second-hit", "ttl-jitter"])
    })
    .await;
    let mut asked = Vec::new();
    for _ in 0..3 {
        let before = posts_asked(&lab).await;
        assert_eq!(lab.query(POST).await, fresh());
        asked.push(posts_asked(&lab).await - before);
    }
    assert_eq!(asked, [1, 1, 0], "kept on the second miss, then a hit");
    let text = lab.metrics(&lab.gateway).await;
    for (strategy, decision, n) in [
        ("origin-ttl", "max_age", 2),
        ("second-hit", "refused", 1),
        ("second-hit", "admitted", 1),
        ("ttl-jitter", "adjusted", 1),
    ] {
        assert_eq!(
            decisions(&text, "Query.getPost", strategy, decision),
            n,
            "{strategy}/{decision}: {text}"
        );
    }
}

#[tokio::test]
async fn early_refresh_at_ttl_zero_refreshes_what_origin_ttl_keeps() {
    // The subgraphs say max-age=1 and take 100 ms: with beta 30 nearly every hit asks
    // for a refresh, and the entry is refetched long before it expires.
    let max_age_1 = CacheControl::Fixed("max-age=1".parse().unwrap());
    let slow = FaultPlan {
        delay: Delay::Fixed(Duration::from_millis(100)),
        ..FaultPlan::default()
    };
    let lab = Lab::start_over(users(max_age_1.clone()), posts(slow, max_age_1), |c| {
        c.cache = with_strategies(0.0, &["origin-ttl", "early-refresh:beta=30"])
    })
    .await;
    for _ in 0..20 {
        assert_eq!(lab.query(POST).await, fresh());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let text = lab.metrics(&lab.gateway).await;
    assert!(
        decisions(&text, "Query.getPost", "early-refresh", "early_refresh") >= 1,
        "{text}"
    );
    assert_eq!(counted(&text, "hits"), 19, "{text}");
}

#[tokio::test]
async fn second_hit_early_refresh_and_ttl_jitter_alone_at_ttl_zero_are_refused_before_start_up() {
    let (user, post) = (
        Server::start(user_router()).await,
        Server::start(post_router()).await,
    );
    for (ttl, specs, says) in [
        (
            0.0,
            &["second-hit"][..],
            "second-hit decides which values are kept",
        ),
        (
            0.0,
            &["early-refresh"][..],
            "early-refresh acts on fresh hits",
        ),
        (
            0.0,
            &["ttl-jitter"][..],
            "ttl-jitter changes the ttl it is handed",
        ),
        // At any ttl: origin-ttl after ttl-jitter overwrites its spread.
        (
            10.0,
            &["ttl-jitter", "origin-ttl"][..],
            "list ttl-jitter after origin-ttl",
        ),
    ] {
        let mut config = common::config_over(&user, &post);
        config.cache = with_strategies(ttl, specs);
        let error = match gateway::startup::build_app(&config).await {
            Ok(_) => panic!("{specs:?} at --ttl {ttl} started"),
            Err(e) => e.to_string(),
        };
        assert!(error.contains(says), "{specs:?}: {error}");
        let flags = if specs.len() == 1 {
            format!("--ttl 0 and --strategy {}", specs[0])
        } else {
            "--strategy ttl-jitter and --strategy origin-ttl".to_string()
        };
        assert!(error.starts_with(&flags), "{specs:?}: {error}");
    }
    // With a ttl they start.
    gateway_over(&user, &post, |c| {
        c.cache = with_strategies(1.0, &["second-hit", "early-refresh", "ttl-jitter"])
    })
    .await;
}
