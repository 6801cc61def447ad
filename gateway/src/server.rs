//! The server: connections, routes, and the handlers that hand each GraphQL request
//! to the request path ([`crate::pipeline`]).
//!
//! Routes: `POST`/`GET /graphql`, `GET /health`, `GET /metrics`, and with
//! `--profiling` `GET /debug/profile`. Clients that send half a request and stall
//! are cut off by the header-read timeout (here) and the body-read timeout
//! ([`crate::request`]), on their own connection only.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::pipeline::{handle, reject, App};
use crate::request::{check_content_type, read_body, GraphqlRequest, MediaType, Rejection};

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

async fn graphql_post(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    let media = match MediaType::negotiate(&headers) {
        Ok(m) => m,
        Err(r) => return reject(r, MediaType::Json, &app.metrics, started),
    };
    if let Err(r) = check_content_type(&headers) {
        return reject(r, media, &app.metrics, started);
    }
    let bytes = match read_body(body, &app.limits).await {
        Ok(b) => b,
        Err(r) => return reject(r, media, &app.metrics, started),
    };
    match GraphqlRequest::from_json(&bytes) {
        Ok(request) => handle(&app, request, headers, media, started, false).await,
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
        Ok(request) => handle(&app, request, headers, media, started, true).await,
        Err(r) => reject(r, media, &app.metrics, started),
    }
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
