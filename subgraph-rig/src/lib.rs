//! The subgraphs' test rig, shared by the test suites of every subgraph crate: a router
//! served in this process on a free 127.0.0.1 port (by `subgraph_host::serve`, drained
//! like a process), a subgraph binary run as a real process on a free port and stopped
//! by PID, and the HTTP calls tests make to them.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use axum::Router;
use serde_json::{json, Value};
use tokio::sync::oneshot;

/// A router served in this process on a free port, until drained or dropped.
pub struct Service {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<subgraph_host::Drained>,
}

impl Service {
    pub async fn start(router: Router) -> Service {
        Service::start_draining_within(router, Duration::from_secs(5)).await
    }

    pub async fn start_draining_within(router: Router, drain_timeout: Duration) -> Service {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(subgraph_host::serve(
            listener,
            router,
            async {
                let _ = stopped.await;
            },
            drain_timeout,
        ));
        Service {
            addr,
            stop: Some(stop),
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/graphql", self.addr)
    }

    /// Begin the drain (what SIGTERM does in a process) and wait for it to end.
    pub async fn drain(mut self) -> subgraph_host::Drained {
        let _ = self.stop.take().unwrap().send(());
        (&mut self.task).await.unwrap()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// POST `{"query": query, "variables": variables}` to `url`: the status and body text.
pub async fn post(
    http: &reqwest::Client,
    url: &str,
    query: &str,
    variables: Value,
) -> (u16, String) {
    let r = http
        .post(url)
        .json(&json!({ "query": query, "variables": variables }))
        .send()
        .await
        .expect("the subgraph answers");
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Run `query` and return its `data`, failing on errors or a non-200 status.
pub async fn data(http: &reqwest::Client, url: &str, query: &str, variables: Value) -> Value {
    let (status, body) = post(http, url, query, variables).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v.get("errors").is_none(), "{query} -> {body}");
    v["data"].clone()
}

/// The value of the sample of `name` (with any labels) in `/metrics` at `addr`.
pub async fn metric(http: &reqwest::Client, addr: SocketAddr, name: &str) -> f64 {
    labelled_metric(http, addr, name, "").await
}

/// The value of the first sample of `name` whose labels contain `label` (e.g.
/// `fault="hang"`) in `/metrics` at `addr`.
pub async fn labelled_metric(
    http: &reqwest::Client,
    addr: SocketAddr,
    name: &str,
    label: &str,
) -> f64 {
    let text = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.split(['{', ' ']).next() == Some(name) && l.contains(label))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
}

/// A subgraph process on a free port, learnt from the line it prints when listening.
pub struct Process {
    pub addr: SocketAddr,
    child: Child,
    /// Standard error after the listening line, read on a thread.
    rest: std::sync::mpsc::Receiver<String>,
}

/// Start subgraph binary `binary` on a free port with `args`, its standard error piped.
fn spawn(binary: &Path, args: &[&str]) -> Child {
    Command::new(binary)
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

impl Process {
    /// Start subgraph binary `binary` with `args` (and `--listen 127.0.0.1:0`).
    pub fn start(binary: &Path, args: &[&str]) -> Process {
        let name = binary.display();
        let mut child = spawn(binary, args);
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = match lines.next() {
                Some(Ok(line)) => line,
                _ => panic!(
                    "{name} {args:?} exited before listening: {:?}",
                    child.wait()
                ),
            };
            if let Some(rest) = line.split_once(" listening on http://") {
                break rest.1.trim_end_matches("/graphql").parse().unwrap();
            }
        };
        let (tx, rest) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Process { addr, child, rest }
    }

    pub fn url(&self) -> String {
        format!("http://{}/graphql", self.addr)
    }

    /// Send SIGTERM, as a process manager does.
    pub fn terminate(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on the PID of our own child, which has not been reaped.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }

    /// Wait up to `limit` for the process to exit; its status and what it printed after
    /// listening. Panics (after killing it) if it is still running.
    pub fn wait_exit(&mut self, limit: Duration) -> (ExitStatus, String) {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Its standard error is closed now: read to the end.
                let mut printed = Vec::new();
                while let Ok(line) = self.rest.recv_timeout(Duration::from_secs(2)) {
                    printed.push(line);
                }
                return (status, printed.join("\n"));
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the process did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run a subgraph binary that is expected to refuse its arguments: its exit code and
/// standard error. Panics if it is still running after 10 s (it accepted them).
pub fn refused(binary: &Path, args: &[&str]) -> (Option<i32>, String) {
    let name = binary.display();
    let mut child = spawn(binary, args);
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name} {args:?} was accepted: still running after 10 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (status.code(), reader.join().unwrap())
}
