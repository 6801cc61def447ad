//! `commerce-service` as a process: bad flags refused at start-up with a message naming
//! the flag, the scale flags honoured, the host's knobs (`--cache-control`, `/metrics`)
//! the same as the first graph's, and SIGTERM ending it with exit 0.

mod common;

use std::time::Duration;

use common::{data, process, refused};
use serde_json::Value;

#[test]
fn bad_flags_are_refused_by_name() {
    let cases: [(&[&str], &str); 8] = [
        (&[], "--subgraph"),
        (&["--subgraph", "payments"], "--subgraph"),
        (&["--subgraph", "products", "--products", "0"], "--products"),
        (&["--subgraph", "products", "--users", "many"], "--users"),
        (
            &["--subgraph", "reviews", "--reviews-per-product", "1001"],
            "--reviews-per-product",
        ),
        (
            &[
                "--subgraph",
                "reviews",
                "--products",
                "10000000",
                "--reviews-per-product",
                "11",
            ],
            "--reviews-per-product 11",
        ),
        (&["--subgraph", "accounts", "--data-seed=-1"], "--data-seed"),
        (
            &["--subgraph", "inventory", "--delay-jitter-ms", "5"],
            "--delay-jitter-ms",
        ),
    ];
    for (args, flag) in cases {
        let (code, stderr) = refused(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag),
            "{args:?} should name {flag}: {stderr}"
        );
    }
}

#[tokio::test]
async fn the_scale_flags_and_the_hosts_knobs_work_in_a_process() {
    let mut reviews = process(&[
        "--subgraph",
        "reviews",
        "--products",
        "30",
        "--users",
        "4",
        "--reviews-per-product",
        "2",
        "--data-seed",
        "3",
        "--cache-control",
        "no-store",
    ]);
    let http = common::client();
    let d = data(
        &http,
        &reviews.url(),
        "{ latestReviews(first: 1000) { id author { id } } }",
        Value::Null,
    )
    .await;
    let all = d["latestReviews"].as_array().unwrap();
    assert_eq!(all.len(), 60);
    assert!(all.iter().all(|r| {
        let id = r["author"]["id"].as_str().unwrap();
        ["u1", "u2", "u3", "u4"].contains(&id)
    }));
    // The seed is the one given: the same authors as the library draws with it.
    let s = commerce_graph::Scale::new(30, 4, 2, 3).unwrap();
    assert_eq!(all[0]["author"]["id"], s.user_id(s.review(59).author));
    let r = http
        .post(reviews.url())
        .json(&serde_json::json!({ "query": "{ review(id: \"r1\") { id } }" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["cache-control"], "no-store");
    let label = "service=\"reviews\"";
    let requests =
        common::labelled_metric(&http, reviews.addr, "subgraph_requests_total", label).await;
    assert_eq!(requests, 2.0);
    reviews.terminate();
    let (status, printed) = reviews.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}: {printed}");
    assert!(printed.contains("reviews: drained"), "{printed}");
}
