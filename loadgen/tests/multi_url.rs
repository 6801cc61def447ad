//! Several `--url`s and `--unique-literals`, over real HTTP on 127.0.0.1: connections go
//! round robin to the URLs, and every request's `{{n}}` is a number no other request of
//! the run got, across connections and threads.
//!
//! The servers here record what they receive (connections accepted, request bodies),
//! which the calibration target does not. Every run is bounded by a request count and
//! a timeout.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use loadgen::bench::engine::{self, BenchPlan, StopRule};
use loadgen::bench::report::BenchReport;
use loadgen::bench::request_template::{BodySource, RequestTemplate};
use tokio::sync::oneshot;

/// What one recording server saw.
#[derive(Debug, Default)]
struct Seen {
    connections: usize,
    bodies: Vec<String>,
}

/// A server on its own thread that answers `{"data":{"ok":true}}` and records.
struct Recorder {
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Recorder {
    fn start() -> Recorder {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (shutdown, stopped) = oneshot::channel::<()>();
        let record = Arc::clone(&seen);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let serve = async {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            continue;
                        };
                        record.lock().unwrap().connections += 1;
                        let record = Arc::clone(&record);
                        tokio::spawn(async move {
                            let service =
                                service_fn(move |request: Request<hyper::body::Incoming>| {
                                    let record = Arc::clone(&record);
                                    async move {
                                        let body = request.into_body().collect().await?.to_bytes();
                                        record
                                            .lock()
                                            .unwrap()
                                            .bodies
                                            .push(String::from_utf8_lossy(&body).into_owned());
                                        Ok::<_, hyper::Error>(Response::new(Full::new(
                                            Bytes::from_static(br#"{"data":{"ok":true}}"#),
                                        )))
                                    }
                                });
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        });
                    }
                };
                tokio::select! {
                    _ = serve => {}
                    _ = stopped => {}
                }
            });
        });
        Recorder {
            addr,
            seen,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/graphql", self.addr)
    }

    fn connections(&self) -> usize {
        self.seen.lock().unwrap().connections
    }

    fn bodies(&self) -> Vec<String> {
        self.seen.lock().unwrap().bodies.clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn plan(templates: Vec<RequestTemplate>, connections: usize, threads: usize, n: u64) -> BenchPlan {
    BenchPlan {
        templates,
        connections,
        threads,
        stop: StopRule::Requests(n),
        warmup: Duration::ZERO,
        timeout: Duration::from_secs(5),
        rate: None,
        progress: false,
        progress_bars: None,
        workload: None,
    }
}

fn graphql(url: &str, query: &str, variables: Option<&str>, unique: bool) -> RequestTemplate {
    RequestTemplate::with_numbering(
        url,
        None,
        &[],
        BodySource::GraphQl {
            query: query.into(),
            variables: variables.map(str::to_string),
        },
        unique,
    )
    .unwrap()
}

#[test]
fn connections_go_round_robin_over_the_urls() {
    let (a, b, c) = (Recorder::start(), Recorder::start(), Recorder::start());
    let templates: Vec<RequestTemplate> = [&a, &b, &c]
        .iter()
        .map(|s| graphql(&s.url(), "{ ok }", None, false))
        .collect();
    // 7 connections over 3 URLs on 2 threads (4 + 3 connections): connection i → URL i % 3,
    // so A gets connections 0, 3, 6, B gets 1, 4 and C gets 2, 5. Enough requests that
    // every connection opens before they are spent, even on a loaded machine (700 were
    // once spent before the last thread had connected).
    let p = plan(templates, 7, 2, 20_000);
    let result = engine::run(&p).unwrap();
    let report = BenchReport::new(&p, &result);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_eq!(report.requests, 20_000);
    assert_eq!(
        (a.connections(), b.connections(), c.connections()),
        (3, 2, 2)
    );
    let counts = (a.bodies().len(), b.bodies().len(), c.bodies().len());
    assert_eq!(counts.0 + counts.1 + counts.2, 20_000, "{counts:?}");
    assert!(
        counts.0 > 0 && counts.1 > 0 && counts.2 > 0,
        "every URL was loaded: {counts:?}"
    );
    assert_eq!(report.url, a.url());
    assert_eq!(report.urls, [a.url(), b.url(), c.url()]);
    assert!(report.to_text().contains("round robin over 3 URLs"));
    // Without --unique-literals every body is the same.
    assert!(a
        .bodies()
        .iter()
        .all(|body| body == r#"{"query":"{ ok }"}"#));
}

/// The number in `"p<n>"` right after `marker` in `body`.
fn number_after(body: &str, marker: &str) -> u64 {
    let start = body
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} in {body}"))
        + marker.len();
    let digits: String = body[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("a number after {marker} in {body}"))
}

#[test]
fn unique_literals_number_every_request_once_across_threads_and_urls() {
    let (a, b) = (Recorder::start(), Recorder::start());
    let document = r#"{ getPost(pid: "p{{n}}") { pid } }"#;
    let variables = r#"{"p":"p{{n}}","id":{{n}}}"#;
    let templates = vec![
        graphql(&a.url(), document, Some(variables), true),
        graphql(&b.url(), document, Some(variables), true),
    ];
    let p = plan(templates, 6, 3, 900);
    let result = engine::run(&p).unwrap();
    let report = BenchReport::new(&p, &result);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert!(report.unique_literals);
    let mut all = a.bodies();
    all.extend(b.bodies());
    assert_eq!(all.len(), 900);
    let mut numbers = HashSet::new();
    for body in &all {
        let v: serde_json::Value = serde_json::from_str(body).expect("numbered bodies are JSON");
        let query = v["query"].as_str().unwrap();
        // The same number everywhere in one request.
        let n = number_after(query, "pid: \"p");
        assert_eq!(v["variables"]["p"], format!("p{n}"), "{body}");
        assert_eq!(v["variables"]["id"], n, "{body}");
        assert!(!query.contains("{{n}}"), "{body}");
        assert!(numbers.insert(n), "number {n} sent twice");
    }
    assert_eq!(numbers.len(), 900);
}

#[test]
fn the_binary_loads_several_urls_and_numbers_bodies() {
    let (a, b) = (Recorder::start(), Recorder::start());
    let dir = std::env::temp_dir().join(format!("loadgen-multi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let query = dir.join("q.graphql");
    std::fs::write(&query, "query($p: ID!) { getPost(pid: $p) { pid } }").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["bench", "--url", &a.url(), "--url", &b.url()])
        .args([
            "-c",
            "4",
            "-t",
            "1",
            "-n",
            "200",
            "--json",
            "--unique-literals",
        ])
        .arg("--query-file")
        .arg(&query)
        .args(["--variables", r#"{"p":"p{{n}}"}"#])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(v["url"], a.url());
    assert_eq!(v["urls"], serde_json::json!([a.url(), b.url()]));
    assert_eq!(v["requests"], 200);
    assert_eq!((a.connections(), b.connections()), (2, 2));
    let mut all = a.bodies();
    all.extend(b.bodies());
    let distinct: HashSet<&String> = all.iter().collect();
    assert_eq!(
        distinct.len(),
        all.len(),
        "one document, new variables each time"
    );
    assert!(all
        .iter()
        .all(|body| body.contains("query($p: ID!) { getPost(pid: $p) { pid } }")));

    // A template without {{n}} is refused, naming the flag.
    std::fs::write(&query, "{ ok }").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["bench", "--url", &a.url(), "-n", "1", "--unique-literals"])
        .arg("--query-file")
        .arg(&query)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--unique-literals") && stderr.contains("{{n}}"),
        "{stderr}"
    );

    // Every URL must be plain http, and the message names --url.
    let output = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["bench", "--url", &a.url(), "--url", "https://127.0.0.1:1/"])
        .args(["-n", "1"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--url") && stderr.contains("https"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
