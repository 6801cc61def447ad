//! The server: connections, routes, and the handlers that hand each GraphQL request
//! to the request path ([`crate::pipeline`]).
//!
//! Routes: `POST`/`GET /graphql`, `POST /validate` (a request checked and planned,
//! not run: [`crate::pipeline::Run::Validate`]), `GET /health`, `GET /metrics`, and
//! with `--profiling` `GET /debug/profile`. `POST /graphql`, nearly every request, goes
//! straight from hyper to its handler ([`Gateway`]); the other routes go through an
//! axum router, whose per-request layers (routing, extractors, boxed services) the
//! hot path does not need. Clients that send half a request and stall are cut off by
//! the header-read timeout ([`crate::server::connections`]) and the body-read timeout
//! ([`crate::server::request`]), on their own connection only.
//!
//! Every `/graphql` request is first admitted by [`Load`]: past
//! `--max-concurrent-requests` it is answered `503` with `Retry-After` at once. The
//! connections themselves (their limit, the lingering close, the drain on SIGTERM) are
//! [`crate::server::connections`]'.

pub mod admin;
pub mod connections;
pub mod linger;
pub mod load;
pub mod metrics;
pub mod profile;
pub mod request;
pub mod turns;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::convert::Infallible;
use std::pin::Pin;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, Method, Request};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::service::TowerToHyperService;

use crate::pipeline::{handle, reject, App, Run};
use crate::server::connections::{Drained, ServeOptions};
use crate::server::load::{overloaded, Load, LoadLimits};
use crate::server::request::{check_content_type, read_body, GraphqlRequest, MediaType};

/// The gateway's routes, without limits on connections or requests in progress.
pub fn router(app: Arc<App>) -> Gateway {
    router_with_limits(app, LoadLimits::NONE)
}

/// The gateway's routes, shedding load past `limits`.
pub fn router_with_limits(app: Arc<App>, limits: LoadLimits) -> Gateway {
    let load = Arc::new(Load::new(limits));
    app.metrics.add_source(&load, Load::prometheus);
    let mut others = Router::new()
        .route(
            "/graphql",
            get(graphql_get_routed).post(graphql_post_routed),
        )
        .route("/validate", post(validate_post))
        .route("/health", get(|| async { "ok" }))
        .route("/metrics", get(metrics));
    if app.profiling {
        others = others.route("/debug/profile", get(crate::server::profile::handler));
    }
    Gateway {
        others: TowerToHyperService::new(others.with_state(app.clone())),
        app,
        load,
    }
}

/// The gateway as a hyper service: `POST /graphql` to its handler directly, the rest
/// through axum.
#[derive(Clone)]
pub struct Gateway {
    app: Arc<App>,
    load: Arc<Load>,
    others: TowerToHyperService<Router>,
}

type Answer = Result<Response, Infallible>;

impl hyper::service::Service<Request<Incoming>> for Gateway {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Answer> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        if request.uri().path() != "/graphql" {
            return Box::pin(self.others.call(request));
        }
        let Some(ticket) = self.load.admit_request() else {
            return Box::pin(std::future::ready(Ok(overloaded())));
        };
        if request.method() == Method::POST {
            let app = self.app.clone();
            let (parts, body) = request.into_parts();
            Box::pin(async move {
                let answer = graphql_post(&app, parts.headers, body, Run::Execute).await;
                drop(ticket);
                Ok(answer)
            })
        } else if request.method() == Method::GET {
            // As direct as a POST: an APQ hash in a GET is what an HTTP cache keeps.
            let app = self.app.clone();
            let (parts, _) = request.into_parts();
            Box::pin(async move {
                let answer = graphql_get(&app, parts.headers, &parts.uri).await;
                drop(ticket);
                Ok(answer)
            })
        } else {
            let answer = self.others.call(request);
            Box::pin(async move {
                let answer = answer.await;
                drop(ticket);
                answer
            })
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
    graphql_post(&app, headers, body, Run::Execute).await
}

/// `POST /validate`: the request checked and planned, not executed.
async fn validate_post(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    graphql_post(&app, headers, body, Run::Validate).await
}

async fn graphql_post<B>(app: &App, headers: HeaderMap, body: B, run: Run) -> Response
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
        Ok(request) => handle(app, request, headers, media, started, false, run).await,
        Err(r) => reject(r, media, &app.metrics, started),
    }
}

/// `GET /graphql` when routed by axum (only reached through the router directly).
async fn graphql_get_routed(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Response {
    graphql_get(&app, headers, &uri).await
}

async fn graphql_get(app: &App, headers: HeaderMap, uri: &axum::http::Uri) -> Response {
    let started = Instant::now();
    let media = match MediaType::negotiate(&headers) {
        Ok(m) => m,
        Err(r) => return reject(r, MediaType::Json, &app.metrics, started),
    };
    match GraphqlRequest::from_query_string(uri.query().unwrap_or("")) {
        Ok(request) => handle(app, request, headers, media, started, true, Run::Execute).await,
        Err(r) => reject(r, media, &app.metrics, started),
    }
}

impl Service {
    /// The load counters and limits connections are admitted by (a router serves
    /// without limits).
    fn load(&self) -> Arc<Load> {
        match self {
            Service::Gateway(gateway) => gateway.load.clone(),
            Service::Router(_) => Arc::new(Load::new(LoadLimits::NONE)),
        }
    }
}

/// Accept connections on `listener` and serve `service` until `shutdown` resolves;
/// then close every connection at once (no drain: see [`serve_draining`]).
///
/// Connections live in a `JoinSet` owned by this future: when it returns or is
/// dropped, every open connection is closed with it.
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: impl Into<Service>,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let options = ServeOptions {
        header_read_timeout,
        drain_timeout: Duration::ZERO,
        shards: crate::runtime::Shards::default(),
    };
    serve_draining(listener, service, options, shutdown).await;
}

/// Accept connections on `listener` and serve `service` until `shutdown` resolves,
/// then drain them for up to `options.drain_timeout` ([`crate::server::connections`]).
pub async fn serve_draining(
    listener: tokio::net::TcpListener,
    service: impl Into<Service>,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> Drained {
    let service: Service = service.into();
    let load = service.load();
    crate::server::connections::serve(listener, service, load, options, shutdown).await
}
