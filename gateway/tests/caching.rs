//! Resolver caching through HTTP: deduplication at TTL 0, hits at TTL 10, invalidation
//! by the entities a mutation returns, per-user safety, errors never stored.

mod common;

use std::time::Duration;

use common::{cache, Lab, Server};
use serde_json::json;

const SEED: &str = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";

async fn delta<F: std::future::Future>(lab: &Lab, run: F) -> (F::Output, (u64, u64)) {
    let before = lab.subgraph_requests().await;
    let out = run.await;
    let after = lab.subgraph_requests().await;
    (out, (after.0 - before.0, after.1 - before.1))
}

#[tokio::test]
async fn ttl_zero_deduplicates_concurrent_identical_calls_and_keeps_nothing() {
    // posts answers after 100 ms, so 40 simultaneous seed queries overlap.
    let lab = Lab::start_delayed(Duration::from_millis(100), |c| c.cache = cache(0.0)).await;
    let (answers, (users, posts)) = delta(&lab, async {
        futures::future::join_all((0..40).map(|_| lab.query(SEED))).await
    })
    .await;
    for a in &answers {
        assert_eq!(a["data"]["me"]["topPosts"][1]["pid"], "p3");
    }
    // Without the cache this costs 40 users and 80 posts requests.
    assert!(users < 20 && posts < 40, "users {users}, posts {posts}");
    let text = lab.metrics(&lab.gateway).await;
    let dedupes: f64 = text
        .lines()
        .filter(|l| l.starts_with("gateway_cache_dedupes_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(dedupes >= 20.0, "dedupes {dedupes}\n{text}");
    // Nothing is kept: the same query later goes upstream again.
    let (_, (users, posts)) = delta(&lab, lab.query(SEED)).await;
    assert_eq!((users, posts), (1, 2));
}

#[tokio::test]
async fn ttl_ten_answers_repeats_without_the_subgraphs() {
    let lab = Lab::start_with(|c| c.cache = cache(10.0)).await;
    let (first, cost) = delta(&lab, lab.query(SEED)).await;
    assert_eq!(cost, (1, 2));
    let (second, cost) = delta(&lab, lab.query(SEED)).await;
    assert_eq!(cost, (0, 0));
    assert_eq!(first, second);
    // A different selection is a different entry.
    let (_, cost) = delta(&lab, lab.query("{ me { id } }")).await;
    assert_eq!(cost, (1, 0));
    let text = lab.metrics(&lab.gateway).await;
    assert!(
        text.contains("gateway_cache_hits_total{namespace=\"Query.me\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("gateway_cache_misses_total{namespace=\"Query.me\"} 2"),
        "{text}"
    );
}

#[tokio::test]
async fn entity_batches_send_only_the_misses() {
    let lab = Lab::start_with(|c| c.cache = cache(10.0)).await;
    // Caches User.name for u1 (from p1's author).
    lab.query("{ getPost(pid: \"p1\") { author { name } } }")
        .await;
    let (answer, (users, _)) = delta(
        &lab,
        lab.query("{ topPosts(count: 4) { author { name } } }"),
    )
    .await;
    assert_eq!(answer["data"]["topPosts"][1]["author"]["name"], "Jane");
    assert_eq!(users, 1, "one _entities call, for the miss (u2) only");
    let (_, (users, posts)) = delta(
        &lab,
        lab.query("{ topPosts(count: 4) { author { name } } }"),
    )
    .await;
    assert_eq!((users, posts), (0, 0));
}

#[tokio::test]
async fn a_mutation_invalidates_every_entry_that_included_its_entities() {
    let lab = Lab::start_with(|c| c.cache = cache(10.0)).await;
    let reads = r#"{ getPost(pid: "p1") { title } topPosts(count: 2) { title } me { topPosts(count: 1) { title } } }"#;
    let before = lab.query(reads).await;
    assert_eq!(before["data"]["getPost"]["title"], "Post 1");
    let (_, cost) = delta(&lab, lab.query(reads)).await;
    assert_eq!(cost, (0, 0), "all cached");
    lab.query(r#"mutation { updatePostTitle(pid: "p1", title: "Fresh") { pid } }"#)
        .await;
    let (after, (_, posts)) = delta(&lab, lab.query(reads)).await;
    assert_eq!(after["data"]["getPost"]["title"], "Fresh");
    assert_eq!(after["data"]["topPosts"][0]["title"], "Fresh");
    assert_eq!(after["data"]["me"]["topPosts"][0]["title"], "Fresh");
    assert!(
        posts >= 3,
        "getPost, topPosts and User.topPosts refetched ({posts})"
    );
    // An entry that never included p1 is untouched.
    lab.query(r#"{ getPost(pid: "p2") { title } }"#).await;
    lab.query(r#"mutation { updatePostTitle(pid: "p1", title: "Again") { pid } }"#)
        .await;
    let (_, cost) = delta(&lab, lab.query(r#"{ getPost(pid: "p2") { title } }"#)).await;
    assert_eq!(cost, (0, 0));
    // User entities: renaming u1 refreshes `me`.
    lab.query("{ me { name } }").await;
    lab.query(r#"mutation { updateUser(id: "u1", name: "Johnny") { id } }"#)
        .await;
    assert_eq!(
        lab.query("{ me { name } }").await["data"]["me"]["name"],
        "Johnny"
    );
}

#[tokio::test]
async fn requests_with_authorization_skip_the_cache_and_never_see_another_user() {
    let lab = Lab::start_with(|c| c.cache = cache(10.0)).await;
    let me = "{ me { id name } }";
    for _ in 0..2 {
        for (header, id) in [
            (Some("Bearer u1"), "u1"),
            (Some("Bearer u2"), "u2"),
            (None, "u1"),
        ] {
            let headers: Vec<(&str, &str)> =
                header.map(|h| ("authorization", h)).into_iter().collect();
            let answer = lab.query_with(me, json!(null), &headers).await;
            assert_eq!(answer["data"]["me"]["id"], id, "{header:?}");
        }
    }
    let text = lab.metrics(&lab.gateway).await;
    assert!(
        text.contains("gateway_cache_skips_total{namespace=\"Query.me\"} 4"),
        "{text}"
    );
    assert!(
        text.contains("gateway_cache_hits_total{namespace=\"Query.me\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_policy_can_key_by_the_caller_instead() {
    let policies = common::me_keyed_by_caller();
    let lab = Lab::start_with(|c| {
        let mut settings = cache(10.0).unwrap();
        settings.policies = policies;
        c.cache = Some(settings);
    })
    .await;
    let me = "{ me { id } }";
    for _ in 0..2 {
        for (header, id) in [("Bearer u1", "u1"), ("Bearer u2", "u2")] {
            let answer = lab
                .query_with(me, json!(null), &[("authorization", header)])
                .await;
            assert_eq!(answer["data"]["me"]["id"], id);
        }
        assert_eq!(lab.query(me).await["data"]["me"]["id"], "u1");
    }
    let text = lab.metrics(&lab.gateway).await;
    assert!(
        text.contains("gateway_cache_hits_total{namespace=\"Query.me\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("gateway_cache_misses_total{namespace=\"Query.me\"} 3"),
        "{text}"
    );
}

#[tokio::test]
async fn a_policy_keyed_by_the_caller_tells_every_header_value_apart() {
    let policies = common::me_keyed_by_caller();
    let lab = Lab::start_with(|c| {
        let mut settings = cache(60.0).unwrap();
        settings.policies = policies;
        c.cache = Some(settings);
    })
    .await;
    let body = json!({ "query": "{ me { id } }" }).to_string();
    // No header; an empty one; two tokens apart only in a byte that is not visible
    // ASCII. Each is its own caller: four misses, then four hits.
    let callers: [Option<&[u8]>; 4] = [
        None,
        Some(b""),
        Some(b"Bearer x\xff"),
        Some(b"Bearer x\x80"),
    ];
    for _ in 0..2 {
        for caller in callers {
            assert_eq!(lab.post_as(&body, caller).await, 200);
        }
    }
    let text = lab.metrics(&lab.gateway).await;
    for series in [
        "gateway_cache_misses_total{namespace=\"Query.me\"} 4",
        "gateway_cache_hits_total{namespace=\"Query.me\"} 4",
    ] {
        assert!(text.contains(series), "{series}: {text}");
    }
}

#[tokio::test]
async fn errors_are_never_cached_and_a_subgraph_that_returns_is_seen_at_once() {
    let mut lab = Lab::start_with(|c| c.cache = cache(10.0)).await;
    let user_addr = lab.stop_user().await;
    let down = lab.query("{ me { id } }").await;
    assert_eq!(down["data"]["me"], json!(null));
    let _back = Server::start_on(user_addr, common::user_router()).await;
    let up = lab.query("{ me { id } }").await;
    assert_eq!(up, json!({ "data": { "me": { "id": "u1" } } }));
}

#[tokio::test]
async fn stale_entries_are_served_at_once_while_one_refresh_runs() {
    // posts answers after 500 ms, so the refresh is still running while the five
    // concurrent reads below arrive, even on a slow machine.
    let lab = Lab::start_delayed(Duration::from_millis(500), |c| {
        let mut settings = cache(0.2).unwrap();
        settings.stale = Duration::from_secs(10);
        c.cache = Some(settings);
    })
    .await;
    let query = "{ topPosts(count: 1) { pid } }";
    let (_, cost) = delta(&lab, lab.query(query)).await;
    assert_eq!(cost, (0, 1));
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Expired but within the stale window: five reads, answered from the stale entry.
    let answers = futures::future::join_all((0..5).map(|_| lab.query(query))).await;
    assert!(answers
        .iter()
        .all(|a| a["data"]["topPosts"][0]["pid"] == "p1"));
    // Exactly one background refresh reached post-service.
    let mut refreshed = 0;
    for _ in 0..500 {
        refreshed = lab.subgraph_requests().await.1;
        if refreshed >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // 1 SDL read at start, 1 first fetch, 1 refresh.
    assert_eq!(refreshed, 3);
    let text = lab.metrics(&lab.gateway).await;
    assert!(
        text.contains("gateway_cache_stale_total{namespace=\"Query.topPosts\"} 5"),
        "{text}"
    );
}

#[tokio::test]
async fn invalidation_off_keeps_entries_until_their_ttl_even_a_long_one() {
    // An hour's ttl: long ttls must behave like short ones (stored, served, counted).
    let lab = Lab::start_with(|c| {
        let mut settings = cache(3600.0).unwrap();
        settings.invalidation = false;
        c.cache = Some(settings);
    })
    .await;
    let read = r#"{ getPost(pid: "p1") { title } }"#;
    assert_eq!(lab.query(read).await["data"]["getPost"]["title"], "Post 1");
    lab.query(r#"mutation { updatePostTitle(pid: "p1", title: "Fresh") { pid } }"#)
        .await;
    // The write reached the subgraph, but the entry is kept: a stale read, on purpose.
    let (answer, cost) = delta(&lab, lab.query(read)).await;
    assert_eq!(cost, (0, 0));
    assert_eq!(answer["data"]["getPost"]["title"], "Post 1");
    let text = lab.metrics(&lab.gateway).await;
    assert!(
        text.contains("gateway_cache_hits_total{namespace=\"Query.getPost\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_root_field_under_an_alias_is_answered_under_its_own_key() {
    // The same field, once plainly and once aliased: each answer stands under its
    // response key, whichever of the two filled the cache first.
    let lab = Lab::start_with(|c| c.cache = cache(10.0)).await;
    let plain = lab.query("{ topPosts(count: 2) { pid } }").await;
    assert_eq!(
        plain,
        json!({ "data": { "topPosts": [{ "pid": "p1" }, { "pid": "p2" }] } })
    );
    let aliased = lab.query("{ top: topPosts(count: 2) { pid } }").await;
    assert_eq!(
        aliased,
        json!({ "data": { "top": [{ "pid": "p1" }, { "pid": "p2" }] } })
    );
    let again = lab.query("{ topPosts(count: 2) { pid } }").await;
    assert_eq!(again, plain);
}

#[tokio::test]
async fn a_variables_default_is_part_of_the_key_and_an_unsent_variable_is_no_argument() {
    // Three documents that send no variable: two declare different defaults, one
    // none (so `count` takes the field's own default, 2). None may answer another's.
    let lab = Lab::start_with(|c| c.cache = cache(10.0)).await;
    let pids = |answer: &serde_json::Value| answer["data"]["topPosts"].as_array().map(Vec::len);
    let one = lab
        .query("query($n: Int = 1) { topPosts(count: $n) { pid } }")
        .await;
    assert_eq!(pids(&one), Some(1), "{one}");
    let three = lab
        .query("query($n: Int = 3) { topPosts(count: $n) { pid } }")
        .await;
    assert_eq!(pids(&three), Some(3), "{three}");
    let unset = lab
        .query("query($n: Int) { topPosts(count: $n) { pid } }")
        .await;
    let field_default = lab.query("{ topPosts { pid } }").await;
    assert_eq!(unset, field_default);
    assert_eq!(pids(&field_default), Some(2), "{field_default}");
    let again = lab
        .query("query($n: Int = 1) { topPosts(count: $n) { pid } }")
        .await;
    assert_eq!(again, one);
}

#[tokio::test]
async fn a_mutation_drops_the_entries_of_its_entitys_own_fields() {
    // `author { name }` is fetched from users through `_entities`: the entry holds
    // `{"name":…}` alone, and its reference comes from the representation (User:u1).
    let lab = Lab::start_with(|c| c.cache = cache(10.0)).await;
    let read = "{ topPosts(count: 1) { pid author { name } } }";
    assert_eq!(
        lab.query(read).await["data"]["topPosts"][0]["author"]["name"],
        "John"
    );
    let (_, cost) = delta(&lab, lab.query(read)).await;
    assert_eq!(cost, (0, 0), "all cached");
    lab.query(r#"mutation { updateUser(id: "u1", name: "Johnny") { id } }"#)
        .await;
    let (after, (users, posts)) = delta(&lab, lab.query(read)).await;
    assert_eq!(after["data"]["topPosts"][0]["author"]["name"], "Johnny");
    // The list held u1 (its author's key) and u1's name entry is u1's: both refetched.
    assert_eq!((users, posts), (1, 1));
    // An entry of another user's own fields stays.
    lab.query("{ getPost(pid: \"p2\") { author { name } } }")
        .await;
    lab.query(r#"mutation { updateUser(id: "u1", name: "Jo") { id } }"#)
        .await;
    let (_, cost) = delta(
        &lab,
        lab.query("{ getPost(pid: \"p2\") { author { name } } }"),
    )
    .await;
    assert_eq!(cost, (0, 0), "p2's author u2 was not touched");
}
