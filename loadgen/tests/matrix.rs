//! `loadgen matrix --quick` end to end on `experiments/seed.toml`: real user-service,
//! post-service and gateway processes from this workspace's build, and a run directory
//! with a valid summary.json, flamegraphs, a chart and a manifest; `loadgen compare` on
//! the result. Also: a wrong answer aborts the run, and a bad file is refused; several
//! gateways over Redis, and a fleet's per-gateway figures.
//!
//! The service binaries must be built next to loadgen's (`cargo build --workspace`
//! before `cargo test --workspace`); the test says so when they are missing.

use std::path::Path;
use std::process::Command;

use loadgen::matrix::summary::Summary;

#[allow(dead_code)]
mod support;
use support::{loadgen, quick_matrix, require_services, scratch};

const SEED_QUERY: &str =
    "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";
const SEED_ANSWER: &str = r#"{"data":{"me":{"id":"u1","name":"John","nickname":"John","topPosts":[{"pid":"p1","author":{"id":"u1"}},{"pid":"p3","author":{"id":"u1"}}]},"topPosts":[{"pid":"p1"},{"pid":"p2"}]}}"#;

/// The runs that start services load both cores of the lab's machine, so they take
/// turns. Their windows are 4 s: a debug gateway's first profile spends a second or two
/// setting up pprof's sample table (about 180 MiB, filled in element by element, slow in
/// a debug build) before it samples, longer on a busy machine; in a 2 s window it could start
/// only after the load was over and come back empty.
static SERVICES: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    SERVICES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Every process of a `runs/*.json` record ended on SIGTERM.
fn assert_stopped_by_sigterm(record: &serde_json::Value) {
    for s in record["services"].as_array().unwrap() {
        let how = s["stopped"].as_str().unwrap();
        assert!(how.starts_with("stopped by SIGTERM"), "{s}");
    }
}

/// Fail (not skip) without redis-server, saying what to install.
fn require_redis_server() {
    assert!(
        loadgen::matrix::redis_server::find_on_path().is_some(),
        "redis-server is not on PATH, so this test cannot run (it does not skip): install the \
         Debian package redis-server (apt-get install redis-server)"
    );
}

fn experiment(expected: &str) -> String {
    format!(
        r#"name = "e2e"
baseline = "no-cache"
[query]
document = "{SEED_QUERY}"
expected = '{expected}'
[load]
connections = 20
threads = 1
[[config]]
name = "no-cache"
[[config]]
name = "slow-posts"
post_service = ["--delay-ms", "2"]
"#
    )
}

#[test]
fn matrix_quick_runs_the_seed_experiment_end_to_end() {
    let bin_dir = require_services();
    let _turn = one_at_a_time();
    let dir = scratch("matrix-e2e");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/seed.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let run = dir.join("runs").join("first");
    let output = quick_matrix(
        &config,
        &run,
        &bin_dir,
        &["--duration", "4s", "--warmup", "1s"],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("| no-cache |") && stdout.contains("| ttl-10 |"),
        "table printed:\n{stdout}"
    );
    assert!(stdout.contains("## Per second"), "{stdout}");
    let timeline = std::fs::read_to_string(run.join("timeline.svg")).unwrap();
    assert_eq!(
        timeline.matches("<polyline").count(),
        3 * 4,
        "3 panels x 4 configurations"
    );

    // summary.json parses into the documented type and holds real measurements.
    let summary: Summary =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary.schema, "loadgen.summary/1");
    assert_eq!(
        (summary.rounds, summary.quick, summary.baseline.as_str()),
        (1, true, "no-cache")
    );
    let names: Vec<&str> = summary.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["no-cache", "ttl-0", "ttl-1", "ttl-10"]);
    for c in &summary.configs {
        assert_eq!(c.rounds.len(), 1, "{}", c.name);
        let m = &c.rounds[0];
        assert!(m.requests > 0 && m.requests_per_sec > 0.0, "{m:?}");
        assert_eq!(c.errors_total, 0, "{m:?}");
        assert!(m.p50_ms > 0.0 && m.p99_ms >= m.p50_ms, "{m:?}");
        assert!(m.upstream_per_request.is_some(), "{m:?}");
        // The window second by second: 4 whole seconds, each with client answers and
        // the subgraphs' requests in it (no-cache sends every request upstream).
        assert_eq!(m.timeline.len(), 4, "{:?}", m.timeline);
        let answered: u64 = m.timeline.iter().map(|s| s.requests).sum();
        assert!(
            answered <= m.requests && answered * 10 >= m.requests * 9,
            "{m:?}"
        );
        assert!(
            m.timeline.iter().all(|s| s.requests > 0 && s.p99_ms > 0.0),
            "{m:?}"
        );
        assert!(
            m.timeline.iter().all(|s| s.upstream_requests.is_some()),
            "{m:?}"
        );
        if c.name == "no-cache" {
            let upstream = m.upstream_per_second.expect("upstream per second");
            assert!(
                upstream.mean > 0.0 && upstream.peak >= upstream.mean,
                "{upstream:?}"
            );
        }
        assert!(m.gateway_cpu_cores.unwrap() > 0.0, "{m:?}");
        assert!(m.gateway_peak_rss_bytes.unwrap() > 0, "{m:?}");
        assert!(c.ratio.is_some(), "{}", c.name);
        // Each configuration has its flamegraph.
        let file = c
            .flamegraph
            .as_deref()
            .unwrap_or_else(|| panic!("{}: no flamegraph: {:?}", c.name, c.flamegraph_note));
        assert!(file.contains("flame"), "{file}");
        let svg = std::fs::read_to_string(run.join(file)).unwrap();
        assert!(svg.contains("<svg"), "{file} is an SVG");
        // CPU per client request for every process, next to its cores (a subgraph the
        // cache spares may spend nothing measurable: /proc counts in 10 ms ticks).
        for process in ["gateway", "user-service", "post-service", "loadgen"] {
            let us = c.median.cpu_us_per_request.get(process);
            let cores = c.median.cpu_cores.get(process);
            assert!(
                us.is_some_and(|u| *u >= 0.0) && cores.is_some_and(|c| *c >= 0.0),
                "{}: {process}: {:?}",
                c.name,
                c.median
            );
        }
        assert!(
            c.median.cpu_us_per_request["gateway"] > 0.0,
            "{:?}",
            c.median
        );
        assert!(
            c.median.cpu_us_per_request["loadgen"] > 0.0,
            "{:?}",
            c.median
        );
        // The profile's coverage: perf holds the whole process (kernel frames included),
        // so its samples account for at least 90% of the CPU time /proc gives. Above 1
        // is not a defect of the lab: on a shared virtual machine, while others take its
        // cores, perf's clock samples have come to 1.2–1.6 times the process's CPU time
        // (results/20261202-045905, and a CI run that failed at 1.19), so the upper
        // bound only catches nonsense.
        let profile = m.profile.as_ref().expect("a profile's figures");
        if profile.tool == "perf" {
            let coverage = profile.coverage.unwrap();
            assert!((0.9..=2.0).contains(&coverage), "{}: {profile:?}", c.name);
            let folded =
                std::fs::read_to_string(run.join("profiles").join(format!("{}.folded", c.name)))
                    .unwrap();
            assert!(folded.contains("_[k]"), "{}: kernel frames", c.name);
        }
    }
    assert_eq!(summary.configs[0].rounds[0].ratio, Some(1.0));
    // What the lab is about: the cache takes load off the subgraphs, and says so.
    let upstream = |i: usize| summary.configs[i].median.upstream_per_request.unwrap();
    // Without a cache the seed query needs several subgraph requests per client request.
    assert!(upstream(0) >= 1.0, "no-cache: {}", upstream(0));
    for (i, c) in summary.configs.iter().enumerate().skip(1) {
        assert!(
            upstream(i) < upstream(0),
            "{}: {} vs no-cache {}",
            c.name,
            upstream(i),
            upstream(0)
        );
        let cache_events =
            c.median.cache_hits.unwrap_or(0.0) + c.median.cache_dedupes.unwrap_or(0.0);
        assert!(
            cache_events > 0.0,
            "{} counts cache hits or dedupes: {:?}",
            c.name,
            c.median
        );
    }
    // The manifest traces the run.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["experiment"], text);
    assert!(manifest["rustc"].as_str().unwrap().starts_with("rustc "));
    assert!(manifest["cores"].as_u64().unwrap() >= 1);
    assert!(manifest["timestamp"].as_str().unwrap().ends_with('Z'));
    assert!(manifest["arguments"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "--quick"));
    assert!(
        manifest.get("git").is_some()
            && manifest.get("kernel").is_some()
            && manifest.get("cpu_model").is_some()
    );
    // One round, in the file's order (later rounds rotate it: loadgen/src/matrix/order.rs).
    assert_eq!(
        manifest["round_order"],
        serde_json::json!([["no-cache", "ttl-0", "ttl-1", "ttl-10"]])
    );

    // The rest of the run directory.
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(md.contains("| ttl-1 |"), "{md}");
    assert!(std::fs::read_to_string(run.join("chart.svg"))
        .unwrap()
        .contains("<svg"));
    assert!(run.join("runs").join("r1-no-cache.json").is_file());
    assert!(run.join("logs").join("r1-no-cache-gateway.log").is_file());
    assert_eq!(
        std::fs::read_link(run.parent().unwrap().join("latest")).unwrap(),
        Path::new("first")
    );

    // compare reads it back.
    let output = Command::new(loadgen())
        .arg("compare")
        .arg(&run)
        .arg(run.join("summary.json"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        table.contains("| no-cache |") && table.contains("1.00x"),
        "{table}"
    );

    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_wrong_answer_aborts_the_whole_run() {
    let bin_dir = require_services();
    let _turn = one_at_a_time();
    let dir = scratch("matrix-wrong");
    let config = dir.join("wrong.toml");
    std::fs::write(&config, experiment(&SEED_ANSWER.replace("John", "Jane"))).unwrap();
    let run = dir.join("run");
    let output = Command::new(loadgen())
        .args(["matrix", "--quick", "--duration", "1s", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&run)
        .arg("--bin-dir")
        .arg(&bin_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("wrong answer") && stderr.contains("Jane"),
        "{stderr}"
    );
    assert!(stderr.contains("aborting the run"), "{stderr}");
    assert!(
        !run.join("summary.json").exists(),
        "no summary for an aborted run"
    );
    assert!(run.join("manifest.json").is_file());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_bad_experiment_file_is_refused_before_anything_starts() {
    let dir = scratch("matrix-bad");
    let config = dir.join("bad.toml");
    std::fs::write(&config, "[query]\ndocument = \"{ a }\"\nexpected = '{}'\n").unwrap();
    let output = Command::new(loadgen())
        .arg("matrix")
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("bad.toml") && stderr.contains("at least one configuration"),
        "{stderr}"
    );
    let output = Command::new(loadgen())
        .args(["matrix", "--config", "/nonexistent/x.toml"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("--config /nonexistent/x.toml"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn quick_with_each_of_its_settings_replaced_is_refused() {
    let output = Command::new(loadgen())
        .args([
            "matrix",
            "--quick",
            "--rounds",
            "3",
            "--duration",
            "10s",
            "--warmup",
            "2s",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("--quick and --rounds, --duration and --warmup"),
        "{stderr}"
    );
}

/// Several gateways sharing a private redis-server (layered storage), a configuration
/// with its own (numbered) query, and the RSS samples: one quick run.
#[test]
fn matrix_runs_several_gateways_redis_and_a_configuration_query() {
    let bin_dir = require_services();
    let _turn = one_at_a_time();
    require_redis_server();
    let dir = scratch("matrix-multi");
    let config = dir.join("multi.toml");
    std::fs::write(
        &config,
        format!(
            r#"name = "e2e-multi"
baseline = "one"
[query]
document = "{SEED_QUERY}"
expected = '{SEED_ANSWER}'
[load]
connections = 8
threads = 1
[[config]]
name = "one"
gateway = ["--ttl", "10"]
[[config]]
name = "two"
redis = true
gateways = 2
gateway = ["--ttl", "10", "--storage", "layered", "--redis", "{{redis}}"]
[[config]]
name = "flood"
query = {{ document = "{{ getPost(pid: \"p{{{{n}}}}\") {{ pid }} }}", expected = '{{"data":{{"getPost":null}}}}', unique_literals = true }}
"#
        ),
    )
    .unwrap();

    // Without redis-server on PATH the run stops before anything starts, and says why.
    let empty = dir.join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let output = Command::new(loadgen())
        .args(["matrix", "--quick", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(dir.join("no-redis"))
        .arg("--bin-dir")
        .arg(&bin_dir)
        .env("PATH", &empty)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(
            "experiment \"e2e-multi\" config \"two\" needs redis-server; install the Debian \
             package redis-server (apt-get install redis-server)"
        ),
        "{stderr}"
    );
    assert!(!dir.join("no-redis").exists(), "nothing was started");

    let run = dir.join("run");
    quick_matrix(
        &config,
        &run,
        &bin_dir,
        &["--duration", "4s", "--warmup", "1s"],
    );

    let summary: Summary =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let by_name = |name: &str| summary.configs.iter().find(|c| c.name == name).unwrap();
    for c in &summary.configs {
        let m = &c.rounds[0];
        assert!(m.requests > 0, "{}: {m:?}", c.name);
        assert_eq!(c.errors_total, 0, "{}: {m:?}", c.name);
        // RSS: before the load, the largest sample, and at the window's end.
        let (start, peak, end) = (
            m.rss_start_mib.unwrap(),
            m.rss_peak_mib.unwrap(),
            m.rss_end_mib.unwrap(),
        );
        assert!(start > 0.0 && peak >= end && end > 0.0, "{}: {m:?}", c.name);
        let warm = m.rss_warmup_peak_mib.unwrap();
        assert!(warm > 0.0 && warm <= peak, "{}: {m:?}", c.name);
        // Profiling is on by default; only the gateway's own profiler lives in its memory
        // (perf is a process of its own).
        let endpoint = loadgen::matrix::profile::perf::find().is_err();
        assert_eq!(m.rss_includes_profiler, endpoint, "{}: {m:?}", c.name);
        assert!(c.median.rss_peak_mib.is_some(), "{}", c.name);
    }

    // Two gateways: both were loaded and both answered; per-instance figures are kept.
    let two = by_name("two");
    assert_eq!((two.gateways, two.redis), (2, true));
    let m = &two.rounds[0];
    assert_eq!(m.gateways, 2);
    assert_eq!(m.instances.len(), 2);
    assert_eq!(m.instances[1].name, "gateway-2");
    assert!(m.instances[0].profiled && !m.instances[1].profiled);
    for i in &m.instances {
        assert!(i.requests.unwrap() > 0.0, "{i:?}");
        assert!(i.cache_hit_ratio.is_some(), "{i:?}");
        assert!(i.cpu_cores.unwrap() > 0.0, "{i:?}");
    }
    let sum: f64 = m.instances.iter().map(|i| i.requests.unwrap()).sum();
    assert_eq!(m.gateway_requests, Some(sum));
    assert_eq!(two.median.instance_hit_ratios.len(), 2);
    // Redis figures: the gateway's counters and the server's own count.
    assert!(m.redis_commands_per_request.is_some(), "{m:?}");
    assert!(m.redis_round_trips_per_request.is_some(), "{m:?}");
    assert!(m.redis_server_commands_per_request.is_some(), "{m:?}");
    assert_eq!(m.storage_errors, Some(0.0), "{m:?}");
    // A gateway without Redis has no such counters: absent, not zero.
    let one = &by_name("one").rounds[0];
    assert!(one.redis_commands_per_request.is_none(), "{one:?}");
    assert!(one.redis_server_commands_per_request.is_none(), "{one:?}");

    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("runs/r1-two.json")).unwrap())
            .unwrap();
    let names: Vec<&str> = record["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "gateway",
            "gateway-2",
            "post-service",
            "user-service",
            "redis"
        ]
    );
    assert_stopped_by_sigterm(&record);
    let url = record["redis"]["url"].as_str().unwrap();
    assert!(url.starts_with("redis://127.0.0.1:"), "{url}");
    // {redis} became the server's URL in both gateways' command lines.
    for s in &record["services"].as_array().unwrap()[..2] {
        let line: Vec<&str> = s["command_line"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(line.ends_with(&["--redis", url]), "{line:?}");
    }
    assert_eq!(record["bench"]["urls"].as_array().unwrap().len(), 2);
    assert!(record["rss_samples"][0].as_u64().unwrap() >= 2, "{record}");
    assert!(run.join("logs/r1-two-redis.log").is_file());
    assert!(run.join("logs/r1-two-gateway-2.log").is_file());
    // The flamegraph is the first instance's.
    assert!(two.flamegraph.is_some(), "{:?}", two.flamegraph_note);

    // The configuration's own query, numbered per request.
    let flood = by_name("flood");
    assert!(flood.own_query && !by_name("one").own_query);
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("runs/r1-flood.json")).unwrap())
            .unwrap();
    assert_eq!(record["query"]["unique_literals"], true);
    assert_eq!(record["bench"]["unique_literals"], true);

    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(
        md.contains("RSS start/peak/end")
            && md.contains("hit ratio per gateway")
            && md.contains("redis round trips/req"),
        "{md}"
    );
    assert!(
        md.contains("(sum of 2)") && md.contains("(max of 2)"),
        "{md}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A fleet: two layered gateways over one redis-server, with `experiments/fleet.toml`'s
/// services and workload (Zipf reads of posts, lists and `me`, 4% writes), loadgen's
/// connections round robin over them; each gateway gets its own row of figures (its
/// requests, hit ratio, Redis commands, and the freshness of the answers it gave), and
/// the gateways' reads add up to the run's. One short run.
#[test]
fn matrix_reports_a_fleet_per_gateway() {
    let bin_dir = require_services();
    let _turn = one_at_a_time();
    require_redis_server();
    let dir = scratch("matrix-fleet");
    let fleet = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/fleet.toml"),
    )
    .unwrap();
    // Its [services] and [workload], then a load and a configuration of our own.
    let (from, to) = (
        fleet.find("\n[services]").unwrap(),
        fleet.find("\n[load]").unwrap(),
    );
    let config = dir.join("fleet.toml");
    std::fs::write(
        &config,
        format!(
            r#"name = "e2e-fleet"
{}
[load]
connections = 8
threads = 1
[profile]
enabled = false
[[config]]
name = "fleet-2"
redis = true
gateways = 2
gateway = ["--ttl", "10", "--storage", "layered", "--redis", "{{redis}}"]
"#,
            &fleet[from..to]
        ),
    )
    .unwrap();
    let run = dir.join("run");
    quick_matrix(
        &config,
        &run,
        &bin_dir,
        &["--duration", "1s", "--warmup", "1s"],
    );

    let summary: Summary =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let fleet = &summary.configs[0];
    let m = &fleet.rounds[0];
    let w = m.workload.as_ref().expect("a workload round");
    assert!(w.writes_acked > 0, "{w:?}");
    assert_eq!(w.wrong_answers, 0, "{w:?}");
    // loadgen's record per URL: one per gateway, in start order.
    assert_eq!(w.per_url.len(), 2, "{w:?}");
    assert_eq!(m.instances.len(), 2);
    let mut reads = 0;
    let mut stale = 0;
    let mut responses = 0;
    for (i, g) in m.instances.iter().enumerate() {
        assert!(g.requests.unwrap() > 0.0, "{g:?}");
        let hits = g.cache_hit_ratio.expect("its own hit ratio");
        assert!((0.0..=1.0).contains(&hits), "{g:?}");
        // Layered: part of those hits came from its own L1.
        let l1 = g.l1_hit_ratio.expect("layered storage counts L1 hits");
        assert!(l1 > 0.0 && l1 <= hits, "{g:?}");
        assert!(g.redis_commands_per_request.unwrap() > 0.0, "{g:?}");
        let f = g.freshness.as_ref().expect("its answers' freshness");
        assert!(f.responses > 0 && f.reads_checked > 0, "{g:?}");
        assert!(f.stale_reads <= f.reads_checked, "{g:?}");
        assert_eq!(f.wrong_answers, 0, "{g:?}");
        assert_eq!(f.responses, w.per_url[i].report.requests());
        reads += f.reads_checked;
        stale += f.stale_reads;
        responses += f.responses;
    }
    // The gateways' figures add up to the run's.
    assert_eq!(reads, w.reads_checked, "{w:?}");
    assert_eq!(stale, w.stale_reads, "{w:?}");
    assert_eq!(responses, m.requests, "{m:?}");
    assert_eq!(
        fleet
            .median
            .instances
            .iter()
            .map(|g| g.name.as_str())
            .collect::<Vec<_>>(),
        ["gateway-1", "gateway-2"]
    );
    // The raw record keeps loadgen's per-URL figures beside the gateways' URLs.
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("runs/r1-fleet-2.json")).unwrap())
            .unwrap();
    let urls = record["bench"]["urls"].as_array().unwrap();
    let per_url = record["bench"]["workload"]["per_url"].as_array().unwrap();
    assert_eq!(per_url.len(), 2);
    for (u, url) in per_url.iter().zip(urls) {
        assert_eq!(&u["url"], url);
    }
    assert!(
        record["gateways"][1]["freshness"]["reads_checked"]
            .as_u64()
            .unwrap()
            > 0
    );
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(md.contains("**Per gateway**"), "{md}");
    assert!(
        md.contains("| fleet-2 | gateway-1 |") && md.contains("|  | gateway-2 |"),
        "{md}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `[config.network]`: Redis and post-service behind `loadgen netproxy` processes, the
/// gateway pointed at them, their CPU measured, their logs kept, all stopped by PID; the
/// summary's Redis round-trips table names the network. One quick run.
#[test]
fn matrix_puts_services_behind_latency_proxies() {
    let bin_dir = require_services();
    let _turn = one_at_a_time();
    require_redis_server();
    let dir = scratch("matrix-network");
    let config = dir.join("network.toml");
    std::fs::write(
        &config,
        format!(
            r#"name = "e2e-network"
[query]
document = "{SEED_QUERY}"
expected = '{SEED_ANSWER}'
[load]
connections = 8
[profile]
enabled = false
[[config]]
name = "far"
redis = true
gateway = ["--ttl", "10", "--storage", "redis", "--redis", "{{redis}}"]
[config.network]
rtt = {{ redis = "2ms", post_service = "1ms" }}
jitter = {{ redis = "100us" }}
seed = 5
"#
        ),
    )
    .unwrap();
    let run = dir.join("run");
    quick_matrix(&config, &run, &bin_dir, &["--duration", "2s"]);

    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("runs/r1-far.json")).unwrap())
            .unwrap();
    let services = record["services"].as_array().unwrap();
    let by_name = |name: &str| {
        services
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {record}"))
    };
    let line = |s: &serde_json::Value| -> Vec<String> {
        s["command_line"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    };
    let redis_proxy = line(by_name("netproxy-redis"));
    let post_proxy = line(by_name("netproxy-post_service"));
    assert_eq!(redis_proxy[1], "netproxy");
    assert!(
        redis_proxy.ends_with(&[
            "--rtt".into(),
            "2000000ns".into(),
            "--jitter".into(),
            "100000ns".into(),
            "--seed".into(),
            "5".into()
        ]),
        "{redis_proxy:?}"
    );
    // The proxies forward to the services; the gateway talks to the proxies.
    let to = |proxy: &[String]| proxy[proxy.iter().position(|a| a == "--to").unwrap() + 1].clone();
    let listen =
        |proxy: &[String]| proxy[proxy.iter().position(|a| a == "--listen").unwrap() + 1].clone();
    assert_eq!(to(&redis_proxy), by_name("redis")["addr"].as_str().unwrap());
    assert_eq!(
        to(&post_proxy),
        by_name("post-service")["addr"].as_str().unwrap()
    );
    let gateway = line(by_name("gateway"));
    assert!(
        gateway.contains(&format!("redis://{}", listen(&redis_proxy))),
        "{gateway:?}"
    );
    assert!(
        gateway.contains(&format!("post=http://{}/graphql", listen(&post_proxy))),
        "{gateway:?}"
    );
    assert_stopped_by_sigterm(&record);
    let log = std::fs::read_to_string(run.join("logs/r1-far-netproxy-redis.log")).unwrap();
    assert!(log.contains("netproxy stopped by signal 15"), "{log}");

    let summary: Summary =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let far = &summary.configs[0];
    assert_eq!(far.errors_total, 0);
    assert_eq!(
        far.network,
        "post_service: 1 ms, redis: 2 ms (jitter 0.1 ms)"
    );
    let m = &far.rounds[0];
    assert!(m.redis_keys_per_round_trip.is_some(), "{m:?}");
    let proxies = m
        .cpu
        .iter()
        .find(|p| p.name == "netproxy")
        .expect("netproxy CPU");
    assert!(proxies.cpu_seconds.is_some(), "{proxies:?}");
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(md.contains("**Redis round trips**"), "{md}");
    assert!(
        md.contains("| far | post_service: 1 ms, redis: 2 ms (jitter 0.1 ms) |"),
        "{md}"
    );
    assert!(md.contains("| netproxy |"), "{md}");
    std::fs::remove_dir_all(&dir).ok();
}
