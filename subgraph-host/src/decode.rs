//! Reading a GraphQL request out of an HTTP request.
//!
//! async-graphql-axum's extractor reads the body as a stream and deserializes it as a
//! `BatchRequest`, an untagged enum: serde first buffers the whole document into its
//! generic `Content` tree, then tries it as one request and as a list. Nearly every body
//! a subgraph sees is one JSON object, so this module tries that first: the body is
//! read into one buffer and deserialized straight into a `Request`. That is the same
//! `Deserialize` impl the enum's first variant uses, so the request is the same.
//! Anything else (a batch, a multipart upload, a content type other than JSON, a body
//! that is not a request) goes through async-graphql's own `receive_batch_body` on the
//! buffered bytes, so it gets exactly the answer it always got, errors included.

use async_graphql::http::{receive_batch_body, MultipartOptions};
use async_graphql::Request;
use async_graphql_axum::rejection::GraphQLRejection;
use axum::body::Body;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};

/// The GraphQL request in `body`, or the response async-graphql-axum gives a body it
/// cannot take (400, or 413).
pub async fn request(headers: &HeaderMap, body: Body) -> Result<Request, Response> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => {
            let e = async_graphql::ParseRequestError::Io(std::io::Error::other(e.to_string()));
            return Err(GraphQLRejection(e).into_response());
        }
    };
    if content_type.is_none_or(is_json) {
        if let Ok(request) = serde_json::from_slice::<Request>(&bytes) {
            return Ok(request);
        }
    }
    let reader = async_graphql::futures_util::io::Cursor::new(bytes);
    receive_batch_body(content_type, reader, MultipartOptions::default())
        .await
        .and_then(|batch| batch.into_single())
        .map_err(|e| GraphQLRejection(e).into_response())
}

/// `application/json`, with or without parameters: what async-graphql reads as JSON
/// (it reads every type but multipart as JSON; only this one takes the fast path).
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
}
