//! What an answer tells HTTP caches, through HTTP (issue 55): `Cache-Control` true of
//! what the answer holds (public with the soonest piece's time left, private, or
//! no-store), `ETag` and `304`, `Vary`, and `Surrogate-Key` with `--surrogate-keys`.

mod common;

use common::{me_keyed_by_caller, Lab};
use gateway::caching::requests::RequestStrategy;
use reqwest::header::{HeaderMap, CACHE_CONTROL, ETAG, IF_NONE_MATCH, VARY};
use serde_json::json;

/// Posts (kept 60 s by post-service's hints) and their authors (users, 10 s).
const PUBLIC: &str = "{ topPosts(count: 2) { pid title author { id name } } }";
/// The seed query: it holds `me`, which user-service marks private.
const SEED: &str = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";

/// POST `query` (with `authorization` when given, and `If-None-Match`); the status,
/// the headers and the body.
async fn ask(
    lab: &Lab,
    query: &str,
    authorization: Option<&str>,
    if_none_match: Option<&str>,
) -> (u16, HeaderMap, String) {
    let mut request = lab
        .http
        .post(lab.gateway.url())
        .json(&json!({ "query": query }));
    if let Some(token) = authorization {
        request = request.header("authorization", token);
    }
    if let Some(etag) = if_none_match {
        request = request.header(IF_NONE_MATCH, etag);
    }
    let r = request.send().await.expect("the gateway answers");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.text().await.unwrap())
}

fn cache_control(headers: &HeaderMap) -> String {
    headers
        .get(CACHE_CONTROL)
        .expect("every answer has Cache-Control")
        .to_str()
        .unwrap()
        .to_string()
}

/// The `max-age` of a `Cache-Control` value.
fn max_age(value: &str) -> u64 {
    value
        .split(',')
        .find_map(|d| d.trim().strip_prefix("max-age="))
        .unwrap_or_else(|| panic!("no max-age in {value}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_public_answer_is_kept_for_its_strictest_piece_and_revalidated_with_304() {
    let lab = Lab::start().await;
    let (status, headers, body) = ask(&lab, PUBLIC, None, None).await;
    assert_eq!(status, 200, "{body}");
    let value = cache_control(&headers);
    assert!(value.starts_with("public, "), "{value}");
    // The users' 10 s, not the posts' 60 s.
    let age = max_age(&value);
    assert!((9..=10).contains(&age), "{value}");
    let etag = headers.get(ETAG).expect("a keepable answer has an ETag");
    let etag = etag.to_str().unwrap().to_string();

    // The same question with its validator: 304, no body, the same validator.
    let (status, headers, body) = ask(&lab, PUBLIC, None, Some(&etag)).await;
    assert_eq!(status, 304);
    assert!(body.is_empty(), "{body}");
    assert_eq!(headers.get(ETAG).unwrap().to_str().unwrap(), etag);
    assert!(cache_control(&headers).starts_with("public, "));
    // Another validator: the whole answer.
    let (status, _, body) = ask(&lab, PUBLIC, None, Some("\"other\"")).await;
    assert_eq!(status, 200);
    assert!(body.contains("topPosts"));
}

#[tokio::test]
async fn private_pieces_and_credentials_make_the_answer_private() {
    let lab = Lab::start().await;
    let (_, headers, _) = ask(&lab, SEED, None, None).await;
    let value = cache_control(&headers);
    assert!(value.starts_with("private, "), "`me` is private: {value}");
    let (_, headers, _) = ask(&lab, PUBLIC, Some("Bearer u2"), None).await;
    let value = cache_control(&headers);
    assert!(value.starts_with("private, "), "credentials: {value}");
}

#[tokio::test]
async fn mutations_errors_and_answers_without_pieces_are_never_kept() {
    let mut lab = Lab::start().await;
    let mutation = r#"mutation { updatePostTitle(pid: "p1", title: "Kept?") { pid title } }"#;
    let (status, headers, body) = ask(&lab, mutation, None, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(cache_control(&headers), "no-store", "{body}");
    assert!(headers.get(ETAG).is_none());
    let (_, headers, _) = ask(&lab, "{ __typename }", None, None).await;
    assert_eq!(cache_control(&headers), "no-store");
    // A document that does not validate.
    let (_, headers, _) = ask(&lab, "{ nosuchfield }", None, None).await;
    assert_eq!(cache_control(&headers), "no-store");
    // A subgraph down: the answer carries an error.
    lab.stop_post().await;
    let (_, headers, body) = ask(&lab, PUBLIC, None, None).await;
    assert!(body.contains("errors"), "{body}");
    assert_eq!(cache_control(&headers), "no-store");
}

#[tokio::test]
async fn the_gateways_own_ttl_bounds_the_answers_lifetime() {
    let lab = Lab::start_with(|c| c.cache = common::cache(3.0)).await;
    for _ in 0..2 {
        // A miss, then a hit: neither may be kept past the resolver cache's 3 s.
        let (_, headers, _) = ask(&lab, PUBLIC, None, None).await;
        let value = cache_control(&headers);
        assert!(
            value.starts_with("public, ") && max_age(&value) <= 3,
            "{value}"
        );
    }
}

#[tokio::test]
async fn a_stored_answer_keeps_its_validator_and_the_soonest_lifetime() {
    let lab = Lab::start_with(|c| {
        c.request_strategy = Some(RequestStrategy::parse("response:ttl=2").unwrap())
    })
    .await;
    let (_, first, body) = ask(&lab, PUBLIC, None, None).await;
    let (_, second, again) = ask(&lab, PUBLIC, None, None).await;
    assert_eq!(body, again);
    assert_eq!(first.get(ETAG), second.get(ETAG));
    let value = cache_control(&second);
    assert!(
        value.starts_with("public, ") && max_age(&value) <= 2,
        "{value}"
    );
    let etag = second.get(ETAG).unwrap().to_str().unwrap().to_string();
    let (status, _, body) = ask(&lab, PUBLIC, None, Some(&etag)).await;
    assert_eq!((status, body.as_str()), (304, ""));
}

#[tokio::test]
async fn a_header_a_policy_keys_by_is_named_in_vary() {
    let lab = Lab::start_with(|c| {
        c.cache = common::cache_with(10.0, |s| s.policies = me_keyed_by_caller())
    })
    .await;
    let (_, headers, _) = ask(&lab, PUBLIC, None, None).await;
    assert_eq!(headers.get(VARY).unwrap(), "authorization");
}

#[tokio::test]
async fn surrogate_keys_name_the_entities_an_answer_holds() {
    let lab = Lab::start_with(|c| c.surrogate_keys = true).await;
    let (_, headers, _) = ask(&lab, PUBLIC, None, None).await;
    let keys = headers
        .get("surrogate-key")
        .expect("--surrogate-keys")
        .to_str()
        .unwrap()
        .to_string();
    let keys: Vec<&str> = keys.split(' ').collect();
    for expected in ["Post", "User", "Post:p1", "User:u1"] {
        assert!(keys.contains(&expected), "{keys:?}");
    }
    // Without the flag, no header.
    let plain = Lab::start().await;
    let (_, headers, _) = ask(&plain, PUBLIC, None, None).await;
    assert!(headers.get("surrogate-key").is_none());
}
