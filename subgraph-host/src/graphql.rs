//! The `/graphql` route: a request's path from the HTTP body through the document cache
//! to the executor and back, with the simulated backend delay; plus `/health` and
//! `/metrics`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_graphql::Executor;
use async_graphql_axum::GraphQLResponse;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::decode;
use crate::documents::{Documents, Lookup};
use crate::metrics::Counters;

/// How a subgraph's host behaves, beyond its schema.
#[derive(Debug, Clone)]
pub struct Options {
    /// Hold every GraphQL response this long (`--delay-ms`).
    pub delay: Duration,
    /// The parsed-document cache's bound in estimated bytes; 0 disables it
    /// (`--document-cache-bytes`).
    pub document_cache_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            delay: Duration::ZERO,
            document_cache_bytes: crate::cli::DEFAULT_DOCUMENT_CACHE_BYTES,
        }
    }
}

/// The caller's identity, taken from an `authorization: Bearer <id>` header.
/// Resolvers read it with `ctx.data_opt::<Bearer>()`; it is absent without the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bearer(pub String);

impl Bearer {
    fn from_headers(headers: &HeaderMap) -> Option<Bearer> {
        let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
        // The scheme is case-insensitive (RFC 9110).
        let (scheme, token) = value.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let token = token.trim();
        (!token.is_empty()).then(|| Bearer(token.to_string()))
    }
}

struct Host<E> {
    service: &'static str,
    executor: E,
    delay: Duration,
    documents: Documents,
    counters: Counters,
}

/// Build the router for a subgraph: `POST /graphql`, `GET /health`, `GET /metrics`,
/// holding every response `delay`, with the default document cache.
pub fn router<E: Executor>(service: &'static str, executor: E, delay: Duration) -> Router {
    router_with(
        service,
        executor,
        Options {
            delay,
            ..Options::default()
        },
    )
}

/// Build the router for a subgraph that behaves as `options` say.
pub fn router_with<E: Executor>(service: &'static str, executor: E, options: Options) -> Router {
    let host = Arc::new(Host {
        service,
        executor,
        delay: options.delay,
        documents: Documents::new(options.document_cache_bytes),
        counters: Counters::default(),
    });
    Router::new()
        .route("/graphql", axum::routing::post(graphql::<E>))
        .route("/health", get(|| async { "ok" }))
        .route("/metrics", get(metrics::<E>))
        .with_state(host)
}

async fn graphql<E: Executor>(
    State(host): State<Arc<Host<E>>>,
    request: axum::extract::Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let mut request = match decode::request(&parts.headers, body).await {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    host.counters.requests.fetch_add(1, Ordering::Relaxed);
    match host.documents.prepare(&mut request) {
        Lookup::Hit => host.counters.document_hits.fetch_add(1, Ordering::Relaxed),
        Lookup::Miss => host
            .counters
            .document_misses
            .fetch_add(1, Ordering::Relaxed),
        Lookup::Skipped => 0,
    };
    if let Some(bearer) = Bearer::from_headers(&parts.headers) {
        request = request.data(bearer);
    }
    let response = host.executor.execute(request).await;
    if response.is_err() {
        host.counters.errors.fetch_add(1, Ordering::Relaxed);
    }
    if !host.delay.is_zero() {
        tokio::time::sleep(host.delay).await;
    }
    GraphQLResponse::from(response).into_response()
}

async fn metrics<E: Executor>(State(host): State<Arc<Host<E>>>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        host.counters.render(host.service, host.documents.size()),
    )
}
