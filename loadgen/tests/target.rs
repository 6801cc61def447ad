//! `loadgen target` through real HTTP: with `--body FILE` it answers the file's bytes as
//! `application/json` (in process, and as the binary on a free port), and it refuses a
//! file it cannot read, naming `--body`. With `--replay DIR` it answers each recorded
//! request with its recorded answer, and any other with 404.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http1_wire::{AnswerRules, Buffers, Connection};
use loadgen::replay::Replay;
use loadgen::target_server::{BackgroundTarget, Setup};

// The binary under test and a scratch folder; the rest of support is for the matrix tests.
#[allow(dead_code)]
mod support;

const RULES: AnswerRules = AnswerRules {
    max_body: 1 << 24,
    head_request: false,
};

/// One `POST path` to `addr` with the body `{}`: the status, the content-type and the
/// body.
fn fetch(addr: std::net::SocketAddr, path: &str) -> (u16, String, Vec<u8>) {
    post(addr, path, b"{}")
}

/// One `POST path` to `addr` with `body`: the status, the content-type and the body.
fn post(addr: std::net::SocketAddr, path: &str, body: &[u8]) -> (u16, String, Vec<u8>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut c = Connection::open(addr).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let buffers = Buffers::new();
        let mut content_type = String::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let a = c
            .exchange_in_place(
                &[head.as_bytes(), body],
                deadline,
                RULES,
                &buffers,
                |name, value| {
                    if name.eq_ignore_ascii_case("content-type") {
                        content_type = String::from_utf8_lossy(value).into_owned();
                    }
                },
            )
            .await
            .unwrap();
        (a.status, content_type, c.body().to_vec())
    })
}

/// A deep answer's size of JSON (about 98.5 KB).
fn big_answer() -> Vec<u8> {
    let mut body = br#"{"data":{"topProducts":["#.to_vec();
    for i in 0..1000 {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(
            format!(r#"{{"upc":"{i:012}","name":"{}"}}"#, "n".repeat(70)).as_bytes(),
        );
    }
    body.extend_from_slice(b"]}}");
    body
}

#[test]
fn the_target_answers_the_body_it_is_given() {
    let body = big_answer();
    assert!(body.len() > 98_000, "{}", body.len());
    let target =
        BackgroundTarget::start_with(Setup::answering(Bytes::from(body.clone())), 1).unwrap();
    for path in ["/graphql", "/delay/1", "/mixed"] {
        let (status, content_type, got) = fetch(target.addr, path);
        assert_eq!(
            (status, content_type.as_str()),
            (200, "application/json"),
            "{path}"
        );
        assert!(
            got == body,
            "{path}: {} bytes, not the {} given",
            got.len(),
            body.len()
        );
    }
    // The paths with answers of their own keep them.
    let (status, _, got) = fetch(target.addr, "/graphql-errors");
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&got).contains("\"errors\""));
    let (status, _, _) = fetch(target.addr, "/status/418");
    assert_eq!(status, 418);
}

/// Kills the target process when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_binary_serves_a_body_file() {
    let dir = support::scratch("target-body");
    let file = dir.join("answer.json");
    let body = big_answer();
    std::fs::write(&file, &body).unwrap();
    let mut child = Running(
        Command::new(support::loadgen())
            .args(["target", "--listen", "127.0.0.1:0", "--body"])
            .arg(&file)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut first = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim()
        .strip_prefix("target listening on http://")
        .unwrap_or_else(|| panic!("the first line names the address: {first:?}"))
        .parse()
        .unwrap();
    let (status, content_type, got) = fetch(addr, "/graphql");
    assert_eq!((status, content_type.as_str()), (200, "application/json"));
    assert!(
        got == body,
        "{} bytes, not the {} of the file",
        got.len(),
        body.len()
    );
    drop(child);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_binary_names_an_unreadable_body_file() {
    let dir = support::scratch("target-no-body");
    // A file that is not there, and a folder.
    for path in [dir.join("missing.json"), dir.clone()] {
        let output = Command::new(support::loadgen())
            .args(["target", "--listen", "127.0.0.1:0", "--body"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(!output.status.success(), "{}", path.display());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("--body") && stderr.contains(&*path.to_string_lossy()),
            "{stderr}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A recording as scripts/lib/exchange_recorder.py writes one: two requests to
/// products (the second with the big answer), one to accounts.
fn recording(dir: &std::path::Path) -> Vec<(&'static str, Vec<u8>, Vec<u8>)> {
    let exchanges = vec![
        (
            "products",
            br#"{"query":"{ topProducts { upc } }"}"#.to_vec(),
            br#"{"data":{"topProducts":[]}}"#.to_vec(),
        ),
        (
            "products",
            br#"{"query":"{ top { upc } }"}"#.to_vec(),
            big_answer(),
        ),
        (
            "accounts",
            br#"{"query":"{ me { id } }"}"#.to_vec(),
            br#"{"data":{"me":{"id":"1"}}}"#.to_vec(),
        ),
    ];
    for (i, (name, request, answer)) in exchanges.iter().enumerate() {
        std::fs::write(
            dir.join(format!("{:03}-{name}.request.json", i + 1)),
            request,
        )
        .unwrap();
        std::fs::write(dir.join(format!("{:03}-{name}.answer.json", i + 1)), answer).unwrap();
    }
    exchanges
}

#[test]
fn a_replay_answers_each_recorded_request_and_no_other() {
    let dir = support::scratch("target-replay");
    let exchanges = recording(&dir);
    let replay = Replay::load(&dir).unwrap();
    assert_eq!(replay.len(), 3);
    let target = BackgroundTarget::start_with(
        Setup {
            replay: Some(replay),
            ..Setup::default()
        },
        1,
    )
    .unwrap();
    for (name, request, answer) in &exchanges {
        let (status, content_type, got) = post(target.addr, &format!("/{name}"), request);
        assert_eq!(
            (status, content_type.as_str()),
            (200, "application/json"),
            "{name}"
        );
        assert!(
            got == *answer,
            "{name}: {} bytes, not the {} recorded",
            got.len(),
            answer.len()
        );
    }
    // A request recorded for another subgraph, and one never recorded: 404, said why.
    let (status, _, got) = post(target.addr, "/accounts", &exchanges[0].1);
    assert_eq!(status, 404);
    let said = String::from_utf8_lossy(&got);
    assert!(
        said.contains("\"errors\"") && said.contains("accounts"),
        "{said}"
    );
    let (status, _, _) = post(target.addr, "/products", br#"{"query":"{ other }"}"#);
    assert_eq!(status, 404);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_recording_that_cannot_be_replayed_is_refused_by_name() {
    let dir = support::scratch("target-bad-replay");
    // Empty, then a request without its answer, then one request with two answers.
    let empty = Replay::load(&dir).unwrap_err().to_string();
    assert!(empty.contains("no NNN-NAME.request.json"), "{empty}");
    std::fs::write(dir.join("001-products.request.json"), b"{}").unwrap();
    let lone = Replay::load(&dir).unwrap_err().to_string();
    assert!(
        lone.contains("001-products.request.json") && lone.contains("answer"),
        "{lone}"
    );
    std::fs::write(dir.join("001-products.answer.json"), b"1").unwrap();
    std::fs::write(dir.join("002-products.request.json"), b"{}").unwrap();
    std::fs::write(dir.join("002-products.answer.json"), b"2").unwrap();
    let conflict = Replay::load(&dir).unwrap_err().to_string();
    assert!(
        conflict.contains("002-products.request.json") && conflict.contains("another answer"),
        "{conflict}"
    );
    // The binary names the flag, and will not take both --body and --replay.
    for args in [
        vec!["--replay", "/nonexistent/recording"],
        vec!["--replay", ".", "--body", "x.json"],
    ] {
        let output = Command::new(support::loadgen())
            .args(["target", "--listen", "127.0.0.1:0"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--replay"), "{args:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
