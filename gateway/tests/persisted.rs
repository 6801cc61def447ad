//! Persisted documents through HTTP: Apollo's automatic persisted queries (miss,
//! register, hit, mismatch) on POST and GET, trusted documents named by id or hash,
//! and the safelist of `--require-persisted` (issue 55).

mod common;

use std::sync::Arc;

use common::{sha256_hex as sha256, Lab};
use gateway::documents::persisted::{PersistedSettings, TrustedDocuments};
use serde_json::{json, Value};

const QUERY: &str = "query Top { topPosts(count: 2) { pid title author { id name } } }";

fn apq(hash: &str) -> Value {
    json!({ "persistedQuery": { "version": 1, "sha256Hash": hash } })
}

fn code(answer: &Value) -> &str {
    answer["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no error code in {answer}"))
}

async fn with_apq() -> Lab {
    Lab::start_with(|c| {
        c.persisted = PersistedSettings {
            apq_bytes: 1 << 20,
            ..Default::default()
        }
    })
    .await
}

/// `GET /graphql` with these parameters; the answer as JSON.
async fn get(lab: &Lab, params: &[(&str, &str)]) -> Value {
    let url = reqwest::Url::parse_with_params(&lab.gateway.url(), params).unwrap();
    let r = lab.http.get(url).send().await.expect("gateway answers");
    r.json().await.unwrap()
}

async fn persisted_counter(lab: &Lab, outcome: &str) -> u64 {
    let name = format!("gateway_persisted_documents_total{{outcome=\"{outcome}\"}}");
    lab.counter(&lab.gateway, &name).await
}

#[tokio::test]
async fn apq_misses_registers_and_hits_on_post_and_get() {
    let lab = with_apq().await;
    let expected = lab.query(QUERY).await;
    assert!(expected["data"]["topPosts"].is_array(), "{expected}");
    let hash = sha256(QUERY);

    // The hash alone, not yet known: the error Apollo's clients answer with the text.
    let miss = lab.post_json(&json!({ "extensions": apq(&hash) })).await;
    assert_eq!(code(&miss), "PERSISTED_QUERY_NOT_FOUND", "{miss}");
    assert_eq!(miss["errors"][0]["message"], "PersistedQueryNotFound");
    assert!(miss.get("data").is_none(), "{miss}");

    // The hash with its text: checked, run, registered.
    let registered = lab
        .post_json(&json!({ "query": QUERY, "extensions": apq(&hash) }))
        .await;
    assert_eq!(registered, expected);

    // The hash alone, by POST and by GET: as if the text had been sent.
    let hit = lab.post_json(&json!({ "extensions": apq(&hash) })).await;
    assert_eq!(hit, expected);
    let extensions = apq(&hash).to_string();
    let by_get = get(&lab, &[("extensions", &extensions)]).await;
    assert_eq!(by_get, expected);
    assert_eq!(persisted_counter(&lab, "apq_not_found").await, 1);
    assert_eq!(persisted_counter(&lab, "apq_registered").await, 1);
    assert_eq!(persisted_counter(&lab, "apq_hit").await, 2);

    // Registering by GET works the same way.
    let other = "{ topPosts(count: 1) { pid } }";
    let other_hash = sha256(other);
    let other_ext = apq(&other_hash).to_string();
    let miss = get(&lab, &[("extensions", &other_ext)]).await;
    assert_eq!(code(&miss), "PERSISTED_QUERY_NOT_FOUND");
    let sent = get(&lab, &[("query", other), ("extensions", &other_ext)]).await;
    assert!(sent["data"]["topPosts"].is_array(), "{sent}");
    let hit = get(&lab, &[("extensions", &other_ext)]).await;
    assert_eq!(hit, sent);
}

#[tokio::test]
async fn a_mismatched_or_failing_document_is_never_registered() {
    let lab = with_apq().await;
    // A text whose hash is another's: refused, and the hash stays unknown.
    let claimed = sha256("{ me { id } }");
    let mismatch = lab
        .post_json(&json!({ "query": QUERY, "extensions": apq(&claimed) }))
        .await;
    assert_eq!(
        code(&mismatch),
        "PERSISTED_QUERY_HASH_MISMATCH",
        "{mismatch}"
    );
    let message = mismatch["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains(&sha256(QUERY)) && message.contains(&claimed));
    let after = lab.post_json(&json!({ "extensions": apq(&claimed) })).await;
    assert_eq!(code(&after), "PERSISTED_QUERY_NOT_FOUND");

    // A document that does not validate, with its true hash: its errors, and no
    // registration.
    let invalid = "{ topPosts(count: 1) { nosuchfield } }";
    let hash = sha256(invalid);
    let answer = lab
        .post_json(&json!({ "query": invalid, "extensions": apq(&hash) }))
        .await;
    assert!(answer["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("nosuchfield"));
    let after = lab.post_json(&json!({ "extensions": apq(&hash) })).await;
    assert_eq!(code(&after), "PERSISTED_QUERY_NOT_FOUND");
    assert_eq!(persisted_counter(&lab, "apq_registered").await, 0);
    assert_eq!(persisted_counter(&lab, "hash_mismatch").await, 1);

    // A malformed hash and an unknown version are named.
    let bad = lab.post_json(&json!({ "extensions": apq("abc") })).await;
    assert_eq!(code(&bad), "PERSISTED_QUERY_HASH_INVALID", "{bad}");
    let (status, body) = lab
        .post_raw(
            json!({ "extensions": { "persistedQuery": { "version": 2, "sha256Hash": claimed } } })
                .to_string(),
        )
        .await;
    assert_eq!(status, 400);
    assert!(body.contains("persistedQuery.version is 2"), "{body}");
}

#[tokio::test]
async fn without_an_apq_store_a_hash_is_refused_as_not_supported() {
    let lab = Lab::start().await;
    let answer = lab
        .post_json(&json!({ "query": QUERY, "extensions": apq(&sha256(QUERY)) }))
        .await;
    assert_eq!(code(&answer), "PERSISTED_QUERY_NOT_SUPPORTED", "{answer}");
    // A plain request still runs.
    assert!(lab.query(QUERY).await["data"]["topPosts"].is_array());
}

fn trusted() -> Arc<TrustedDocuments> {
    let manifest = json!({
        "format": "apollo-persisted-query-manifest",
        "version": 1,
        "operations": [
            { "id": sha256(QUERY), "name": "Top", "type": "query", "body": QUERY },
            { "id": "me-v1", "name": "Me", "type": "query", "body": "query Me { me { id } }" },
        ]
    });
    Arc::new(TrustedDocuments::parse(&manifest.to_string()).unwrap())
}

#[tokio::test]
async fn trusted_documents_are_named_by_id_or_hash_and_the_safelist_refuses_the_rest() {
    let lab = Lab::start_with(|c| {
        c.persisted = PersistedSettings {
            trusted: Some(trusted()),
            require: true,
            apq_bytes: 1 << 20,
        }
    })
    .await;
    let expected = {
        let open = Lab::start().await;
        open.query(QUERY).await
    };
    // By documentId (body and GET), and by the hash Apollo's manifest uses as id.
    let by_id = lab.post_json(&json!({ "documentId": sha256(QUERY) })).await;
    assert_eq!(by_id, expected);
    let by_get = get(&lab, &[("documentId", "me-v1")]).await;
    assert!(by_get["data"]["me"]["id"].is_string(), "{by_get}");
    let by_hash = lab
        .post_json(&json!({ "extensions": apq(&sha256(QUERY)) }))
        .await;
    assert_eq!(by_hash, expected);
    assert_eq!(persisted_counter(&lab, "trusted").await, 3);

    // The safelist: a text (even a trusted document's own), an unknown id, and an APQ
    // registration are refused, each naming what was wrong.
    let text = lab.post_json(&json!({ "query": QUERY })).await;
    assert_eq!(code(&text), "PERSISTED_QUERY_ID_REQUIRED", "{text}");
    assert!(text["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("--require-persisted"));
    let unknown = lab.post_json(&json!({ "documentId": "nope" })).await;
    assert_eq!(code(&unknown), "PERSISTED_QUERY_NOT_IN_LIST", "{unknown}");
    assert!(unknown["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("\"nope\""));
    let other = "{ topPosts(count: 1) { pid } }";
    let register = lab
        .post_json(&json!({ "query": other, "extensions": apq(&sha256(other)) }))
        .await;
    assert_eq!(code(&register), "PERSISTED_QUERY_ID_REQUIRED", "{register}");
    let unknown_hash = lab
        .post_json(&json!({ "extensions": apq(&sha256(other)) }))
        .await;
    assert_eq!(code(&unknown_hash), "PERSISTED_QUERY_NOT_IN_LIST");
    assert_eq!(persisted_counter(&lab, "refused").await, 4);

    // A request that names a document twice, or an id with a text, is refused.
    let (status, body) = lab
        .post_raw(json!({ "documentId": "me-v1", "query": QUERY }).to_string())
        .await;
    assert_eq!(status, 400);
    assert!(body.contains("send one of them"), "{body}");
}

#[tokio::test]
async fn without_the_safelist_trusted_documents_and_texts_both_run() {
    let lab = Lab::start_with(|c| {
        c.persisted = PersistedSettings {
            trusted: Some(trusted()),
            require: false,
            apq_bytes: 0,
        }
    })
    .await;
    let by_id = lab.post_json(&json!({ "documentId": "me-v1" })).await;
    assert!(by_id["data"]["me"]["id"].is_string(), "{by_id}");
    assert!(lab.query(QUERY).await["data"]["topPosts"].is_array());
    let unknown = lab.post_json(&json!({ "documentId": "nope" })).await;
    assert_eq!(code(&unknown), "PERSISTED_QUERY_NOT_IN_LIST");
}
