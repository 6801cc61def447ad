//! Workloads through real processes: the `loadgen` binary against the lab's gateway and
//! subgraphs (stale reads with invalidation off, none with it on), and against test
//! doubles started here (a server that hands one user's `me` to every caller must be
//! caught; a recording server shows that a seed fixes the operations sent, and that
//! Zipf keys arrive with Zipf's frequencies).
//!
//! The service binaries must be built next to loadgen's (`cargo build --workspace`).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use loadgen::workload::keys::{chi_square, chi_square_critical_0_001};
use loadgen::workload::{Workload, WorkloadReport};

/// Runs that start services take turns: they load both cores of the lab's machine.
static SERVICES: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    SERVICES.lock().unwrap_or_else(|p| p.into_inner())
}

fn loadgen() -> &'static str {
    env!("CARGO_BIN_EXE_loadgen")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("loadgen-workload-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A service process, killed by PID when dropped.
struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn healthy(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

fn start(name: &str, args: &[String], addr: SocketAddr) -> Service {
    let dir = Path::new(loadgen()).parent().unwrap();
    let binary = dir.join(name);
    assert!(
        binary.is_file(),
        "{name} is not built in {}: run `cargo build --workspace` before these tests",
        dir.display()
    );
    let log = std::env::temp_dir().join(format!("loadgen-workload-{name}-{}.log", addr.port()));
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(binary)
        .args(["--listen", &addr.to_string()])
        .args(args)
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let mut service = Service(child);
    let until = Instant::now() + Duration::from_secs(60);
    while !healthy(addr) {
        let exited = service.0.try_wait().unwrap();
        if exited.is_some() || Instant::now() >= until {
            panic!(
                "{name} {args:?} at {addr} never became healthy ({exited:?}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::remove_file(&log).ok();
    service
}

/// user-service, post-service and a gateway with `gateway_args`; returns the gateway URL.
fn lab(gateway_args: &[&str]) -> (Vec<Service>, String) {
    let addr = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
    let (users, posts, gateway) = (addr(free_port()), addr(free_port()), addr(free_port()));
    let mut services = vec![
        start("user-service", &[], users),
        start("post-service", &[], posts),
    ];
    let mut args = vec![
        "--subgraph".to_string(),
        format!("user=http://{users}/graphql"),
        "--subgraph".to_string(),
        format!("post=http://{posts}/graphql"),
    ];
    args.extend(gateway_args.iter().map(|a| a.to_string()));
    services.push(start("gateway", &args, gateway));
    (services, format!("http://{gateway}/graphql"))
}

fn bench(workload: &Path, url: &str, extra: &[&str]) -> Output {
    Command::new(loadgen())
        .args(["bench", "--workload"])
        .arg(workload)
        .args(["--url", url, "-t", "1", "--json", "--no-progress"])
        .args(extra)
        .output()
        .unwrap()
}

fn report_of(output: &Output) -> WorkloadReport {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "not a JSON report ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    serde_json::from_value(report["workload"].clone()).unwrap()
}

/// Reads of the seed data's four posts with one write in ten, retitling a post to v<n>.
const READS_AND_WRITES: &str = r#"
[workload]
seed = 5
[workload.keys]
post = { distribution = "uniform", count = 4 }
[[workload.operation]]
name = "read"
weight = 9
document = 'query($pid: ID!) { getPost(pid: $pid) { pid title author { id name } } }'
variables = { pid = "p{post}" }
reads = [
  { at = "getPost", type = "Post", id = "pid", version = "title", expect_id = "p{post}" },
  { at = "getPost.author", type = "User", id = "id", version = "name" },
]
[[workload.operation]]
name = "retitle"
weight = 1
document = 'mutation($pid: ID!, $t: String!) { updatePostTitle(pid: $pid, title: $t) { pid title } }'
variables = { pid = "p{post}", t = "{version}" }
write = { type = "Post", id = "p{post}" }
"#;

/// The workload above against one gateway at TTL 60 s with `gateway_args` besides.
fn freshness_at_ttl_60(name: &str, connections: &str, gateway_args: &[&str]) -> WorkloadReport {
    let _turn = one_at_a_time();
    let dir = scratch(name);
    let file = dir.join("w.toml");
    std::fs::write(&file, READS_AND_WRITES).unwrap();
    let mut args = vec!["--ttl", "60"];
    args.extend_from_slice(gateway_args);
    let (_services, url) = lab(&args);
    let out = bench(&file, &url, &["-c", connections, "-d", "3s"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let w = report_of(&out);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(w.wrong_answers, 0, "{:?}", w.wrong_answer_examples);
    assert!(w.writes_acked >= 10, "{w:?}");
    assert!(w.reads_checked >= 100, "{w:?}");
    w
}

#[test]
fn stale_reads_are_found_when_mutations_do_not_invalidate() {
    let w = freshness_at_ttl_60("inval-off", "8", &["--invalidation", "off"]);
    // At TTL 60 s every post's first cached answer outlives its writes.
    assert!(w.stale_reads > 0, "{w:?}");
    assert!(w.stale_fraction.unwrap() > 0.1, "{w:?}");
    assert!(
        w.stale_age_ms.max > 0.0 && w.stale_age_ms.max < 10_000.0,
        "{w:?}"
    );
}

#[test]
fn no_stale_reads_on_one_gateway_with_invalidation() {
    // Invalidation on is the gateway's default. Eight connections, so reads race the
    // writes: a read sent after a write's answer must never see an older version (it
    // must not join, nor be served what was stored by, a fetch that began before it).
    let w = freshness_at_ttl_60("inval-on", "8", &[]);
    assert_eq!(w.stale_reads, 0, "{w:?}");
}

/// What the double saw: each request's authorization header and body, in order.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A GraphQL double: `me` always answers user u1, whoever asks; `getPost` answers the
/// pid asked for. Records each request's authorization header and body.
fn double() -> (SocketAddr, Seen, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let record = Arc::clone(&seen);
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            // Serves until the test's last run is over (the test process ends it).
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let record = Arc::clone(&record);
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let record = Arc::clone(&record);
                        async move {
                            let auth = req
                                .headers()
                                .get("authorization")
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("")
                                .to_string();
                            let body = req.into_body().collect().await?.to_bytes();
                            let text = String::from_utf8_lossy(&body).into_owned();
                            let answer = if text.contains("me {") {
                                r#"{"data":{"me":{"id":"u1","name":"John"}}}"#.to_string()
                            } else {
                                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                                let pid = v["variables"]["pid"].as_str().unwrap_or("p0");
                                format!(r#"{{"data":{{"getPost":{{"pid":"{pid}","title":"t"}}}}}}"#)
                            };
                            record.lock().unwrap().push((auth, text));
                            Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::from(answer))))
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    (addr, seen, thread)
}

const ME: &str = r#"
[workload]
seed = 9
[workload.keys]
user = { distribution = "uniform", count = 5 }
[[workload.operation]]
name = "me"
weight = 1
document = '{ me { id name } }'
headers = ["authorization: Bearer u{user}"]
reads = [{ at = "me", type = "User", id = "id", version = "name", expect_id = "u{user}" }]
"#;

#[test]
fn another_users_me_is_a_wrong_answer_and_fails_the_run() {
    let (addr, seen, _server) = double();
    let dir = scratch("wrong");
    let file = dir.join("me.toml");
    std::fs::write(&file, ME).unwrap();
    let out = bench(
        &file,
        &format!("http://{addr}/graphql"),
        &["-c", "2", "-n", "200"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "wrong answers must fail the command");
    assert!(stderr.contains("WRONG ANSWERS"), "{stderr}");
    let w = report_of(&out);
    let asked_others = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(auth, _)| auth != "Bearer u1")
        .count() as u64;
    // Every answer to someone other than u1 is caught, and only those (warm-up: none).
    assert_eq!(w.wrong_answers, asked_others, "{w:?}");
    assert!(asked_others > 100, "{asked_others}");
    assert!(
        w.wrong_answer_examples[0].contains("asked for User u"),
        "{w:?}"
    );
    assert!(w.wrong_answer_examples[0].contains("got User u1"), "{w:?}");
    std::fs::remove_dir_all(&dir).ok();
}

const POSTS: &str = r#"
[workload]
seed = 3
[workload.keys]
post = { distribution = "zipf", exponent = 0.99, count = 200 }
user = { distribution = "uniform", count = 50 }
[[workload.operation]]
name = "post"
weight = 4
document = 'query($pid: ID!) { getPost(pid: $pid) { pid title } }'
variables = { pid = "p{post}" }
headers = ["authorization: Bearer u{user}"]
reads = [{ at = "getPost", type = "Post", id = "pid", expect_id = "p{post}" }]
[[workload.operation]]
name = "me"
weight = 1
document = '{ me { id } }'
"#;

#[test]
fn a_seed_fixes_the_operations_and_zipf_keys_arrive_with_zipf_frequencies() {
    let (addr, seen, _server) = double();
    let dir = scratch("seed");
    let file = dir.join("posts.toml");
    std::fs::write(&file, POSTS).unwrap();
    let url = format!("http://{addr}/graphql");
    let mut sequences = Vec::new();
    for seed in [None, None, Some("4")] {
        seen.lock().unwrap().clear();
        let mut args = vec!["-c", "1", "-n", "300"];
        if let Some(s) = seed {
            args.extend(["--seed", s]);
        }
        let out = bench(&file, &url, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        sequences.push(std::mem::take(&mut *seen.lock().unwrap()));
    }
    assert_eq!(sequences[0].len(), 300);
    assert_eq!(
        sequences[0], sequences[1],
        "the same seed sends the same operations"
    );
    assert_ne!(sequences[0], sequences[2], "another seed sends others");

    // The keys the server saw, from many connections, against Zipf 0.99 over 200 keys.
    seen.lock().unwrap().clear();
    let out = bench(&file, &url, &["-c", "4", "-n", "25000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    for (_, body) in seen.lock().unwrap().iter() {
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        if let Some(pid) = v["variables"]["pid"].as_str() {
            *counts.entry(pid[1..].parse().unwrap()).or_default() += 1;
        }
    }
    let workload = Workload::from_toml(POSTS).unwrap().unwrap();
    let keys = &workload.keys[0];
    let observed: Vec<u64> = (1..=200)
        .map(|k| counts.get(&k).copied().unwrap_or(0))
        .collect();
    let fit = chi_square(&observed, &keys.probabilities());
    let critical = chi_square_critical_0_001(199.0);
    assert!(
        fit < critical,
        "χ² {fit:.0} ≥ {critical:.0} over {} draws",
        observed.iter().sum::<u64>()
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `loadgen matrix` with a workload: freshness in the summary, the trade-off chart, CPU
/// per request for every process, and perf's profile holding the gateway's CPU.
#[test]
fn the_matrix_reports_freshness_cpu_per_request_and_profile_coverage() {
    let _turn = one_at_a_time();
    let dir = scratch("matrix");
    let experiment = format!(
        r#"name = "fresh"
baseline = "no-cache"
{READS_AND_WRITES}
[load]
connections = 8
[profile]
hz = 99
[[config]]
name = "no-cache"
[[config]]
name = "ttl-60"
gateway = ["--ttl", "60"]
"#
    );
    let file = dir.join("fresh.toml");
    std::fs::write(&file, experiment).unwrap();
    let run = dir.join("run");
    let bin_dir = Path::new(loadgen()).parent().unwrap();
    let out = Command::new(loadgen())
        .args([
            "matrix",
            "--quick",
            "--duration",
            "3s",
            "--warmup",
            "1s",
            "--config",
        ])
        .arg(&file)
        .arg("--out")
        .arg(&run)
        .arg("--bin-dir")
        .arg(bin_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: loadgen::matrix::summary::Summary =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let perf = loadgen::matrix::profile::perf::find().is_ok();
    for c in &summary.configs {
        let m = &c.median;
        assert!(m.reads_checked.unwrap() > 50.0, "{}: {m:?}", c.name);
        assert_eq!(m.wrong_answers, Some(0), "{}", c.name);
        // The figure is there; whether it is 0 is the freshness tests' question (a busy
        // gateway can race an in-flight fetch against an invalidation: see docs/workloads.md).
        assert!(m.stale_fraction.is_some(), "{}: {m:?}", c.name);
        for process in ["gateway", "user-service", "post-service", "loadgen"] {
            let us = m.cpu_us_per_request.get(process).copied();
            assert!(
                us.is_some_and(|us| us >= 0.0),
                "{}: {process}: {m:?}",
                c.name
            );
        }
        assert!(m.cpu_us_per_request["gateway"] > 0.0, "{m:?}");
        let w = c.rounds[0].workload.as_ref().unwrap();
        assert!(w.writes_acked > 0 && w.operations.len() == 2, "{w:?}");
        if perf {
            // perf sees the whole process: kernel and libc frames, ≥ 90% of its CPU.
            // Above 1 is not a defect of the profile: a quick run's gateway gets a
            // fraction of a second of CPU, /proc counts it in 10 ms ticks, and on a
            // shared VM the sampling timer may count time the host took the core away,
            // which the scheduler's clock leaves out (not measured apart). CI clones
            // measured 1.17 and 1.61 for TTL 60, where the gateway mostly waits on
            // sockets and runs in short slices. The upper bound only catches a double
            // count (every sample taken twice, or one process's CPU set against two).
            let coverage = m.profile_coverage.unwrap();
            assert!(
                (0.9..2.0).contains(&coverage),
                "{}: coverage {coverage}",
                c.name
            );
            let folded =
                std::fs::read_to_string(run.join("profiles").join(format!("{}.folded", c.name)))
                    .unwrap();
            assert!(folded.contains("_[k]"), "{}: kernel frames", c.name);
            // glibc's frames (the allocator, memory copies, syscall wrappers), which
            // pprof's blocklist used to drop.
            let libc = [
                "malloc",
                "free",
                "memmove",
                "memcpy",
                "__GI_",
                "epoll_wait",
                "writev",
            ];
            assert!(
                libc.iter().any(|f| folded.contains(f)),
                "{}: libc frames in {folded}",
                c.name
            );
        }
    }
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(
        md.contains("stale reads") && md.contains("wrong answers"),
        "{md}"
    );
    assert!(
        md.contains("| config | gateway | user-service | post-service | loadgen |"),
        "{md}"
    );
    let svg = std::fs::read_to_string(run.join("tradeoff.svg")).unwrap();
    assert!(svg.contains("<circle") && svg.contains("ttl-60"), "{svg}");
    std::fs::remove_dir_all(&dir).ok();
}
