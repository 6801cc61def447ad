//! `--profiling`: CPU samples as collapsed stacks, in a test process of its own
//! (the sampler is process-wide and signals every thread).

mod common;

use common::Lab;

/// The sampler is process-wide: one test samples at a time.
static SAMPLER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const SEED: &str = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";

#[tokio::test]
async fn profile_endpoint_answers_collapsed_stacks() {
    let _one_at_a_time = SAMPLER.lock().await;
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

#[tokio::test]
async fn a_profile_request_whose_client_goes_away_frees_the_profiler() {
    let _one_at_a_time = SAMPLER.lock().await;
    let lab = Lab::start().await;
    let url = |seconds: &str| {
        format!(
            "http://{}/debug/profile?seconds={seconds}&hz=99",
            lab.gateway.addr
        )
    };
    // A client that asks for 30 s and leaves after 300 ms.
    let gone = reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(300))
        .build()
        .unwrap()
        .get(url("30"))
        .send()
        .await;
    assert!(gone.is_err(), "the client gave up");
    // The next profile is taken, not refused as busy (409), once the gateway has seen
    // the connection go.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let r = lab.http.get(url("0.2")).send().await.unwrap();
        if r.status() == 200 {
            break;
        }
        assert_eq!(r.status(), 409);
        assert!(
            std::time::Instant::now() < deadline,
            "the profiler stayed busy"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
