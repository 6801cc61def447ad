//! The parsed-document cache through HTTP: hits on repeats (whatever the variables),
//! a byte bound that holds, `--doc-cache-bytes 0`, and failing documents kept out.

mod common;

use common::{metric, Lab};
use serde_json::json;

async fn doc_metrics(lab: &Lab) -> (f64, f64, f64, f64) {
    let text = lab.metrics(&lab.gateway).await;
    let m = |name| metric(&text, name).unwrap_or_else(|| panic!("{name} missing"));
    (
        m("gateway_document_cache_hits_total"),
        m("gateway_document_cache_misses_total"),
        m("gateway_document_cache_evictions_total"),
        m("gateway_document_cache_bytes"),
    )
}

#[tokio::test]
async fn repeats_hit_whatever_their_variables() {
    let lab = Lab::start().await;
    let query = "query($c: Int!) { topPosts(count: $c) { pid } }";
    for c in [1, 2, 3] {
        let answer = lab.query_with(query, json!({ "c": c }), &[]).await;
        assert_eq!(answer["data"]["topPosts"].as_array().unwrap().len(), c);
    }
    let (hits, misses, _, bytes) = doc_metrics(&lab).await;
    assert_eq!((hits, misses), (2.0, 1.0));
    assert!(bytes > 0.0);
}

#[tokio::test]
async fn the_byte_bound_holds_and_evicts() {
    let cap = 64 * 1024;
    let lab = Lab::start_with(|c| c.doc_cache_bytes = cap).await;
    // 300 distinct documents (inlined literals), each asked twice so that moka's
    // admission lets them in; together far over 64 KiB.
    for round in 0..2 {
        for i in 0..300 {
            let q = format!(
                "{{ a{i}: getPost(pid: \"p{i}\") {{ pid title content author {{ id name }} }} }}"
            );
            let answer = lab.query(&q).await;
            assert!(answer.get("errors").is_none(), "round {round}: {answer}");
        }
    }
    let (_, _, evictions, bytes) = doc_metrics(&lab).await;
    assert!(
        bytes <= cap as f64,
        "{bytes} bytes held over a {cap}-byte bound"
    );
    assert!(bytes > 0.0);
    assert!(evictions > 0.0, "no evictions");
}

#[tokio::test]
async fn zero_disables_the_cache() {
    let lab = Lab::start_with(|c| c.doc_cache_bytes = 0).await;
    for _ in 0..3 {
        assert_eq!(lab.query("{ me { id } }").await["data"]["me"]["id"], "u1");
    }
    assert_eq!(doc_metrics(&lab).await, (0.0, 0.0, 0.0, 0.0));
}

#[tokio::test]
async fn documents_that_fail_are_not_kept() {
    let lab = Lab::start().await;
    for _ in 0..3 {
        let answer = lab.query("{ me { nope } }").await;
        assert!(answer["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("nope"));
        let answer = lab.query("{ me { id ").await;
        assert!(answer["errors"].is_array());
    }
    let (hits, misses, _, bytes) = doc_metrics(&lab).await;
    assert_eq!(hits, 0.0, "a failing document was served from the cache");
    assert_eq!(misses, 6.0);
    assert_eq!(bytes, 0.0);
}

#[tokio::test]
async fn a_cached_document_with_bad_variables_is_still_refused() {
    let lab = Lab::start().await;
    let query = "query($c: Int!, $p: ID!) { topPosts(count: $c) { pid } getPost(pid: $p) { pid } }";
    let ok = lab
        .query_with(query, json!({ "c": 1, "p": "p2" }), &[])
        .await;
    assert_eq!(ok["data"]["topPosts"], json!([{ "pid": "p1" }]), "{ok}");
    // The document is now cached (validated once); these variables do not fit it.
    let bad = [
        json!({ "c": "two", "p": "p2" }),
        json!({ "p": "p2" }),
        json!({ "c": 1, "p": true }),
        json!({ "c": 3_000_000_000i64, "p": "p2" }),
    ];
    for variables in bad {
        let answer = lab.query_with(query, variables.clone(), &[]).await;
        assert!(answer.get("data").is_none(), "{variables}: {answer}");
        assert!(
            answer["errors"][0]["message"].is_string(),
            "{variables}: {answer}"
        );
    }
    let (hits, misses, _, _) = doc_metrics(&lab).await;
    assert_eq!((hits, misses), (4.0, 1.0));
}

#[tokio::test]
async fn a_thousand_aliases_answer_in_query_order_from_the_cache_too() {
    let lab = Lab::start().await;
    const NAMES: [&str; 3] = ["pid", "title", "content"];
    let fields: Vec<String> = (0..1000)
        .map(|i| format!("f{i}: {}", NAMES[i % 3]))
        .collect();
    // The same response key twice merges into one entry, at its first place.
    let query = format!(
        "{{ topPosts(count: 1) {{ {} f0: pid }} }}",
        fields.join(" ")
    );
    let body = json!({ "query": query }).to_string();
    for _ in 0..2 {
        let (status, text) = lab.post_raw(body.clone()).await;
        assert_eq!(status, 200, "{text}");
        // The keys in the text, in order (serde_json's map would sort them).
        let keys: Vec<&str> = text
            .split("\"f")
            .skip(1)
            .map(|rest| &rest[..rest.find('"').unwrap()])
            .collect();
        let expected: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        assert_eq!(keys, expected);
        let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
        let post = &answer["data"]["topPosts"][0];
        assert_eq!(
            (&post["f1"], &post["f999"]),
            (&json!("Post 1"), &json!("p1"))
        );
    }
    let (hits, misses, _, _) = doc_metrics(&lab).await;
    assert_eq!((hits, misses), (1.0, 1.0));
}
