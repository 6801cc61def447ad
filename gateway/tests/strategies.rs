//! Cache strategies through real HTTP against real subgraphs: what each decides, its
//! counters on `/metrics`, and that a strategy which panics or blocks cannot wedge a
//! key. The command line's side (`--strategy`, `gateway strategies`, refusals) is
//! tested through the binary.

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cache_core::strategies::CATALOGUE;
use cache_core::{Admission, Fetched, Lifetime, NamedStrategy, Strategy, StrategyContext};
use common::strategies::{decisions, posts, posts_asked, users, with_strategies, POST};
use common::{cache, gateway_over, metric, metrics_of, Lab, Server};
use gateway::answer::piece::Piece;
use serde_json::{json, Value};
use subgraph_host::cli::CacheControl;
use subgraph_host::faults::{FaultPlan, Outage};

#[tokio::test]
async fn second_hit_stores_a_key_on_its_second_miss() {
    let lab = Lab::start_with(|c| c.cache = with_strategies(60.0, &["second-hit"])).await;
    let expected = json!({"data": {"getPost": {"pid": "p1", "title": "Post 1"}}});
    let mut asked = Vec::new();
    for _ in 0..3 {
        let before = posts_asked(&lab).await;
        assert_eq!(lab.query(POST).await, expected);
        asked.push(posts_asked(&lab).await - before);
    }
    assert_eq!(asked, [1, 1, 0], "kept on the second miss, then a hit");
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(
        decisions(&text, "Query.getPost", "second-hit", "refused"),
        1,
        "{text}"
    );
    assert_eq!(
        decisions(&text, "Query.getPost", "second-hit", "admitted"),
        1,
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn early_refresh_refreshes_before_expiry_and_never_twice_at_once() {
    // Each fetch takes 100 ms; with beta 30 a hit a second before expiry wants a
    // refresh 70% of the time: only the dedupe table keeps 16 clients from asking
    // for 16 at once.
    let lab = Lab::start_delayed(Duration::from_millis(100), |c| {
        c.cache = with_strategies(1.0, &["early-refresh:beta=30"])
    })
    .await;
    let lab = Arc::new(lab);
    assert_eq!(lab.query(POST).await["data"]["getPost"]["pid"], "p1");
    let before = posts_asked(&lab).await;
    let started = Instant::now();
    let until = started + Duration::from_millis(2500);
    let clients = (0..16).map(|_| {
        let lab = Arc::clone(&lab);
        tokio::spawn(async move {
            while Instant::now() < until {
                let answer = lab.query(POST).await;
                assert_eq!(answer["data"]["getPost"]["title"], "Post 1", "{answer}");
            }
        })
    });
    // The posts subgraph never has two requests in progress.
    let sampler = {
        let lab = Arc::clone(&lab);
        tokio::spawn(async move {
            let mut most = 0.0f64;
            while Instant::now() < until {
                let text = lab.metrics(&lab.post).await;
                most = most.max(metric(&text, "subgraph_requests_in_progress").unwrap_or(0.0));
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
            most
        })
    };
    for client in futures::future::join_all(clients).await {
        client.unwrap();
    }
    let most_in_progress = sampler.await.unwrap();
    // Wait for the last refresh to reach post-service before counting: every refresh
    // the gateway started (counted when it starts) has arrived there (counted on
    // arrival). Bounded; a sleep would race a slow machine.
    let mut refreshes = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let text = lab.metrics(&lab.gateway).await;
        refreshes = posts_asked(&lab).await - before;
        if decisions(&text, "Query.getPost", "early-refresh", "early_refresh") == refreshes {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    assert!(
        most_in_progress <= 1.0,
        "{most_in_progress} requests at once"
    );
    // One at a time, each taking 100 ms: never more than one per 100 ms.
    let bound = (elapsed.as_millis() / 100 + 1) as u64;
    assert!(
        refreshes >= 3 && refreshes <= bound,
        "{refreshes} refreshes in {elapsed:?}"
    );
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(
        decisions(&text, "Query.getPost", "early-refresh", "early_refresh"),
        refreshes,
        "{text}"
    );
    assert!(
        decisions(
            &text,
            "Query.getPost",
            "early-refresh",
            "early_refresh_in_flight"
        ) > 0
    );
    // The entry never expired under the clients: after the first call every call was
    // a hit, none waited on a fetch (a dedupe) or got a stale entry.
    for (counter, value) in [("misses", 1), ("dedupes", 0), ("stale", 0)] {
        let line =
            format!("gateway_cache_{counter}_total{{namespace=\"Query.getPost\"}} {value}\n");
        assert!(text.contains(&line), "{line}{text}");
    }
}

#[tokio::test]
async fn stale_if_error_serves_stale_during_an_outage_and_fresh_after_it() {
    // The outage is a posts subgraph that answers every request 503 (an injected
    // outage), put on the healthy one's address when the test says so: no schedule to
    // race on a slow machine.
    let mut lab =
        Lab::start_with(|c| c.cache = with_strategies(0.5, &["stale-if-error:window=30s"])).await;
    // The same subgraphs through a gateway without the strategy, for comparison.
    let plain = gateway_over(&lab.user, &lab.post, |c| c.cache = cache(0.5)).await;
    let http = lab.http.clone();
    let plain_query = |query: &'static str| {
        let http = http.clone();
        let url = plain.url();
        async move {
            http.post(url)
                .json(&json!({ "query": query }))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let fresh = json!({"data": {"getPost": {"pid": "p1", "title": "Post 1"}}});
    assert_eq!(lab.query(POST).await, fresh);
    assert_eq!(plain_query(POST).await, fresh);
    // Both entries expire (ttl 0.5 s), then the outage begins.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let addr = lab.stop_post().await;
    let always_down = FaultPlan {
        outages: vec![Outage {
            start: Duration::ZERO,
            end: Duration::from_secs(3600),
            period: Duration::from_secs(3600),
        }],
        ..FaultPlan::default()
    };
    let outage = Server::start_on(addr, posts(always_down, CacheControl::Schema)).await;
    let answer = lab.query(POST).await;
    assert_eq!(answer["data"], fresh["data"], "{answer}");
    assert!(answer.get("errors").is_none(), "{answer}");
    let note = &answer["extensions"]["staleIfError"][0];
    assert_eq!(note["path"], json!(["getPost"]), "{answer}");
    // Stale for at least the sleep past its ttl, at most the window.
    let stale = note["staleSeconds"].as_f64().unwrap();
    assert!((0.7..30.0).contains(&stale), "{answer}");
    let without = plain_query(POST).await;
    assert!(
        without["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("outage"),
        "{without}"
    );
    assert_eq!(without["data"]["getPost"], Value::Null, "{without}");
    // A key that was never cached has nothing to fall back on.
    let uncached = lab.query(r#"{ getPost(pid: "p2") { pid } }"#).await;
    assert!(uncached["errors"].is_array(), "{uncached}");
    // After the outage: a write goes through and the next read is fresh, unflagged.
    outage.stop().await;
    let _healthy = Server::start_on(addr, common::post_router()).await;
    let write = lab
        .query(r#"mutation { updatePostTitle(pid: "p1", title: "After") { pid title } }"#)
        .await;
    assert_eq!(
        write["data"]["updatePostTitle"]["title"], "After",
        "{write}"
    );
    let after = lab.query(POST).await;
    assert_eq!(
        after,
        json!({"data": {"getPost": {"pid": "p1", "title": "After"}}})
    );
    let text = lab.metrics(&lab.gateway).await;
    assert!(
        decisions(&text, "Query.getPost", "stale-if-error", "served_stale") >= 1,
        "{text}"
    );
    assert!(
        metric(
            &text,
            "gateway_cache_errors_total{namespace=\"Query.getPost\"}"
        )
        .unwrap_or(0.0)
            >= 1.0,
        "the failed fetches are still counted: {text}"
    );
}

#[tokio::test]
async fn origin_ttl_follows_the_subgraphs_cache_hints() {
    // The schema's hints: Post 60 s, User 10 s, `me` private.
    let lab = Lab::start_with(|c| c.cache = with_strategies(600.0, &["origin-ttl"])).await;
    let (users_before, posts_before) = lab.subgraph_requests().await;
    for _ in 0..2 {
        lab.query(POST).await;
    }
    assert_eq!(
        posts_asked(&lab).await - posts_before,
        1,
        "max-age=60: kept"
    );
    // `me` is private and its key is shared by every anonymous caller: never kept.
    for _ in 0..2 {
        assert_eq!(
            lab.query("{ me { id name } }").await["data"]["me"]["id"],
            "u1"
        );
    }
    assert_eq!(
        lab.subgraph_requests().await.0 - users_before,
        2,
        "private: asked every time"
    );
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(
        decisions(&text, "Query.getPost", "origin-ttl", "max_age"),
        1,
        "{text}"
    );
    assert_eq!(
        decisions(&text, "Query.me", "origin-ttl", "private"),
        2,
        "{text}"
    );
    assert_eq!(
        decisions(&text, "Query.me", "origin-ttl", "refused"),
        2,
        "{text}"
    );
}

#[tokio::test]
async fn origin_ttl_keeps_private_answers_per_caller_only() {
    let policies = common::me_keyed_by_caller();
    let lab = Lab::start_with(|c| {
        let mut settings = with_strategies(600.0, &["origin-ttl"]).unwrap();
        settings.policies = policies;
        c.cache = Some(settings);
    })
    .await;
    let users_before = lab.subgraph_requests().await.0;
    let me = |user: &'static str| {
        let auth = format!("Bearer {user}");
        let lab = &lab;
        async move {
            lab.query_with(
                "{ me { id name } }",
                Value::Null,
                &[("authorization", &auth)],
            )
            .await
        }
    };
    assert_eq!(me("u1").await["data"]["me"]["name"], "John");
    assert_eq!(
        me("u2").await["data"]["me"]["name"],
        "Jane",
        "never u1's entry"
    );
    assert_eq!(me("u1").await["data"]["me"]["name"], "John");
    assert_eq!(me("u2").await["data"]["me"]["name"], "Jane");
    assert_eq!(
        lab.subgraph_requests().await.0 - users_before,
        2,
        "each caller's own entry, kept"
    );
    let text = lab.metrics(&lab.gateway).await;
    assert_eq!(
        decisions(&text, "Query.me", "origin-ttl", "private_per_caller"),
        2,
        "{text}"
    );
}

#[tokio::test]
async fn origin_ttl_honours_no_store_and_s_maxage_and_short_max_age() {
    for (header, kept_after_one_second, decision) in [
        ("no-store", None, "no_store"),
        ("max-age=60, no-cache", None, "no_cache"),
        ("max-age=1", Some(false), "max_age"),
        ("max-age=0, s-maxage=1", Some(false), "s_maxage"),
        ("max-age=1, s-maxage=60", Some(true), "s_maxage"),
    ] {
        let value = CacheControl::Fixed(header.parse().unwrap());
        let lab = Lab::start_over(
            users(value.clone()),
            posts(FaultPlan::default(), value),
            |c| c.cache = with_strategies(600.0, &["origin-ttl"]),
        )
        .await;
        let before = posts_asked(&lab).await;
        lab.query(POST).await;
        lab.query(POST).await;
        let stored = kept_after_one_second.is_some();
        assert_eq!(
            posts_asked(&lab).await - before,
            if stored { 1 } else { 2 },
            "{header}"
        );
        if let Some(kept) = kept_after_one_second {
            tokio::time::sleep(Duration::from_millis(1100)).await;
            lab.query(POST).await;
            assert_eq!(
                posts_asked(&lab).await - before,
                if kept { 1 } else { 2 },
                "{header}"
            );
        }
        let text = lab.metrics(&lab.gateway).await;
        assert!(
            decisions(&text, "Query.getPost", "origin-ttl", decision) >= 1,
            "{header}: {text}"
        );
    }
}

/// The panics this file provokes on purpose ("a broken ...") print nothing: under
/// `RUST_BACKTRACE`, printing a backtrace per panic on a loaded machine stalls the
/// in-process gateway's workers long enough to time out its body reads. Every other
/// panic is reported as usual.
fn quiet_deliberate_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info.payload().downcast_ref::<&str>().copied();
            if !message.is_some_and(|m| m.starts_with("a broken ")) {
                report(info);
            }
        }));
    });
}

/// A strategy that panics in every hook it has.
struct Panics;

impl Strategy<Piece> for Panics {
    fn bypass(&self, _: &StrategyContext<'_>) -> bool {
        panic!("a broken bypass")
    }

    fn admit(&self, _: &StrategyContext<'_>, _: &Fetched<Piece>, _: &mut Lifetime) -> Admission {
        panic!("a broken admit")
    }
}

/// A strategy whose `admit` blocks its thread until the test lets it go.
struct Blocks {
    entered: Arc<AtomicBool>,
    release: Arc<Mutex<std::sync::mpsc::Receiver<()>>>,
}

impl Strategy<Piece> for Blocks {
    fn admit(&self, _: &StrategyContext<'_>, _: &Fetched<Piece>, _: &mut Lifetime) -> Admission {
        self.entered.store(true, Ordering::SeqCst);
        let _ = self.release.lock().unwrap().recv();
        Admission::Store
    }
}

/// 20 concurrent queries for one key through `gateway`; their answers.
async fn crowd(http: &reqwest::Client, gateway: &Server) -> Vec<tokio::task::JoinHandle<Value>> {
    (0..20)
        .map(|_| {
            let (http, url) = (http.clone(), gateway.url());
            tokio::spawn(async move {
                http.post(url)
                    .json(&json!({ "query": POST }))
                    .send()
                    .await
                    .unwrap()
                    .json::<Value>()
                    .await
                    .unwrap()
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_strategy_that_panics_or_blocks_cannot_wedge_a_key() {
    quiet_deliberate_panics();
    let expected = json!({"data": {"getPost": {"pid": "p1", "title": "Post 1"}}});
    // Panics: every caller is answered, the panics are counted.
    let lab = Lab::start_delayed(Duration::from_millis(100), |c| {
        let mut settings = cache(60.0).unwrap();
        settings.strategies = vec![NamedStrategy::new("panics", Panics)];
        c.cache = Some(settings);
    })
    .await;
    for answer in futures::future::join_all(crowd(&lab.http, &lab.gateway).await).await {
        assert_eq!(answer.unwrap(), expected);
    }
    let text = lab.metrics(&lab.gateway).await;
    assert!(
        decisions(&text, "Query.getPost", "panics", "panicked") >= 21,
        "{text}"
    );
    // Blocks: the leader is stuck in admit; its 19 followers are answered anyway.
    let (release, wait) = std::sync::mpsc::channel();
    let entered = Arc::new(AtomicBool::new(false));
    let blocks = Blocks {
        entered: Arc::clone(&entered),
        release: Arc::new(Mutex::new(wait)),
    };
    let blocked = gateway_over(&lab.user, &lab.post, |c| {
        let mut settings = cache(60.0).unwrap();
        settings.strategies = vec![NamedStrategy::new("blocks", blocks)];
        c.cache = Some(settings);
    })
    .await;
    let answers = crowd(&lab.http, &blocked).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while answers.iter().filter(|a| a.is_finished()).count() < 19 {
        assert!(
            Instant::now() < deadline,
            "followers waited on a blocked admit"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(entered.load(Ordering::SeqCst));
    release.send(()).unwrap();
    for answer in futures::future::join_all(answers).await {
        assert_eq!(answer.unwrap(), expected);
    }
}

#[tokio::test]
async fn every_strategy_in_the_catalogue_serves_the_seed_query_by_name() {
    const SEED: &str = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";
    for entry in CATALOGUE {
        let lab = Lab::start_with(|c| c.cache = with_strategies(10.0, &[entry.name])).await;
        let first = lab.query(SEED).await;
        assert!(first.get("errors").is_none(), "{}: {first}", entry.name);
        assert_eq!(
            first["data"]["me"]["topPosts"][1]["pid"], "p3",
            "{}",
            entry.name
        );
        assert_eq!(lab.query(SEED).await, first, "{}", entry.name);
        let text = metrics_of(&lab.http, lab.gateway.addr).await;
        assert!(text.contains("gateway_cache_hits_total"), "{}", entry.name);
    }
}

fn gateway_binary(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(args)
        .output()
        .expect("run the gateway binary")
}

#[test]
fn gateway_strategies_prints_the_catalogue() {
    let out = gateway_binary(&["strategies"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for entry in CATALOGUE {
        assert!(text.contains(entry.name), "{text}");
        assert!(text.contains(entry.summary), "{text}");
        for p in entry.params {
            assert!(
                text.contains(&format!("{}={}", p.name, p.default)),
                "{text}"
            );
        }
    }
    assert!(text.contains("--cache-eviction lru|tinylfu"), "{text}");
    // And the request-level strategies.
    assert!(text.contains("--request-strategy"), "{text}");
    for name in ["coalesce", "response"] {
        assert!(text.contains(&format!("\n  {name} ")), "{text}");
    }
}

#[test]
fn bad_strategies_stop_start_up_with_the_catalogue() {
    let base = [
        "--subgraph",
        "user=http://127.0.0.1:9/graphql",
        "--ttl",
        "10",
    ];
    for (extra, says) in [
        (
            &["--strategy", "nope"][..],
            "--strategy \"nope\": there is no strategy named \"nope\"",
        ),
        (
            &["--strategy", "early-refresh:beta=soon"][..],
            "beta=\"soon\": expected a non-negative number",
        ),
        (
            &["--strategy", "second-hit:size=1"][..],
            "second-hit has no parameter \"size\"",
        ),
    ] {
        let out = gateway_binary(&[&base[..], extra].concat());
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
        for entry in CATALOGUE {
            assert!(stderr.contains(entry.name), "{stderr}");
        }
    }
    let out = gateway_binary(&[
        "--subgraph",
        "user=http://127.0.0.1:9/graphql",
        "--strategy",
        "second-hit",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("--strategy and --cache-eviction configure the cache"));
    let out = gateway_binary(&[&base[..], &["--cache-eviction", "fifo"]].concat());
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("--cache-eviction"));
}
