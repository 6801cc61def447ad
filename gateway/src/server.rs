//! The server: connections, routes, and the handlers that hand each GraphQL request
//! to the request path ([`crate::pipeline`]).
//!
//! Routes: `POST`/`GET /graphql`, `GET /health`, `GET /metrics`, and with
//! `--profiling` `GET /debug/profile`. `POST /graphql`, nearly every request, goes
//! straight from hyper to its handler ([`Gateway`]); the other routes go through an
//! axum router, whose per-request layers (routing, extractors, boxed services) the
//! hot path does not need. Clients that send half a request and stall are cut off by
//! the header-read timeout (here) and the body-read timeout ([`crate::request`]), on
//! their own connection only.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::convert::Infallible;
use std::pin::Pin;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, Method, Request};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::service::TowerToHyperService;

use crate::pipeline::{handle, reject, App};
use crate::request::{check_content_type, read_body, GraphqlRequest, MediaType, Rejection};

/// The gateway's routes.
pub fn router(app: Arc<App>) -> Gateway {
    let mut others = Router::new()
        .route("/graphql", get(graphql_get).post(graphql_post_routed))
        .route("/health", get(|| async { "ok" }))
        .route("/metrics", get(metrics));
    if app.profiling {
        others = others.route("/debug/profile", get(crate::profile::handler));
    }
    Gateway {
        others: TowerToHyperService::new(others.with_state(app.clone())),
        app,
    }
}

/// The gateway as a hyper service: `POST /graphql` to its handler directly, the rest
/// through axum.
#[derive(Clone)]
pub struct Gateway {
    app: Arc<App>,
    others: TowerToHyperService<Router>,
}

type Answer = Result<Response, Infallible>;

impl hyper::service::Service<Request<Incoming>> for Gateway {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Answer> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        if request.method() == Method::POST && request.uri().path() == "/graphql" {
            let app = self.app.clone();
            let (parts, body) = request.into_parts();
            Box::pin(async move { Ok(graphql_post(&app, parts.headers, body).await) })
        } else {
            Box::pin(self.others.call(request))
        }
    }
}

/// What [`serve`] serves: the gateway, or any axum router (the tests serve the
/// subgraphs with it).
#[derive(Clone)]
pub enum Service {
    Gateway(Gateway),
    Router(TowerToHyperService<Router>),
}

impl From<Gateway> for Service {
    fn from(gateway: Gateway) -> Service {
        Service::Gateway(gateway)
    }
}

impl From<Router> for Service {
    fn from(router: Router) -> Service {
        Service::Router(TowerToHyperService::new(router))
    }
}

impl hyper::service::Service<Request<Incoming>> for Service {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Answer> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        match self {
            Service::Gateway(gateway) => gateway.call(request),
            Service::Router(router) => Box::pin(router.call(request)),
        }
    }
}

async fn metrics(State(app): State<Arc<App>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.metrics.render(),
    )
}

/// `POST /graphql` when routed by axum (only reached through the router directly).
async fn graphql_post_routed(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    graphql_post(&app, headers, body).await
}

async fn graphql_post<B>(app: &App, headers: HeaderMap, body: B) -> Response
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
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
        Ok(request) => handle(app, request, headers, media, started, false).await,
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

/// Accept connections on `listener` and serve `service` until `shutdown` resolves.
///
/// Connections live in a `JoinSet` owned by this future: when it returns or is
/// dropped, every open connection is closed with it.
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: impl Into<Service>,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let service: Service = service.into();
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
