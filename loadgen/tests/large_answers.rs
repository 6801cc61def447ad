//! The one-query path of `loadgen bench` on answers over 100 KB, framed by length and
//! chunked, from a raw HTTP/1.1 server in the test: each answer is classified as a
//! small one is (GraphQL `errors` at the top level count; the key inside `data`, the
//! quoted word inside a string, an empty or null list do not), the places of its errors
//! are recorded, and the body size is counted whole.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use loadgen::bench::engine::{self, BenchPlan, StopRule};
use loadgen::bench::report::BenchReport;
use loadgen::bench::request_template::{BodySource, RequestTemplate};

/// A GraphQL answer of about 150 KB: `data` holds 1500 items of 100 bytes of text;
/// `before` and `after` go around `data` at the top level (`,"errors":[...]`).
fn answer(before: &str, data_extra: &str, after: &str) -> Vec<u8> {
    let items: Vec<String> = (0..1500)
        .map(|i| format!(r#"{{"id":{i},"text":"{}"}}"#, "r".repeat(100)))
        .collect();
    let body = format!(
        r#"{{{before}"data":{{{data_extra}"items":[{}]}}{after}}}"#,
        items.join(",")
    );
    serde_json::from_str::<serde_json::Value>(&body).expect("the answer is JSON");
    body.into_bytes()
}

/// Each answer the server knows, by name, and whether it carries GraphQL errors.
fn answers() -> Vec<(&'static str, Vec<u8>, bool)> {
    let error = r#"{"message":"text failed","path":["items",7,"text"]}"#;
    vec![
        ("ok", answer("", "", ""), false),
        (
            "errors-last",
            answer("", "", &format!(r#","errors":[{error}]"#)),
            true,
        ),
        (
            "errors-first",
            answer(&format!(r#""errors":[{error}],"#), "", ""),
            true,
        ),
        ("empty-errors", answer("", "", r#","errors":[]"#), false),
        ("null-errors", answer("", "", r#","errors":null"#), false),
        (
            "errors-in-data",
            answer("", r#""errors":[1],"note":"say \"errors\" twice","#, ""),
            false,
        ),
    ]
}

/// `body` framed by `content-length`, or chunked in pieces of `chunk` bytes.
fn framed(body: &[u8], chunked: Option<usize>) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n".to_vec();
    match chunked {
        None => {
            out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
            out.extend_from_slice(body);
        }
        Some(chunk) => {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
            for piece in body.chunks(chunk) {
                out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                out.extend_from_slice(piece);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        }
    }
    out
}

/// A keep-alive HTTP/1.1 server on a free port of 127.0.0.1, a thread per connection:
/// `GET /<name>/length` answers that answer by length, `GET /<name>/chunked` chunked
/// (in 4093-byte chunks, so that keys fall across chunk boundaries).
fn serve() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut table = Vec::new();
    for (name, body, _) in answers() {
        table.push((format!("/{name}/length"), framed(&body, None)));
        table.push((format!("/{name}/chunked"), framed(&body, Some(4093))));
    }
    let table = std::sync::Arc::new(table);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let table = std::sync::Arc::clone(&table);
            std::thread::spawn(move || answer_requests(stream, &table));
        }
    });
    addr
}

/// Answer each request of one connection until the client closes it.
fn answer_requests(stream: TcpStream, table: &[(String, Vec<u8>)]) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let answer = table.iter().find(|(p, _)| *p == path).map(|(_, a)| a);
        let written = match answer {
            Some(bytes) => writer.write_all(bytes),
            None => writer.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"),
        };
        if written.is_err() {
            return;
        }
    }
}

fn bench(url: &str, requests: u64) -> BenchReport {
    let plan = BenchPlan {
        templates: vec![RequestTemplate::new(url, None, &[], BodySource::Empty).unwrap()],
        connections: 3,
        threads: 1,
        stop: StopRule::Requests(requests),
        warmup: Duration::ZERO,
        timeout: Duration::from_secs(10),
        rate: None,
        progress: false,
        progress_bars: None,
        workload: None,
    };
    let result = engine::run(&plan).unwrap();
    BenchReport::new(&plan, &result)
}

#[test]
fn large_answers_by_length_and_chunked_are_classified_as_small_ones() {
    let addr = serve();
    const N: u64 = 12;
    for (name, body, has_errors) in answers() {
        assert!(body.len() >= 100_000, "{name}: {} bytes", body.len());
        for framing in ["length", "chunked"] {
            let report = bench(&format!("http://{addr}/{name}/{framing}"), N);
            let what = format!("{name} by {framing}: {:?}", report.errors);
            assert_eq!(report.requests, N, "{what}");
            assert_eq!(report.bytes, N * body.len() as u64, "{what}");
            let e = &report.errors;
            assert_eq!(e.transport + e.timeouts + e.non_2xx, 0, "{what}");
            if has_errors {
                assert_eq!(e.graphql, N, "{what}");
                assert_eq!(
                    report.error_paths.get("items[].text"),
                    Some(&N),
                    "{what}: {:?}",
                    report.error_paths
                );
                assert_eq!(report.error_examples["items[].text"], "text failed");
            } else {
                assert_eq!(e.graphql, 0, "{what}");
                assert!(report.error_paths.is_empty(), "{what}");
            }
        }
    }
}
