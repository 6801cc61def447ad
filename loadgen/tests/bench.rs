//! `loadgen bench` against the in-process target server: latency near a known delay,
//! every error class counted, open-loop rate accuracy and coordinated-omission
//! correction, and the `--json` object as the binary prints it.
//!
//! Bounds are loose on purpose: the machine is a shared, noisy 2-core box. Timing
//! figures belong to the benchmarks; these tests check that the measurement is right.

use std::process::Command;
use std::time::Duration;

use loadgen::bench::engine::{self, BenchPlan, StopRule};
use loadgen::bench::report::BenchReport;
use loadgen::bench::request_template::{BodySource, RequestTemplate};
use loadgen::target_server::BackgroundTarget;

fn plan(url: &str, connections: usize, stop: StopRule) -> BenchPlan {
    BenchPlan {
        templates: vec![RequestTemplate::new(url, None, &[], BodySource::Empty).unwrap()],
        connections,
        threads: 1,
        stop,
        warmup: Duration::ZERO,
        timeout: Duration::from_secs(5),
        rate: None,
        progress: false,
        progress_bars: None,
        workload: None,
    }
}

fn bench(plan: &BenchPlan) -> BenchReport {
    let result = engine::run(plan).unwrap();
    BenchReport::new(plan, &result)
}

#[test]
fn p50_lands_near_the_servers_delay() {
    let target = BackgroundTarget::start(Duration::ZERO, 1).unwrap();
    let mut p = plan(
        &target.url("/delay/50"),
        10,
        StopRule::After(Duration::from_millis(1500)),
    );
    p.warmup = Duration::from_millis(200);
    p.threads = 2;
    let report = bench(&p);
    assert_eq!(report.errors.total(), 0, "{report:?}");
    // 10 connections for 1.5 s at >= 50 ms each: at most 300 responses (the lower
    // bound only says the run measured something: a busy machine answers fewer).
    assert!(
        report.requests >= 10 && report.requests <= 300,
        "{}",
        report.requests
    );
    let l = report.latency_ms;
    // Never below the delay (HDR keeps 3 significant figures). Above it, a busy machine
    // adds what it adds: the bound only catches a unit gone wrong (µs for ms).
    assert!(l.p50 >= 49.9 && l.p50 < 1000.0, "p50 {} ms", l.p50);
    assert!(l.min >= 49.9, "min {} ms", l.min);
    assert!(
        l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.p99_9 && l.p99_9 <= l.max,
        "{l:?}"
    );
    assert_eq!(report.mode, "closed");
    assert!(report.open_loop.is_none());
    assert!((report.duration_s - 1.5).abs() < 1e-9);
}

#[test]
fn every_error_class_is_counted() {
    let target = BackgroundTarget::start(Duration::ZERO, 1).unwrap();
    // /mixed answers in turn: 200, 500, 200 with GraphQL errors, dropped connection.
    let report = bench(&plan(&target.url("/mixed"), 4, StopRule::Requests(400)));
    assert_eq!(report.errors.non_2xx, 100, "{:?}", report.errors);
    assert_eq!(report.errors.graphql, 100, "{:?}", report.errors);
    assert_eq!(report.errors.transport, 100, "{:?}", report.errors);
    assert_eq!(report.errors.timeouts, 0, "{:?}", report.errors);
    // 500s and GraphQL-error 200s are responses; dropped connections are not.
    assert_eq!(report.requests, 300);
}

#[test]
fn graphql_errors_inside_http_200_are_errors() {
    let target = BackgroundTarget::start(Duration::ZERO, 1).unwrap();
    let report = bench(&plan(
        &target.url("/graphql-errors"),
        2,
        StopRule::Requests(20),
    ));
    assert_eq!(report.requests, 20);
    assert_eq!(report.errors.graphql, 20);
    assert_eq!(
        report.errors.non_2xx + report.errors.transport + report.errors.timeouts,
        0
    );
}

#[test]
fn non_2xx_statuses_are_counted() {
    let target = BackgroundTarget::start(Duration::ZERO, 1).unwrap();
    let report = bench(&plan(&target.url("/status/503"), 2, StopRule::Requests(10)));
    assert_eq!(report.errors.non_2xx, 10);
    assert_eq!(report.errors.graphql, 0);
}

#[test]
fn requests_that_outlive_the_timeout_are_timeouts() {
    let target = BackgroundTarget::start(Duration::ZERO, 1).unwrap();
    let mut p = plan(&target.url("/hang"), 2, StopRule::Requests(4));
    p.timeout = Duration::from_millis(200);
    let report = bench(&p);
    assert_eq!(report.errors.timeouts, 4, "{:?}", report.errors);
    assert_eq!(report.requests, 0);
    assert!(report.warnings().iter().any(|w| w.contains("no response")));
}

#[test]
fn timeouts_fire_when_due_and_only_then() {
    let target = BackgroundTarget::start(Duration::ZERO, 1).unwrap();
    // Answers take 100 ms, far inside a 3 s timeout (a busy machine cannot stretch one
    // that far): requests, no timeout.
    let mut p = plan(
        &target.url("/delay/100"),
        2,
        StopRule::After(Duration::from_millis(1500)),
    );
    p.timeout = Duration::from_secs(3);
    let report = bench(&p);
    assert_eq!(report.errors.timeouts, 0, "{:?}", report.errors);
    assert!(report.requests >= 2, "{}", report.requests);
    // A hung request is given up after its timeout, not after the run's end.
    let mut p = plan(&target.url("/hang"), 1, StopRule::Requests(3));
    p.timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let report = bench(&p);
    assert_eq!(report.errors.timeouts, 3);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

#[test]
fn refused_connections_are_transport_errors() {
    // A port that was free a moment ago: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let report = bench(&plan(
        &format!("http://127.0.0.1:{port}/"),
        1,
        StopRule::Requests(3),
    ));
    assert_eq!(report.errors.transport, 3, "{:?}", report.errors);
    assert_eq!(report.requests, 0);
}

#[test]
fn open_loop_holds_a_modest_rate() {
    let target = BackgroundTarget::start(Duration::ZERO, 1).unwrap();
    let mut p = plan(
        &target.url("/delay/2"),
        10,
        StopRule::After(Duration::from_secs(2)),
    );
    p.rate = Some(200.0);
    p.warmup = Duration::from_millis(200);
    let report = bench(&p);
    let open = report.open_loop.as_ref().expect("open-loop figures");
    assert_eq!(report.mode, "open");
    // The schedule itself is exact: 200/s for 2 s.
    assert!(
        (open.scheduled as i64 - 400).abs() <= 10,
        "scheduled {}",
        open.scheduled
    );
    // Every scheduled request was sent and answered (a late one still counts; one
    // never answered would be missed), and nothing is sent ahead of the schedule: at
    // most every request meant for the warm-up and the window lands in the window (a
    // late warm-up one may). How close the sent rate stays to 200/s depends on how busy
    // the machine is: a benchmark's question (`rate_held` says it in every report), not
    // this test's.
    assert_eq!(open.missed, 0, "{open:?}");
    assert_eq!(report.requests, open.scheduled, "{report:?}");
    let at_most = 200.0 * (2.0 + 0.2) / 2.0;
    assert!(
        open.sent_rate > 0.0 && open.sent_rate <= at_most * 1.05,
        "sent {} req/s",
        open.sent_rate
    );
    // Corrected latency is measured from earlier instants, so it is never smaller.
    assert!(
        report.latency_ms.p50 >= open.uncorrected_latency_ms.p50,
        "{report:?}"
    );
}

#[test]
fn open_loop_corrects_for_coordinated_omission_and_says_when_it_falls_behind() {
    let target = BackgroundTarget::start(Duration::ZERO, 1).unwrap();
    // One connection, 100 ms per answer: at most 10 req/s, but 50 req/s are asked for.
    let mut p = plan(
        &target.url("/delay/100"),
        1,
        StopRule::After(Duration::from_secs(1)),
    );
    p.rate = Some(50.0);
    p.timeout = Duration::from_secs(1);
    let report = bench(&p);
    let open = report.open_loop.as_ref().expect("open-loop figures");
    assert!(!open.rate_held, "{open:?}");
    assert!(open.missed > 0, "{open:?}");
    assert!(open.sent_rate < 25.0, "{open:?}");
    // Uncorrected latency is the server's ~100 ms (never less); corrected latency
    // includes the queueing behind the schedule, which grows to about a second (a busy
    // machine lengthens both, and the queue with them).
    assert!(open.uncorrected_latency_ms.p99 >= 99.9, "{open:?}");
    assert!(
        report.latency_ms.p99 > 3.0 * open.uncorrected_latency_ms.p99,
        "{report:?}"
    );
    assert!(report
        .warnings()
        .iter()
        .any(|w| w.contains("could not hold the rate")));
}

#[test]
fn the_binary_prints_the_documented_json() {
    let target = BackgroundTarget::start(Duration::ZERO, 1).unwrap();
    let dir = std::env::temp_dir().join(format!("loadgen-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let query = dir.join("q.graphql");
    std::fs::write(&query, "{ ok }").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "bench",
            "--url",
            &target.url("/graphql"),
            "-c",
            "2",
            "-t",
            "1",
            "-n",
            "50",
            "--json",
        ])
        .args([
            "--query-file",
            query.to_str().unwrap(),
            "--variables",
            r#"{"n":1}"#,
        ])
        .args(["-H", "authorization: Bearer u1"])
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(
        stdout.lines().count(),
        1,
        "one JSON object on one line: {stdout}"
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["schema"], "loadgen.bench/1");
    assert_eq!(v["method"], "POST");
    assert_eq!(v["requests"], 50);
    assert!(v["requests_per_sec"].as_f64().unwrap() > 0.0);
    for key in ["p50", "p90", "p99", "p99_9", "max", "mean", "stdev"] {
        assert!(
            v["latency_ms"][key].as_f64().unwrap() > 0.0,
            "latency_ms.{key}: {v}"
        );
    }
    for key in ["transport", "timeouts", "non_2xx", "graphql"] {
        assert_eq!(v["errors"][key], 0, "errors.{key}: {v}");
    }
    assert!(v["loadgen_cpu"]["process_cores"].is_number());
    assert!(v["loadgen_cpu"]["may_be_bottleneck"].is_boolean());
    // The whole object parses back into the report type.
    let _: BenchReport = serde_json::from_value(v).unwrap();
}

#[test]
fn the_binary_names_the_bad_flag() {
    let output = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["bench", "--url", "ftp://127.0.0.1/"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--url"), "{stderr}");
    let output = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["bench", "--url", "http://127.0.0.1:1/", "--variables", "{}"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--query-file"), "{stderr}");
}
