//! Bad input gets a clear error with the GraphQL-over-HTTP status, never a panic, a
//! hang or a 5xx, and the gateway keeps serving everyone else meanwhile.

mod common;

use std::time::Duration;

use common::Lab;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn first_error(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    v["errors"][0]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no error in {body}"))
        .to_string()
}

#[tokio::test]
async fn malformed_requests_are_4xx_with_a_message() {
    let lab = Lab::start().await;
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "non-JSON",
            b"query { me { id } }".to_vec(),
            400,
            "not valid JSON",
        ),
        (
            "truncated JSON",
            br#"{"query": "{ me { id } }""#.to_vec(),
            400,
            "not valid JSON",
        ),
        (
            "invalid UTF-8",
            b"{\"query\": \"\xff\xfe\"}".to_vec(),
            400,
            "not valid JSON",
        ),
        ("not an object", b"[1, 2]".to_vec(), 400, "JSON object"),
        (
            "missing query",
            br#"{"variables": {}}"#.to_vec(),
            400,
            "no \"query\"",
        ),
        (
            "non-string query",
            br#"{"query": 42}"#.to_vec(),
            400,
            "\"query\" must be a string",
        ),
        (
            "non-object variables",
            br#"{"query": "{ me { id } }", "variables": [1]}"#.to_vec(),
            400,
            "\"variables\" must be an object",
        ),
        (
            "non-string operationName",
            br#"{"query": "{ me { id } }", "operationName": 1}"#.to_vec(),
            400,
            "operationName",
        ),
    ];
    for (name, body, status, needle) in cases {
        let (got, text) = lab.post_raw(body).await;
        assert_eq!(got, status, "{name}: {text}");
        assert!(first_error(&text).contains(needle), "{name}: {text}");
    }
    // Wrong content type, and a media type we cannot produce.
    let r = lab
        .http
        .post(lab.gateway.url())
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    let r = lab
        .http
        .post(lab.gateway.url())
        .header("accept", "text/html")
        .json(&json!({"query": "{ me { id } }"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 406);
}

/// Media types are negotiated as HTTP says (RFC 9110): their case does not matter, `q=0`
/// rules one out and the higher `q` wins; a wildcard alone means `application/json`.
#[tokio::test]
async fn media_types_are_negotiated_by_http_rules() {
    let lab = Lab::start().await;
    const GRAPHQL: &str = "application/graphql-response+json";
    const JSON: &str = "application/json";
    let cases: Vec<(&str, &str, Option<&str>)> = vec![
        ("application/json", "Application/JSON", Some(JSON)),
        (
            "application/json",
            "application/GraphQL-Response+JSON",
            Some(GRAPHQL),
        ),
        ("APPLICATION/JSON; charset=UTF-8", "*/*", Some(JSON)),
        ("application/json", "application/*", Some(JSON)),
        (
            "application/json",
            "application/graphql-response+json, application/json;q=0.9",
            Some(GRAPHQL),
        ),
        (
            "application/json",
            "application/json, application/graphql-response+json",
            Some(GRAPHQL),
        ),
        (
            "application/json",
            "application/graphql-response+json;q=0.5, application/json",
            Some(JSON),
        ),
        (
            "application/json",
            "application/graphql-response+json; q=0, application/json",
            Some(JSON),
        ),
        (
            "application/json",
            "application/json;q=0, */*",
            Some(GRAPHQL),
        ),
        (
            "application/json",
            "application/graphql-response+json;q=0.2, */*;q=0.5",
            Some(JSON),
        ),
        (
            "application/json",
            "application/graphql-response+json;q=0",
            None,
        ),
        ("application/json", "application/json;q=0, text/html", None),
    ];
    for (content_type, accept, expected) in cases {
        let r = lab
            .http
            .post(lab.gateway.url())
            .header("content-type", content_type)
            .header("accept", accept)
            .body(r#"{"query": "{ me { id } }"}"#)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let got = r.headers()["content-type"].to_str().unwrap().to_string();
        let text = r.text().await.unwrap();
        match expected {
            Some(media) => {
                assert_eq!(status, 200, "{content_type} / {accept}: {text}");
                assert_eq!(
                    got.split(';').next().unwrap(),
                    media,
                    "{content_type} / {accept}"
                );
                assert_eq!(
                    serde_json::from_str::<Value>(&text).unwrap(),
                    json!({ "data": { "me": { "id": "u1" } } })
                );
            }
            None => {
                assert_eq!(status, 406, "{content_type} / {accept}: {text}");
                assert!(first_error(&text).contains("Accept"), "{text}");
            }
        }
    }
}

#[tokio::test]
async fn invalid_documents_are_graphql_errors() {
    let lab = Lab::start().await;
    let cases: Vec<(&str, Value, &str)> = vec![
        ("syntax error", json!({ "query": "{ me { id " }), "expected"),
        (
            "unknown field",
            json!({ "query": "{ me { nope } }" }),
            "Unknown field \"nope\"",
        ),
        (
            "missing argument",
            json!({ "query": "{ getPost { pid } }" }),
            "pid",
        ),
        (
            "wrong variable type",
            json!({ "query": "query($c: Int) { topPosts(count: $c) { pid } }", "variables": { "c": "two" } }),
            "c",
        ),
        (
            "undeclared variable",
            json!({ "query": "{ topPosts(count: $c) { pid } }" }),
            "c",
        ),
        (
            "fragment cycle",
            json!({ "query": "{ me { ...A } } fragment A on User { ...B } fragment B on User { ...A }" }),
            "",
        ),
        (
            "several operations, no name",
            json!({ "query": "query A { me { id } } query B { me { id } }" }),
            "Operation name required",
        ),
        (
            "unknown operation name",
            json!({ "query": "query A { me { id } }", "operationName": "Z" }),
            "Unknown operation",
        ),
    ];
    for (name, body, needle) in cases {
        // application/json: a GraphQL error in a 200 …
        let (status, text) = lab.post_raw(serde_json::to_vec(&body).unwrap()).await;
        assert_eq!(status, 200, "{name}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        // Not executed: the spec wants no `data` at all.
        assert!(v.get("data").is_none(), "{name}: {text}");
        assert!(first_error(&text).contains(needle), "{name}: {text}");
        // … application/graphql-response+json: a 400.
        let r = lab
            .http
            .post(lab.gateway.url())
            .header("accept", "application/graphql-response+json")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{name}");
        assert!(r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/graphql-response+json"));
    }
}

#[tokio::test]
async fn oversized_deep_and_flooding_documents_are_refused() {
    let lab = Lab::start().await;
    // A multi-megabyte body: 413 before any parsing.
    let big = format!(
        r#"{{"query": "{{ me {{ id }} }}", "pad": "{}"}}"#,
        "x".repeat(3 << 20)
    );
    let (status, text) = lab.post_raw(big).await;
    assert_eq!(status, 413, "{text}");
    assert!(first_error(&text).contains("larger than"));
    // Deep nesting: refused from the text, before the parser recurses; by its tokens
    // when it has more than --max-tokens, else by its nesting.
    let deep = format!("{}{}", "{ me ".repeat(20_000), "}".repeat(20_000));
    let (status, text) = lab
        .post_raw(serde_json::to_vec(&json!({ "query": deep })).unwrap())
        .await;
    assert_eq!(status, 400, "{text}");
    assert!(
        first_error(&text).contains("more than 15000 tokens"),
        "{text}"
    );
    let deep = format!("{}{}", "{".repeat(5_000), "}".repeat(5_000));
    let (status, text) = lab
        .post_raw(serde_json::to_vec(&json!({ "query": deep })).unwrap())
        .await;
    assert_eq!(status, 400, "{text}");
    assert!(first_error(&text).contains("nests 5000 levels"), "{text}");
    // Nesting that passes the text check but not the depth limit.
    let mut chain = String::from("{ me { topPosts(count: 1) { ");
    for _ in 0..20 {
        chain.push_str("author { topPosts(count: 1) { ");
    }
    chain.push_str("pid");
    chain.push_str(&" } }".repeat(21));
    chain.push_str(" }");
    let v = lab.query(&chain).await;
    assert!(
        v["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("nested too deep")
            || v["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("depth"),
        "{v}"
    );
    // An alias flood: 1200 aliased fields (12,000 tokens) exceed the field limit (2000
    // here).
    let flood: String = (0..1200)
        .map(|i| format!("a{i}: topPosts(count: 1) {{ pid }} "))
        .collect();
    let v = lab.query(&format!("{{ {flood} }}")).await;
    assert!(v.get("data").is_none(), "{v}");
    assert!(
        v["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("selects 2400 fields"),
        "{v}"
    );
    // Still serving.
    assert_eq!(
        lab.query("{ me { id } }").await,
        json!({ "data": { "me": { "id": "u1" } } })
    );
}

#[tokio::test]
async fn stalled_clients_are_cut_off_and_others_are_served_meanwhile() {
    let lab = Lab::start().await;
    let addr = lab.gateway.addr;
    // One client stops half-way through its headers, another half-way through its body.
    let mut headers_stall = tokio::net::TcpStream::connect(addr).await.unwrap();
    headers_stall
        .write_all(b"POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Ty")
        .await
        .unwrap();
    let mut body_stall = tokio::net::TcpStream::connect(addr).await.unwrap();
    body_stall
        .write_all(b"POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"query\":")
        .await
        .unwrap();
    // Meanwhile, others are answered at once.
    for _ in 0..5 {
        assert_eq!(lab.query("{ me { id } }").await["data"]["me"]["id"], "u1");
    }
    // The stalled body gets 408 once the body-read timeout (500 ms here) passes.
    let mut answer = Vec::new();
    let read =
        tokio::time::timeout(Duration::from_secs(10), body_stall.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the stalled body was never cut off");
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    // The stalled headers get their connection closed (hyper may send a 408 first).
    let mut rest = Vec::new();
    let read = tokio::time::timeout(
        Duration::from_secs(10),
        headers_stall.read_to_end(&mut rest),
    )
    .await;
    assert!(read.is_ok(), "the stalled headers were never cut off");
    assert_eq!(lab.query("{ me { id } }").await["data"]["me"]["id"], "u1");
}
