//! Request decoding and limits: from an HTTP request to a GraphQL request, or a 4xx.
//!
//! Everything here runs before any GraphQL work: the body's size and the time it
//! takes to arrive, its content type, its JSON shape and what the client accepts
//! (the query text's own size, in tokens and nesting, is measured by
//! [`crate::documents::lexical`]). Status codes follow the GraphQL-over-HTTP spec: a request
//! that is not a GraphQL request at all gets a 4xx with a message naming what is
//! wrong.
//!
//! The body is decoded without building a JSON tree: the query borrows from the body
//! when it has no escapes, and `variables` is parsed only when present.

use std::borrow::Cow;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{header, HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::documents::persisted::Naming;

/// Limits on what a client may send.
#[derive(Debug, Clone)]
pub struct RequestLimits {
    pub max_body_bytes: usize,
    pub body_read_timeout: Duration,
    pub header_read_timeout: Duration,
    pub request_timeout: Duration,
    /// Most requests executing at once (`--max-executing-requests`; 0: no limit).
    pub max_executing: usize,
}

/// A request that never reached GraphQL execution.
pub struct Rejection {
    pub status: StatusCode,
    pub message: String,
}

impl Rejection {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Rejection {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Rejection::new(StatusCode::BAD_REQUEST, message)
    }
}

pub const GRAPHQL_RESPONSE_JSON: &str = "application/graphql-response+json";
pub const JSON: &str = "application/json";

/// The media type the client gets, from its `Accept` header.
#[derive(Clone, Copy, PartialEq)]
pub enum MediaType {
    Json,
    GraphqlResponseJson,
}

impl MediaType {
    /// The media type the client prefers of the two the gateway answers with, by HTTP's
    /// content negotiation (RFC 9110, 12.5.1): media types match whatever their case,
    /// `q=0` rules one out, and the higher `q` wins. `*/*` and `application/*` stand for
    /// either, but a media type named in full counts before them, and a wildcard alone
    /// means `application/json` (as the GraphQL-over-HTTP spec asks of servers while
    /// clients move to `application/graphql-response+json`). Of two named in full with
    /// the same `q`, `application/graphql-response+json`. No `Accept`: `application/json`.
    pub fn negotiate(headers: &HeaderMap) -> Result<MediaType, Rejection> {
        let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
            return Ok(MediaType::Json);
        };
        // The highest q given to each: the two media types named in full, and wildcards.
        let (mut graphql, mut json, mut any) = (None::<u16>, None::<u16>, None::<u16>);
        for item in accept.split(',') {
            let mut parts = item.split(';');
            let media = parts.next().unwrap_or("").trim();
            let slot = if media.eq_ignore_ascii_case(GRAPHQL_RESPONSE_JSON) {
                &mut graphql
            } else if media.eq_ignore_ascii_case(JSON) {
                &mut json
            } else if media.is_empty()
                || media == "*/*"
                || media.eq_ignore_ascii_case("application/*")
            {
                &mut any
            } else {
                continue;
            };
            let q = quality(parts);
            *slot = Some(slot.map_or(q, |s| s.max(q)));
        }
        // (q, named in full, preferred on a tie)
        let rank = |named: Option<u16>, graphql: bool| match named {
            Some(q) => (q, true, graphql),
            None => (any.unwrap_or(0), false, false),
        };
        let (graphql, json) = (rank(graphql, true), rank(json, false));
        if graphql.0 > 0 && graphql > json {
            Ok(MediaType::GraphqlResponseJson)
        } else if json.0 > 0 {
            Ok(MediaType::Json)
        } else {
            Err(Rejection::new(
                StatusCode::NOT_ACCEPTABLE,
                format!("Accept: {accept} — this server answers {JSON} or {GRAPHQL_RESPONSE_JSON}"),
            ))
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MediaType::Json => "application/json",
            MediaType::GraphqlResponseJson => "application/graphql-response+json; charset=utf-8",
        }
    }
}

/// A GraphQL request as the client sent it.
pub struct GraphqlRequest<'b> {
    /// The document's text; absent when the request names a persisted document
    /// alone.
    pub query: Option<Cow<'b, str>>,
    /// The `variables` object, when sent and not null.
    pub variables: Option<serde_json::Map<String, serde_json::Value>>,
    pub operation_name: Option<Cow<'b, str>>,
    /// `extensions.cost: true`: the client asks for the operation's estimated cost and
    /// its answer's size in the response's `extensions`.
    pub cost: bool,
    /// The persisted document the request names: `extensions.persistedQuery`'s
    /// `sha256Hash` or `documentId` ([`crate::documents::persisted`]).
    pub naming: Option<Naming<'b>>,
}

/// What the gateway reads of a request's `extensions` (other members are ignored).
#[derive(Deserialize, Default)]
struct Extensions<'a> {
    #[serde(default)]
    cost: bool,
    #[serde(default, borrow, rename = "persistedQuery")]
    persisted_query: Option<PersistedQuery<'a>>,
}

/// `extensions.persistedQuery`, Apollo's automatic persisted queries.
#[derive(Deserialize)]
struct PersistedQuery<'a> {
    version: serde_json::Value,
    #[serde(borrow, rename = "sha256Hash")]
    sha256_hash: Cow<'a, str>,
}

/// The client's `extensions` (a JSON object, or null), as far as the gateway reads it.
fn extensions(text: &str) -> Result<Extensions<'_>, Rejection> {
    if text == "null" {
        return Ok(Extensions::default());
    }
    if !text.trim_start().starts_with('{') {
        return Err(Rejection::bad_request("\"extensions\" must be an object"));
    }
    let read: Extensions = serde_json::from_str(text).map_err(|e| {
        Rejection::bad_request(format!(
            "\"extensions\" could not be read ({e}): \"cost\", when sent, must be a boolean, and \"persistedQuery\" an object with \"version\" and a \"sha256Hash\" string"
        ))
    })?;
    if let Some(pq) = &read.persisted_query {
        if pq.version != serde_json::json!(1) {
            return Err(Rejection::bad_request(format!(
                "extensions.persistedQuery.version is {}; the version known is 1",
                pq.version
            )));
        }
    }
    Ok(read)
}

/// The persisted document a request names, from its `extensions` and `documentId`;
/// refused when it names two, or names one and sends a text with `documentId`.
fn naming<'b>(
    extensions: Extensions<'b>,
    document_id: Option<Cow<'b, str>>,
    has_query: bool,
) -> Result<(bool, Option<Naming<'b>>), Rejection> {
    let hash = extensions
        .persisted_query
        .map(|pq| Naming::Hash(pq.sha256_hash));
    let naming = match (hash, document_id) {
        (Some(_), Some(_)) => {
            return Err(Rejection::bad_request(
                "the request names a document twice: send \"documentId\" or extensions.persistedQuery, not both",
            ))
        }
        (Some(hash), None) => Some(hash),
        (None, Some(id)) if has_query => {
            return Err(Rejection::bad_request(format!(
                "the request sends \"documentId\" ({id:?}) and a \"query\": send one of them"
            )))
        }
        (None, Some(id)) => Some(Naming::DocumentId(id)),
        (None, None) if !has_query => {
            return Err(Rejection::bad_request(
                "the request has no \"query\" (nor \"documentId\" or extensions.persistedQuery)",
            ))
        }
        (None, None) => None,
    };
    Ok((extensions.cost, naming))
}

/// The members of a JSON body, each left raw until its type is checked.
#[derive(Deserialize)]
struct Members<'b> {
    #[serde(borrow)]
    query: Option<&'b RawValue>,
    #[serde(borrow)]
    variables: Option<&'b RawValue>,
    #[serde(borrow, rename = "operationName")]
    operation_name: Option<&'b RawValue>,
    #[serde(borrow)]
    extensions: Option<&'b RawValue>,
    #[serde(borrow, rename = "documentId")]
    document_id: Option<&'b RawValue>,
}

/// A string member, borrowed from the body when it has no escapes.
fn string<'b>(raw: &'b RawValue) -> Option<Cow<'b, str>> {
    #[derive(Deserialize)]
    struct Text<'b>(#[serde(borrow)] Cow<'b, str>);
    let text = raw.get();
    // A JSON string without a backslash is its bytes between the quotes (the parser
    // that cut out the raw value has checked it: no control characters, valid UTF-8).
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        if !inner.contains('\\') {
            return Some(Cow::Borrowed(inner));
        }
    }
    serde_json::from_str::<Text<'b>>(text).ok().map(|t| t.0)
}

fn is_null(raw: &RawValue) -> bool {
    raw.get() == "null"
}

/// A string member that may be absent or null; refused, naming it, when it is another
/// type.
fn optional_string<'b>(
    raw: Option<&'b RawValue>,
    name: &str,
) -> Result<Option<Cow<'b, str>>, Rejection> {
    match raw {
        None => Ok(None),
        Some(raw) if is_null(raw) => Ok(None),
        Some(raw) => string(raw)
            .map(Some)
            .ok_or_else(|| Rejection::bad_request(format!("\"{name}\" must be a string"))),
    }
}

impl<'b> GraphqlRequest<'b> {
    pub fn from_json(body: &'b [u8]) -> Result<Self, Rejection> {
        let members: Members<'b> = serde_json::from_slice(body).map_err(|e| {
            if e.is_data() {
                Rejection::bad_request("the body must be a JSON object with a \"query\" string")
            } else {
                Rejection::bad_request(format!("the body is not valid JSON: {e}"))
            }
        })?;
        let query = optional_string(members.query, "query")?;
        let variables = match members.variables {
            None => None,
            Some(raw) if is_null(raw) => None,
            Some(raw) => match serde_json::from_str::<serde_json::Value>(raw.get()) {
                Ok(serde_json::Value::Object(map)) => Some(map),
                _ => return Err(Rejection::bad_request("\"variables\" must be an object")),
            },
        };
        let operation_name = optional_string(members.operation_name, "operationName")?;
        let read = match members.extensions {
            Some(raw) => extensions(raw.get())?,
            None => Extensions::default(),
        };
        let document_id = optional_string(members.document_id, "documentId")?;
        let (cost, naming) = naming(read, document_id, query.is_some())?;
        Ok(GraphqlRequest {
            query,
            variables,
            operation_name,
            cost,
            naming,
        })
    }

    /// A GET request's parameters from its URL's query string (`application/x-www-form-urlencoded`;
    /// of a parameter given twice, the last counts).
    pub fn from_query_string(query_string: &str) -> Result<GraphqlRequest<'static>, Rejection> {
        let (mut query, mut variables, mut operation_name) = (None, None, None);
        let (mut extensions_text, mut document_id) = (None, None);
        for (name, value) in form_urlencoded::parse(query_string.as_bytes()) {
            let slot = match &*name {
                "query" => &mut query,
                "variables" => &mut variables,
                "operationName" => &mut operation_name,
                "extensions" => &mut extensions_text,
                "documentId" => &mut document_id,
                _ => continue,
            };
            *slot = Some(value.into_owned());
        }
        let variables = match variables {
            None => None,
            Some(text) => match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(serde_json::Value::Null) => None,
                Ok(serde_json::Value::Object(map)) => Some(map),
                Ok(_) => {
                    return Err(Rejection::bad_request(
                        "\"variables\" must be a JSON object",
                    ))
                }
                Err(e) => {
                    return Err(Rejection::bad_request(format!(
                        "\"variables\" is not valid JSON: {e}"
                    )))
                }
            },
        };
        let read = match &extensions_text {
            Some(text) => extensions(text)?,
            None => Extensions::default(),
        };
        let (cost, naming) = naming(read, document_id.map(Cow::Owned), query.is_some())?;
        Ok(GraphqlRequest {
            query: query.map(Cow::Owned),
            variables,
            operation_name: operation_name.map(Cow::Owned),
            cost,
            naming: naming.map(Naming::into_owned),
        })
    }
}

/// The whole body, within the size and time limits.
pub async fn read_body<B>(body: B, limits: &RequestLimits) -> Result<Bytes, Rejection>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use http_body_util::BodyExt;
    let read = http_body_util::Limited::new(body, limits.max_body_bytes).collect();
    match tokio::time::timeout(limits.body_read_timeout, read).await {
        Err(_) => Err(Rejection::new(
            StatusCode::REQUEST_TIMEOUT,
            "the request body did not arrive in time",
        )),
        Ok(Err(e)) => {
            if e.is::<http_body_util::LengthLimitError>() {
                Err(Rejection::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the request body is larger than {} bytes",
                        limits.max_body_bytes
                    ),
                ))
            } else {
                Err(Rejection::bad_request(format!(
                    "could not read the request body: {e}"
                )))
            }
        }
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

/// The `q` of one `Accept` item from its parameters, in thousandths: 1000 when it has
/// none (or one that is not a number).
fn quality<'a>(parameters: impl Iterator<Item = &'a str>) -> u16 {
    for parameter in parameters {
        let Some((name, value)) = parameter.split_once('=') else {
            continue;
        };
        if name.trim().eq_ignore_ascii_case("q") {
            return match value.trim().parse::<f32>() {
                Ok(q) if q.is_finite() => (q.clamp(0.0, 1.0) * 1000.0).round() as u16,
                _ => 1000,
            };
        }
    }
    1000
}

/// Whether the `Content-Type` is JSON (its media type in any case); the rejection
/// otherwise.
pub fn check_content_type(headers: &HeaderMap) -> Result<(), Rejection> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    if media.eq_ignore_ascii_case(JSON) {
        Ok(())
    } else {
        Err(Rejection::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Type must be {JSON}, not {content_type:?}"),
        ))
    }
}

/// What one request brings to execution: the caller's credentials and headers,
/// and its variables.
pub struct RequestInput {
    /// The client's `authorization`, forwarded to the subgraphs.
    pub authorization: Option<axum::http::HeaderValue>,
    /// The client's headers (cache policies may key by them).
    pub headers: HeaderMap,
    /// The client's variables as sent (defaults are in the subgraph requests'
    /// declarations).
    pub variables: serde_json::Map<String, serde_json::Value>,
    /// The same, with the operation's defaults, as async-graphql reads them
    /// (introspection, `@skip`/`@include`).
    pub graphql_variables: async_graphql::Variables,
}

impl RequestInput {
    pub fn variable(&self, name: &str) -> Option<&serde_json::Value> {
        self.variables.get(name)
    }

    /// An argument as written, with its variables' values as the operation coerces
    /// them (a variable not sent takes its default); `None` when it is a variable
    /// that has neither (then the argument counts as not given, and the field's own
    /// default applies).
    pub fn resolve(&self, value: &async_graphql_value::Value) -> Option<serde_json::Value> {
        if let async_graphql_value::Value::Variable(name) = value {
            let v = self.graphql_variables.get(name)?;
            return v.clone().into_json().ok();
        }
        let constant = value.clone().into_const_with(|name| {
            Ok::<_, std::convert::Infallible>(
                self.graphql_variables
                    .get(&name)
                    .cloned()
                    .unwrap_or(async_graphql_value::ConstValue::Null),
            )
        });
        Some(
            constant
                .ok()
                .and_then(|c| c.into_json().ok())
                .unwrap_or(serde_json::Value::Null),
        )
    }

    /// A variable's value as the operation coerces it (its default when not sent).
    pub fn coerced(&self, name: &str) -> Option<&async_graphql_value::ConstValue> {
        self.graphql_variables.get(name)
    }

    /// Whether the boolean variable `name` is true (its default applied).
    pub fn is_true(&self, name: &str) -> bool {
        matches!(
            self.graphql_variables.get(name),
            Some(async_graphql_value::ConstValue::Boolean(true))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_is_borrowed_unless_it_has_escapes() {
        let body = br#"{"query":"{ me { id } }","operationName":null,"extensions":{}}"#;
        let r = GraphqlRequest::from_json(body).ok().unwrap();
        assert!(matches!(r.query, Some(Cow::Borrowed("{ me { id } }"))));
        let body = br#"{"query":"{ getPost(pid: \"p1\") { pid } }"}"#;
        let r = GraphqlRequest::from_json(body).ok().unwrap();
        assert_eq!(
            r.query.as_deref(),
            Some(r#"{ getPost(pid: "p1") { pid } }"#)
        );
    }
}
