//! The subgraphs' request decoding against async-graphql-axum's own extractor (what
//! the subgraphs used before their fast path): for well-formed and malformed bodies,
//! batches, multipart and other content types, the status, content type and body must
//! be the same byte for byte.

mod common;

use async_graphql_axum::{GraphQLRequest, GraphQLResponse};
use common::Service;

/// The posts subgraph served by async-graphql-axum's extractor and response, nothing else.
fn reference() -> axum::Router {
    let schema = post_service::schema();
    axum::Router::new().route(
        "/graphql",
        axum::routing::post(move |request: GraphQLRequest| {
            let schema = schema.clone();
            async move { GraphQLResponse::from(schema.execute(request.into_inner()).await) }
        }),
    )
}

#[tokio::test]
async fn every_body_gets_the_extractors_answer() {
    let ours = Service::start(common::post_router(post_service::Posts::default())).await;
    let theirs = Service::start(reference()).await;
    let http = common::client();
    let query = r#"{"query":"{ topPosts(count: 2) { pid } }"}"#;
    let cases: Vec<(Option<&str>, &str)> = vec![
        (Some("application/json"), query),
        (Some("application/json; charset=utf-8"), query),
        (Some("Application/JSON"), query),
        (None, query),
        (Some("text/plain"), query),
        (Some("application/graphql-response+json"), query),
        (
            Some("application/json"),
            r#"{"query":"query($c: Int) { topPosts(count: $c) { pid } }","variables":{"c":3},"operationName":null,"extensions":{}}"#,
        ),
        (
            Some("application/json"),
            r#"{"query":"{ topPosts { pid } }","variables":null}"#,
        ),
        (
            Some("application/json"),
            r#"{"query":"{ topPosts { pid } }","unknown":[1,2,{"a":null}]}"#,
        ),
        (
            Some("application/json"),
            r#"[{"query":"{ topPosts { pid } }"}]"#,
        ),
        (Some("application/json"), r#"[]"#),
        (Some("application/json"), ""),
        (Some("application/json"), "{"),
        (Some("application/json"), r#"{"query":1}"#),
        (Some("application/json"), r#"{"variables":{}}"#),
        (
            Some("application/json"),
            r#"{"query":"{ topPosts { pid } }","variables":[1]}"#,
        ),
        (
            Some("application/json"),
            r#"{"query":"{ topPosts { pid } }"} trailing"#,
        ),
        (
            Some("application/json"),
            "\u{feff}{\"query\":\"{ topPosts { pid } }\"}",
        ),
        (Some("multipart/form-data"), query),
        (Some("multipart/form-data; boundary=x"), query),
        (Some("a/b/c"), query),
        (Some(""), query),
    ];
    for (content_type, body) in cases {
        let mut answers = Vec::new();
        for service in [&ours, &theirs] {
            let mut r = http.post(service.url()).body(body.to_string());
            if let Some(ct) = content_type {
                r = r.header("content-type", ct);
            }
            let r = r.send().await.unwrap();
            let status = r.status().as_u16();
            let ct = r.headers().get("content-type").cloned();
            answers.push((status, ct, r.text().await.unwrap()));
        }
        assert_eq!(answers[0], answers[1], "{content_type:?} {body:?}");
    }
}
