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
use std::process::{Child, Command, Output, Stdio};
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
    let child = Command::new(binary)
        .args(["--listen", &addr.to_string()])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let service = Service(child);
    let until = Instant::now() + Duration::from_secs(60);
    while !healthy(addr) {
        assert!(
            Instant::now() < until,
            "{name} at {addr} never became healthy"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
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

fn freshness_with_invalidation(switch: &str) -> WorkloadReport {
    let _turn = one_at_a_time();
    let dir = scratch(&format!("fresh-{switch}"));
    let file = dir.join("w.toml");
    std::fs::write(&file, READS_AND_WRITES).unwrap();
    let (_services, url) = lab(&["--ttl", "60", "--invalidation", switch]);
    let out = bench(&file, &url, &["-c", "8", "-d", "3s"]);
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
    let w = freshness_with_invalidation("off");
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
    let w = freshness_with_invalidation("on");
    assert_eq!(w.stale_reads, 0, "{w:?}");
}

/// A GraphQL double: `me` always answers user u1, whoever asks; `getPost` answers the
/// pid asked for. Records each request's authorization header and body.
fn double() -> (
    SocketAddr,
    Arc<Mutex<Vec<(String, String)>>>,
    std::thread::JoinHandle<()>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
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
