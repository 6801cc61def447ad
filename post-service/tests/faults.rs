//! Injected faults and delays through real HTTP, each bounded in count and time: error
//! and hang rates that are deterministic with a seed, outage windows, delays with
//! jitter and an exponential tail, the counters on `/metrics`, the gateway's schema read
//! left alone, and bad values refused by flag.

mod common;

use std::time::{Duration, Instant};

use common::{metric, post, Service};
use serde_json::Value;
use subgraph_host::faults::{Delay, FaultPlan, Outage};
use subgraph_host::Options;

const QUERY: &str = "{ topPosts(count: 1) { pid } }";

async fn posts_with(faults: FaultPlan) -> Service {
    Service::start(subgraph_host::router_with(
        "post",
        post_service::schema().into(),
        Options {
            faults,
            ..Options::default()
        },
    ))
    .await
}

/// The labelled sample `subgraph_injected_faults_total{…fault="<fault>"}`.
async fn injected(http: &reqwest::Client, service: &Service, fault: &str) -> f64 {
    let label = format!("fault=\"{fault}\"");
    common::labelled_metric(http, service.addr, "subgraph_injected_faults_total", &label).await
}

/// Send `n` requests one after another: which answered with an injected error.
async fn outcomes(http: &reqwest::Client, service: &Service, n: usize) -> Vec<bool> {
    let mut out = Vec::new();
    for _ in 0..n {
        let (status, body) = post(http, &service.url(), QUERY, Value::Null).await;
        assert_eq!(status, 200);
        out.push(body.contains("INJECTED_ERROR"));
    }
    out
}

#[tokio::test]
async fn the_error_rate_fails_its_share_the_same_way_every_run() {
    let plan = |seed| FaultPlan {
        error_rate: 0.3,
        seed,
        ..FaultPlan::default()
    };
    let http = common::client();
    let a = posts_with(plan(7)).await;
    let b = posts_with(plan(7)).await;
    let c = posts_with(plan(8)).await;
    let (oa, ob, oc) = (
        outcomes(&http, &a, 200).await,
        outcomes(&http, &b, 200).await,
        outcomes(&http, &c, 200).await,
    );
    assert_eq!(oa, ob, "the same seed gives the same sequence");
    assert_ne!(oa, oc, "another seed gives another");
    let failed = oa.iter().filter(|&&f| f).count();
    assert!((35..=85).contains(&failed), "{failed} of 200 at 0.3");
    assert_eq!(injected(&http, &a, "error").await, failed as f64);
    assert_eq!(
        metric(&http, a.addr, "subgraph_request_errors_total").await,
        failed as f64
    );
    // The error is a well-formed GraphQL response with no data.
    let (_, body) = post(&http, &a.url(), QUERY, Value::Null).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v.get("data").is_none_or(Value::is_null), "{body}");
    // An injected error replaces execution: a mutation it hits has no effect.
    let all = posts_with(FaultPlan {
        error_rate: 1.0,
        ..FaultPlan::default()
    })
    .await;
    let (_, body) = post(
        &http,
        &all.url(),
        r#"mutation { updatePostTitle(pid: "p1", title: "x") { title } }"#,
        Value::Null,
    )
    .await;
    assert!(body.contains("INJECTED_ERROR"), "{body}");
    assert_eq!(outcomes(&http, &all, 20).await, vec![true; 20]);
}

#[tokio::test]
async fn outages_fail_every_request_inside_their_window() {
    let http = common::client();
    let outage = |text: &str| text.parse::<Outage>().unwrap();
    let down = posts_with(FaultPlan {
        outages: vec![outage("0s..1m/2m")],
        ..FaultPlan::default()
    })
    .await;
    for _ in 0..5 {
        let (status, body) = post(&http, &down.url(), QUERY, Value::Null).await;
        assert_eq!(status, 503);
        assert!(body.contains("INJECTED_OUTAGE"), "{body}");
    }
    assert_eq!(injected(&http, &down, "outage").await, 5.0);
    let later = posts_with(FaultPlan {
        outages: vec![outage("1m..2m/3m")],
        ..FaultPlan::default()
    })
    .await;
    let (status, _) = post(&http, &later.url(), QUERY, Value::Null).await;
    assert_eq!(status, 200);
    // A short period, sampled for 1.2 s: both states are seen, and every 503 counted.
    let flapping = posts_with(FaultPlan {
        outages: vec![outage("0ms..200ms/400ms")],
        ..FaultPlan::default()
    })
    .await;
    let (mut ok, mut down_count) = (0, 0);
    let until = Instant::now() + Duration::from_millis(1200);
    while Instant::now() < until {
        match post(&http, &flapping.url(), QUERY, Value::Null).await.0 {
            200 => ok += 1,
            503 => down_count += 1,
            other => panic!("status {other}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        ok > 3 && down_count > 3,
        "{ok} answered, {down_count} refused"
    );
    assert_eq!(
        injected(&http, &flapping, "outage").await,
        down_count as f64
    );
}

#[tokio::test]
async fn hung_requests_never_answer_and_are_counted() {
    let service = posts_with(FaultPlan {
        hang_rate: 0.5,
        seed: 3,
        ..FaultPlan::default()
    })
    .await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let mut hung = 0;
    for _ in 0..20 {
        let r = impatient
            .post(service.url())
            .json(&serde_json::json!({ "query": QUERY }))
            .send()
            .await;
        match r {
            Ok(r) => assert_eq!(r.status(), 200),
            Err(e) => {
                assert!(e.is_timeout(), "{e}");
                hung += 1;
            }
        }
    }
    assert!((4..=16).contains(&hung), "{hung} of 20 hung at 0.5");
    let http = common::client();
    assert_eq!(injected(&http, &service, "hang").await, hung as f64);
    // The clients gave up and closed their connections: nothing is left in progress
    // but this scrape.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = metric(&http, service.addr, "subgraph_requests_in_progress").await;
        if left == 0.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left} requests still in progress"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn delays_follow_their_distribution_and_seed() {
    let http = common::client();
    let ms = Duration::from_millis;
    let total_delay = |service: &Service| {
        let http = http.clone();
        let addr = service.addr;
        async move { metric(&http, addr, "subgraph_injected_delay_seconds_total").await }
    };
    let jittered = |seed| FaultPlan {
        delay: Delay::Uniform {
            mean: ms(4),
            jitter: ms(3),
        },
        seed,
        ..FaultPlan::default()
    };
    let mut totals = Vec::new();
    for seed in [1, 1, 2] {
        let service = posts_with(jittered(seed)).await;
        let started = Instant::now();
        outcomes(&http, &service, 50).await;
        let total = total_delay(&service).await;
        assert!(
            started.elapsed().as_secs_f64() >= total,
            "answers were held"
        );
        totals.push(total);
    }
    assert_eq!(totals[0], totals[1], "the same seed, the same delays");
    assert_ne!(totals[0], totals[2], "another seed, other delays");
    for t in &totals {
        // 50 delays in [1, 7] ms, not all 4 ms.
        assert!(*t > 0.05 && *t < 0.35 && (*t - 0.2).abs() > 1e-6, "{t}");
    }
    let exponential = posts_with(FaultPlan {
        delay: Delay::Exponential { mean: ms(2) },
        ..FaultPlan::default()
    })
    .await;
    outcomes(&http, &exponential, 100).await;
    let t = total_delay(&exponential).await;
    assert!(
        t > 0.1 && t < 0.35,
        "100 exponential delays of mean 2 ms took {t} s"
    );
}

#[tokio::test]
async fn the_gateways_schema_read_is_never_faulted() {
    let service = posts_with(FaultPlan {
        error_rate: 1.0,
        outages: vec!["0s..1m/1m".parse().unwrap()],
        ..FaultPlan::default()
    })
    .await;
    let http = common::client();
    let (status, body) = post(&http, &service.url(), "{ _service { sdl } }", Value::Null).await;
    assert_eq!(status, 200);
    assert!(body.contains("topPosts"), "{body}");
}

#[test]
fn every_fault_flag_is_in_help() {
    let out = std::process::Command::new(common::binary("post-service"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--delay-ms",
        "--delay-jitter-ms",
        "--delay-distribution",
        "--error-rate",
        "--hang-rate",
        "--outage",
        "--fault-seed",
        "--drain-timeout",
        "--document-cache-bytes",
        "--posts",
        "--users",
        "--data-seed",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help:\n{help}");
    }
}

#[test]
fn bad_fault_values_are_refused_by_name() {
    for (args, flag) in [
        (&["--error-rate", "1.5"][..], "--error-rate"),
        (&["--error-rate", "often"][..], "--error-rate"),
        (&["--hang-rate=-0.1"][..], "--hang-rate"),
        (&["--outage", "4s..2s/10s"][..], "--outage"),
        (&["--outage", "2s..4s/3s"][..], "--outage"),
        (&["--outage", "2s-4s/10s"][..], "--outage"),
        (&["--outage", "2..4s/10s"][..], "--outage"),
        (
            &["--delay-ms", "5", "--delay-jitter-ms", "10"][..],
            "--delay-jitter-ms",
        ),
        (
            &[
                "--delay-ms",
                "5",
                "--delay-jitter-ms",
                "1",
                "--delay-distribution",
                "exponential",
            ][..],
            "--delay-jitter-ms",
        ),
        (&["--delay-distribution", "exponential"][..], "--delay-ms"),
        (
            &["--delay-distribution", "pareto"][..],
            "--delay-distribution",
        ),
        (&["--drain-timeout", "5"][..], "--drain-timeout"),
        (&["--fault-seed=-1"][..], "--fault-seed"),
    ] {
        let (code, stderr) = common::refused("post-service", args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
}
