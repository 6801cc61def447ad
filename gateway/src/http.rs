//! The HTTP face of the gateway: GraphQL over HTTP, `/health`, `/metrics`, and the
//! connection loop.
//!
//! Requests are checked before any GraphQL work: body size, content type, JSON shape,
//! and the nesting depth of the query text (so the parser never recurses deeper than
//! the depth limit allows). Status codes follow the GraphQL-over-HTTP spec: a request
//! that is not a GraphQL request at all gets a 4xx; a document that fails to parse or
//! validate gets 200 under `application/json` and 400 under
//! `application/graphql-response+json`. Clients that send half a request and stall are
//! cut off by the header-read and body-read timeouts, on their own connection only.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_graphql::dynamic;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::Value as Json;

use async_graphql_parser::types::{ExecutableDocument, OperationDefinition, OperationType};

use crate::documents::{
    admit, check_variables, CachedDocument, DocumentCache, DocumentKey, DocumentPlans, Refusal,
};
use crate::execute::DocumentLimits;
use crate::execute::RequestScope;
use crate::metrics::Metrics;
use crate::response::{selected_operation, write_body};
use crate::supergraph::Supergraph;

/// Limits on what a client may send.
#[derive(Debug, Clone)]
pub struct RequestLimits {
    pub max_body_bytes: usize,
    /// Maximum nesting of `{`, `(` and `[` in the query text.
    pub max_text_nesting: usize,
    pub body_read_timeout: Duration,
    pub header_read_timeout: Duration,
    pub request_timeout: Duration,
}

/// Everything a handler needs.
pub struct App {
    /// Validates every document strictly.
    pub schema: dynamic::Schema,
    /// The same schema validating only cycles, depth and complexity: for documents
    /// from the document cache (they passed strict validation before) whose variables
    /// fit their declared types.
    pub trusted_schema: dynamic::Schema,
    pub supergraph: Arc<Supergraph>,
    pub metrics: Arc<Metrics>,
    pub limits: RequestLimits,
    /// Serve `GET /debug/profile` (CPU sampling for flamegraphs).
    pub profiling: bool,
    pub documents: Arc<DocumentCache>,
    pub document_limits: DocumentLimits,
}

const GRAPHQL_RESPONSE_JSON: &str = "application/graphql-response+json";
const JSON: &str = "application/json";

pub fn router(app: Arc<App>) -> Router {
    let mut router = Router::new()
        .route("/graphql", get(graphql_get).post(graphql_post))
        .route("/health", get(|| async { "ok" }))
        .route("/metrics", get(metrics));
    if app.profiling {
        router = router.route("/debug/profile", get(crate::profile::handler));
    }
    router.with_state(app)
}

async fn metrics(State(app): State<Arc<App>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.metrics.render(),
    )
}

/// A request that never reached GraphQL execution.
struct Rejection {
    status: StatusCode,
    message: String,
}

impl Rejection {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Rejection {
            status,
            message: message.into(),
        }
    }
    fn bad_request(message: impl Into<String>) -> Self {
        Rejection::new(StatusCode::BAD_REQUEST, message)
    }
}

/// The media type the client gets, from its `Accept` header.
#[derive(Clone, Copy, PartialEq)]
enum MediaType {
    Json,
    GraphqlResponseJson,
}

impl MediaType {
    fn negotiate(headers: &HeaderMap) -> Result<MediaType, Rejection> {
        let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
            return Ok(MediaType::Json);
        };
        let mut json = false;
        let mut any = false;
        for item in accept.split(',') {
            let media = item.split(';').next().unwrap_or("").trim();
            match media {
                GRAPHQL_RESPONSE_JSON => return Ok(MediaType::GraphqlResponseJson),
                JSON => json = true,
                "*/*" | "application/*" | "" => any = true,
                _ => {}
            }
        }
        if json || any {
            Ok(MediaType::Json)
        } else {
            Err(Rejection::new(
                StatusCode::NOT_ACCEPTABLE,
                format!("Accept: {accept} — this server answers {JSON} or {GRAPHQL_RESPONSE_JSON}"),
            ))
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            MediaType::Json => "application/json",
            MediaType::GraphqlResponseJson => "application/graphql-response+json; charset=utf-8",
        }
    }
}

fn reject(r: Rejection, media: MediaType, metrics: &Metrics, started: Instant) -> Response {
    metrics.request(started.elapsed(), true);
    let body = serde_json::json!({ "errors": [{ "message": r.message }] });
    let mut response = (r.status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(media.as_str()),
    );
    if r.status == StatusCode::METHOD_NOT_ALLOWED {
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
    }
    response
}

/// A document refused like a validation error: it is not executed, so the answer is a
/// GraphQL error (200 under `application/json`, 400 under
/// `application/graphql-response+json`).
fn not_executed(
    message: String,
    media: MediaType,
    metrics: &Metrics,
    started: Instant,
) -> Response {
    let status = match media {
        MediaType::GraphqlResponseJson => StatusCode::BAD_REQUEST,
        MediaType::Json => StatusCode::OK,
    };
    reject(Rejection::new(status, message), media, metrics, started)
}

/// A GraphQL request as the client sent it, before execution.
struct GraphqlRequest {
    query: String,
    variables: Option<Json>,
    operation_name: Option<String>,
}

impl GraphqlRequest {
    fn from_json(body: &[u8]) -> Result<Self, Rejection> {
        let value: Json = serde_json::from_slice(body)
            .map_err(|e| Rejection::bad_request(format!("the body is not valid JSON: {e}")))?;
        let Json::Object(mut map) = value else {
            return Err(Rejection::bad_request(
                "the body must be a JSON object with a \"query\" string",
            ));
        };
        let query = match map.remove("query") {
            Some(Json::String(q)) => q,
            Some(_) => return Err(Rejection::bad_request("\"query\" must be a string")),
            None => return Err(Rejection::bad_request("the request has no \"query\"")),
        };
        let variables = match map.remove("variables") {
            None | Some(Json::Null) => None,
            Some(v @ Json::Object(_)) => Some(v),
            Some(_) => return Err(Rejection::bad_request("\"variables\" must be an object")),
        };
        let operation_name = match map.remove("operationName") {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) => Some(s),
            Some(_) => return Err(Rejection::bad_request("\"operationName\" must be a string")),
        };
        match map.get("extensions") {
            None | Some(Json::Null) | Some(Json::Object(_)) => {}
            Some(_) => return Err(Rejection::bad_request("\"extensions\" must be an object")),
        }
        Ok(GraphqlRequest {
            query,
            variables,
            operation_name,
        })
    }

    fn from_params(mut params: HashMap<String, String>) -> Result<Self, Rejection> {
        let query = params
            .remove("query")
            .ok_or_else(|| Rejection::bad_request("the request has no \"query\" parameter"))?;
        let variables = match params.remove("variables") {
            None => None,
            Some(text) => match serde_json::from_str::<Json>(&text) {
                Ok(Json::Null) => None,
                Ok(v @ Json::Object(_)) => Some(v),
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
        Ok(GraphqlRequest {
            query,
            variables,
            operation_name: params.remove("operationName"),
        })
    }
}

/// The deepest nesting of `{`, `(` and `[` outside strings and comments.
fn text_nesting(query: &str) -> usize {
    let bytes = query.as_bytes();
    let (mut depth, mut max, mut i) = (0usize, 0usize, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                let block = bytes[i..].starts_with(b"\"\"\"");
                i += if block { 3 } else { 1 };
                while i < bytes.len() {
                    if bytes[i] == b'\\' {
                        i += 2;
                        continue;
                    }
                    if block && bytes[i..].starts_with(b"\"\"\"") {
                        i += 2;
                        break;
                    }
                    if !block && (bytes[i] == b'"' || bytes[i] == b'\n') {
                        break;
                    }
                    i += 1;
                }
            }
            b'{' | b'(' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b')' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    max
}

async fn graphql_post(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    let media = match MediaType::negotiate(&headers) {
        Ok(m) => m,
        Err(r) => return reject(r, MediaType::Json, &app.metrics, started),
    };
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.split(';').next().map(str::trim) != Some(JSON) {
        let r = Rejection::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Type must be {JSON}, not {content_type:?}"),
        );
        return reject(r, media, &app.metrics, started);
    }
    let bytes = match read_body(body, &app.limits).await {
        Ok(b) => b,
        Err(r) => return reject(r, media, &app.metrics, started),
    };
    match GraphqlRequest::from_json(&bytes) {
        Ok(request) => execute(&app, request, headers, media, started, false).await,
        Err(r) => reject(r, media, &app.metrics, started),
    }
}

async fn graphql_get(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    params: Result<Query<HashMap<String, String>>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let started = Instant::now();
    let media = match MediaType::negotiate(&headers) {
        Ok(m) => m,
        Err(r) => return reject(r, MediaType::Json, &app.metrics, started),
    };
    let request = params
        .map_err(|e| Rejection::bad_request(format!("bad query string: {e}")))
        .and_then(|Query(p)| GraphqlRequest::from_params(p));
    match request {
        Ok(request) => execute(&app, request, headers, media, started, true).await,
        Err(r) => reject(r, media, &app.metrics, started),
    }
}

async fn read_body(body: Body, limits: &RequestLimits) -> Result<Bytes, Rejection> {
    let read = axum::body::to_bytes(body, limits.max_body_bytes);
    match tokio::time::timeout(limits.body_read_timeout, read).await {
        Err(_) => Err(Rejection::new(
            StatusCode::REQUEST_TIMEOUT,
            "the request body did not arrive in time",
        )),
        Ok(Err(e)) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            if too_large {
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
        Ok(Ok(bytes)) => Ok(bytes),
    }
}

/// Give every variable the operation declares with a default, and the client did not
/// send, its default. (async-graphql's `@skip`/`@include` pass reads only the
/// variables sent, so `@skip(if: $v)` with `$v: Boolean = true` would not skip.)
fn apply_variable_defaults(
    operation: &OperationDefinition,
    variables: &mut async_graphql::Variables,
) {
    for def in &operation.variable_definitions {
        let name = &def.node.name.node;
        if !variables.contains_key(name) {
            if let Some(default) = &def.node.default_value {
                variables.insert(name.clone(), default.node.clone());
            }
        }
    }
}

async fn execute(
    app: &App,
    request: GraphqlRequest,
    headers: HeaderMap,
    media: MediaType,
    started: Instant,
    via_get: bool,
) -> Response {
    let key = DocumentKey::of(&request.query);
    let cached = app.documents.get(key, &request.query);
    if cached.is_none() {
        let nesting = text_nesting(&request.query);
        if nesting > app.limits.max_text_nesting {
            let r = Rejection::bad_request(format!(
                "the query nests {nesting} levels deep; the limit is {}",
                app.limits.max_text_nesting
            ));
            return reject(r, media, &app.metrics, started);
        }
    }
    let mut variables = request
        .variables
        .map(async_graphql::Variables::from_json)
        .unwrap_or_default();
    // Parse once here (or take the cached parse): the document serves the GET check,
    // variable defaults and the ordered response writer, and async-graphql gets it
    // instead of parsing again. A document that does not parse is left to
    // async-graphql to report.
    let was_cached = cached.is_some();
    let (document, plans) = match cached {
        Some(CachedDocument { doc, plans }) => (Some(doc), plans),
        None => (
            async_graphql_parser::parse_query(&request.query)
                .ok()
                .map(Arc::new),
            Arc::new(DocumentPlans::default()),
        ),
    };
    if let Some(doc) = &document {
        if !was_cached {
            let limits = &app.document_limits;
            if let Err(Refusal(message)) = admit(doc, limits.max_fields, limits.max_root_fields) {
                return not_executed(message, media, &app.metrics, started);
            }
        }
    }
    let operation = document
        .as_deref()
        .and_then(|d| selected_operation(d, request.operation_name.as_deref()));
    if let Some(op) = operation {
        if via_get && op.ty == OperationType::Mutation {
            let r = Rejection::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "mutations must be sent with POST",
            );
            return reject(r, media, &app.metrics, started);
        }
        apply_variable_defaults(op, &mut variables);
        if let Err(Refusal(message)) = check_variables(op, &variables, &app.supergraph) {
            return not_executed(message, media, &app.metrics, started);
        }
    }
    // Rendered subgraph requests are reused only when no variable can change them.
    let reusable_plans = operation
        .filter(|op| op.variable_definitions.is_empty())
        .map(|_| plans.clone());
    let scope = RequestScope {
        authorization: headers.get(header::AUTHORIZATION).cloned(),
        plans: reusable_plans,
        headers,
        ..Default::default()
    };
    // The text is kept for the document cache's entry (a hit compares texts).
    let text_to_cache = (!was_cached && document.is_some()).then(|| request.query.clone());
    let mut gql = async_graphql::Request::new(request.query)
        .variables(variables.clone())
        .data(Arc::new(scope));
    if let Some(doc) = &document {
        gql.set_parsed_query(ExecutableDocument::clone(doc));
    }
    if let Some(name) = &request.operation_name {
        gql = gql.operation_name(name.clone());
    }
    // A cached document passed strict validation before, and its variables were just
    // checked: it needs only async-graphql's cheap checks (cycles, depth, complexity).
    let trusted = was_cached && operation.is_some();
    let schema = if trusted {
        &app.trusted_schema
    } else {
        &app.schema
    };
    let response = match tokio::time::timeout(app.limits.request_timeout, schema.execute(gql)).await
    {
        Ok(r) => r,
        Err(_) => {
            let r = Rejection::new(
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "the request did not complete within {:?}",
                    app.limits.request_timeout
                ),
            );
            return reject(r, media, &app.metrics, started);
        }
    };
    // A response without data means the document was never executed (it did not
    // parse or validate): a request error in GraphQL-over-HTTP terms.
    let request_error =
        !response.errors.is_empty() && matches!(response.data, async_graphql::Value::Null);
    let status = if request_error && media == MediaType::GraphqlResponseJson {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let failed = !response.errors.is_empty();
    if !request_error {
        if let (Some(text), Some(doc)) = (&text_to_cache, &document) {
            let entry = CachedDocument {
                doc: doc.clone(),
                plans,
            };
            app.documents.insert(key, text, entry);
        }
    }
    let body = match write_body(
        &response,
        document.as_deref(),
        request.operation_name.as_deref(),
        &variables,
        &app.supergraph,
        !request_error,
    ) {
        Ok(b) => b,
        Err(e) => {
            let r = Rejection::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot encode the response: {e}"),
            );
            return reject(r, media, &app.metrics, started);
        }
    };
    app.metrics.request(started.elapsed(), failed);
    let mut out = (status, body).into_response();
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(media.as_str()),
    );
    out
}

/// Accept connections on `listener` and serve `router` until `shutdown` resolves.
///
/// Connections live in a `JoinSet` owned by this future: when it returns or is
/// dropped, every open connection is closed with it.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let service = hyper_util::service::TowerToHyperService::new(router);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => return,
        };
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        connections.spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::text_nesting;

    #[test]
    fn nesting_ignores_strings_and_comments() {
        assert_eq!(text_nesting("{ a { b } }"), 2);
        assert_eq!(text_nesting(r#"{ a(s: "{{{{") }"#), 2);
        assert_eq!(text_nesting("# {{{{\n{ a }"), 1);
        assert_eq!(text_nesting(r#"{ a(s: """ {{{ \""" """) }"#), 2);
        assert_eq!(text_nesting(&"{a".repeat(1000)), 1000);
    }
}
