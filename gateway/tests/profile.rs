//! `--profiling`: CPU samples as collapsed stacks, in a test process of its own
//! (the sampler is process-wide and signals every thread).

mod common;

use common::Lab;

const SEED: &str = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";

#[tokio::test]
async fn profile_endpoint_answers_collapsed_stacks() {
    let lab = Lab::start().await;
    let url = format!(
        "http://{}/debug/profile?seconds=0.5&hz=99",
        lab.gateway.addr
    );
    let profile = tokio::spawn({
        let http = lab.http.clone();
        async move { http.get(url).send().await.unwrap() }
    });
    // Keep the gateway busy while it samples.
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(600);
    while std::time::Instant::now() < deadline {
        lab.query(SEED).await;
    }
    let r = profile.await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        assert!(
            !stack.is_empty() && count.parse::<u64>().is_ok(),
            "not a collapsed stack: {line}"
        );
    }
    let bad = lab
        .http
        .get(format!(
            "http://{}/debug/profile?seconds=-1",
            lab.gateway.addr
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}
