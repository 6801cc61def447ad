//! The `/graphql` route: a request's path from the HTTP body through its injected fate
//! (an outage, a hang, an error, or a delay) and the document cache to an executor
//! (strict, or fast when the document is known to validate) and back, with the
//! answer's `Cache-Control` (the schema's cache hints, or `--cache-control`); plus
//! `/health` and `/metrics`.

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

use crate::cli::CacheControl;
use crate::decode;
use crate::documents::{Documents, Lookup};
use crate::faults::{Delay, Fate, FaultPlan, Faults};
use crate::metrics::Counters;
use crate::validated;

/// How a subgraph's host behaves, beyond its schema.
#[derive(Debug, Clone)]
pub struct Options {
    /// Delays and faults to inject ([`crate::faults`]).
    pub faults: FaultPlan,
    /// The parsed-document cache's bound in estimated bytes; 0 disables it
    /// (`--document-cache-bytes`).
    pub document_cache_bytes: u64,
    /// Where answers' `Cache-Control` comes from (`--cache-control`).
    pub cache_control: CacheControl,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            faults: FaultPlan::default(),
            document_cache_bytes: crate::cli::DEFAULT_DOCUMENT_CACHE_BYTES,
            cache_control: CacheControl::Schema,
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

/// The executors a subgraph runs requests on: the schema as built, and optionally the
/// same schema over the same data in `ValidationMode::Fast`, for requests that
/// [`crate::validated`] knows to validate.
pub struct Executors<E> {
    pub strict: E,
    pub fast: Option<E>,
}

impl<E> Executors<E> {
    /// A strict executor and a fast one, each built by `build` for its validation mode;
    /// `build` must give both the same schema over the same data.
    pub fn strict_and_fast(build: impl Fn(async_graphql::ValidationMode) -> E) -> Self {
        Executors {
            strict: build(async_graphql::ValidationMode::Strict),
            fast: Some(build(async_graphql::ValidationMode::Fast)),
        }
    }
}

impl<E> From<E> for Executors<E> {
    /// One strict executor: every request is validated in full.
    fn from(strict: E) -> Self {
        Executors { strict, fast: None }
    }
}

struct Host<E> {
    service: &'static str,
    executors: Executors<E>,
    faults: Faults,
    documents: Documents,
    counters: Counters,
    cache_control: CacheControl,
}

/// Build the router for a subgraph: `POST /graphql`, `GET /health`, `GET /metrics`,
/// holding every response `delay`, with the default document cache.
pub fn router<E: Executor>(service: &'static str, executor: E, delay: Duration) -> Router {
    router_with(
        service,
        Executors::from(executor),
        Options {
            faults: FaultPlan {
                delay: Delay::Fixed(delay),
                ..FaultPlan::default()
            },
            ..Options::default()
        },
    )
}

/// Build the router for a subgraph that behaves as `options` say. A fast executor is
/// used only if the strict one's schema takes kind-checked inputs alone
/// ([`crate::validated::kind_checked_inputs`]).
pub fn router_with<E: Executor>(
    service: &'static str,
    mut executors: Executors<E>,
    options: Options,
) -> Router {
    if executors.fast.is_some() && !validated::kind_checked_inputs(&executors.strict) {
        eprintln!(
            "{service}: every request is validated in full: the schema has inputs whose \
             validity depends on more than their kind (enums or custom scalars)"
        );
        executors.fast = None;
    }
    let host = Arc::new(Host {
        service,
        executors,
        faults: Faults::new(options.faults),
        documents: Documents::new(options.document_cache_bytes),
        counters: Counters::default(),
        cache_control: options.cache_control,
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
    let request = match decode::request(&parts.headers, body).await {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    let counters = &host.counters;
    counters.requests.fetch_add(1, Ordering::Relaxed);
    let _in_progress = counters.in_progress();
    // The gateway's schema read is never faulted or delayed, so a gateway can compose.
    let fate = if request.query.contains("_service") {
        Fate::Answer(Duration::ZERO)
    } else {
        host.faults.next_fate()
    };
    let (response, status) = match fate {
        Fate::Outage => {
            counters.outages.fetch_add(1, Ordering::Relaxed);
            let message = "injected outage (--outage): the subgraph is down";
            (
                injected(message, "INJECTED_OUTAGE"),
                StatusCode::SERVICE_UNAVAILABLE,
            )
        }
        Fate::Hang => {
            counters.hangs.fetch_add(1, Ordering::Relaxed);
            std::future::pending::<()>().await;
            unreachable!("a pending future never resolves")
        }
        Fate::Error(delay) => {
            counters.injected_errors.fetch_add(1, Ordering::Relaxed);
            let message = "injected error (--error-rate)";
            hold(counters, delay).await;
            (injected(message, "INJECTED_ERROR"), StatusCode::OK)
        }
        Fate::Answer(delay) => {
            let response = execute(&host, &parts.headers, request).await;
            hold(counters, delay).await;
            (response, StatusCode::OK)
        }
    };
    let failed = response.is_err();
    if failed {
        counters.errors.fetch_add(1, Ordering::Relaxed);
    }
    // async-graphql-axum sends the hints' Cache-Control on answers without errors.
    let mut out = GraphQLResponse::from(response).into_response();
    *out.status_mut() = status;
    match &host.cache_control {
        CacheControl::Schema => {}
        CacheControl::Off => {
            out.headers_mut().remove(header::CACHE_CONTROL);
        }
        CacheControl::Fixed(value) if !failed => {
            out.headers_mut()
                .insert(header::CACHE_CONTROL, value.clone());
        }
        CacheControl::Fixed(_) => {}
    }
    out
}

/// Run `request` on the fast executor if its document, operation and shape of variables
/// passed strict validation before, else on the strict one (and learn from it).
async fn execute<E: Executor>(
    host: &Host<E>,
    headers: &HeaderMap,
    mut request: async_graphql::Request,
) -> async_graphql::Response {
    let counters = &host.counters;
    let (lookup, entry) = host.documents.prepare(&mut request);
    match lookup {
        Lookup::Hit => counters.document_hits.fetch_add(1, Ordering::Relaxed),
        Lookup::Miss => counters.document_misses.fetch_add(1, Ordering::Relaxed),
        Lookup::Skipped => 0,
    };
    let memo = match (&host.executors.fast, entry) {
        (Some(_), Some(entry)) => validated::shape(&request.variables).map(|shape| (entry, shape)),
        _ => None,
    };
    let operation = request.operation_name.clone();
    let known = memo
        .as_ref()
        .is_some_and(|(entry, shape)| entry.validated.knows(&operation, shape));
    if let Some(bearer) = Bearer::from_headers(headers) {
        request = request.data(bearer);
    }
    match (&host.executors.fast, known) {
        (Some(fast), true) => {
            counters.validations_skipped.fetch_add(1, Ordering::Relaxed);
            fast.execute(request).await
        }
        _ => {
            let response = host.executors.strict.execute(request).await;
            if let (Some((entry, shape)), true) = (memo, response.errors.is_empty()) {
                entry.validated.remember(operation, shape);
            }
            response
        }
    }
}

/// Hold an answer `delay`, counting the time held.
async fn hold(counters: &Counters, delay: Duration) {
    if !delay.is_zero() {
        counters
            .delay_micros
            .fetch_add(delay.as_micros() as u64, Ordering::Relaxed);
        tokio::time::sleep(delay).await;
    }
}

/// A response that is one GraphQL error with `extensions.code`, and no data.
fn injected(message: &str, code: &str) -> async_graphql::Response {
    let mut error = async_graphql::ServerError::new(message, None);
    let mut extensions = async_graphql::ErrorExtensionValues::default();
    extensions.set("code", code);
    error.extensions = Some(extensions);
    async_graphql::Response::from_errors(vec![error])
}

async fn metrics<E: Executor>(State(host): State<Arc<Host<E>>>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        host.counters.render(host.service, host.documents.size()),
    )
}
