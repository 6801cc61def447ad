//! The HTTP harness both subgraphs share.
//!
//! A subgraph crate owns its schema and data; this crate owns everything around it that
//! the lab needs to be identical on both sides: the command line (`--listen`,
//! `--delay-ms`), the `/graphql`, `/health` and `/metrics` routes, the simulated
//! backend delay, the `authorization` header handed to resolvers as a [`Bearer`], and a
//! clean shutdown on SIGTERM/SIGINT so that the matrix runner can stop a service by PID.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_graphql::Executor;
use async_graphql_axum::{GraphQLRequest, GraphQLResponse};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

/// Command-line options every subgraph accepts.
#[derive(Debug, Clone, clap::Args)]
pub struct HostArgs {
    /// Address to listen on (the default depends on the service).
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Hold every GraphQL response this many milliseconds, simulating a slow backend.
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u64,
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

/// Counters exposed on `/metrics`.
#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    errors: AtomicU64,
}

struct Host<E> {
    service: &'static str,
    executor: E,
    delay: Duration,
    counters: Counters,
}

/// Build the router for a subgraph: `POST /graphql`, `GET /health`, `GET /metrics`.
pub fn router<E: Executor>(service: &'static str, executor: E, delay: Duration) -> Router {
    let host = Arc::new(Host {
        service,
        executor,
        delay,
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
    headers: HeaderMap,
    request: GraphQLRequest,
) -> GraphQLResponse {
    host.counters.requests.fetch_add(1, Ordering::Relaxed);
    let mut request = request.into_inner();
    if let Some(bearer) = Bearer::from_headers(&headers) {
        request = request.data(bearer);
    }
    let response = host.executor.execute(request).await;
    if response.is_err() {
        host.counters.errors.fetch_add(1, Ordering::Relaxed);
    }
    if !host.delay.is_zero() {
        tokio::time::sleep(host.delay).await;
    }
    response.into()
}

async fn metrics<E: Executor>(State(host): State<Arc<Host<E>>>) -> impl IntoResponse {
    let c = &host.counters;
    let body = format!(
        "# HELP subgraph_requests_total GraphQL requests received on /graphql.\n\
         # TYPE subgraph_requests_total counter\n\
         subgraph_requests_total{{service=\"{s}\"}} {}\n\
         # HELP subgraph_request_errors_total GraphQL responses that carried errors.\n\
         # TYPE subgraph_request_errors_total counter\n\
         subgraph_request_errors_total{{service=\"{s}\"}} {}\n",
        c.requests.load(Ordering::Relaxed),
        c.errors.load(Ordering::Relaxed),
        s = host.service,
    );
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        body,
    )
}

/// Serve `executor` as subgraph `service` until SIGINT/SIGTERM.
pub async fn run<E: Executor>(
    service: &'static str,
    executor: E,
    args: HostArgs,
    default_listen: SocketAddr,
) -> anyhow::Result<()> {
    let addr = args.listen.unwrap_or(default_listen);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("--listen {addr}: cannot bind: {e}"))?;
    eprintln!(
        "{service} listening on http://{}/graphql",
        listener.local_addr()?
    );
    let app = router(service, executor, Duration::from_millis(args.delay_ms));
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    Ok(())
}

/// The whole `main` of subgraph binary `binary`: parse `--listen`/`--delay-ms`, serve
/// `executor` as `service` (default address `default_listen`), and exit 1 with a
/// message on failure.
pub fn main<E: Executor>(
    binary: &'static str,
    service: &'static str,
    default_listen: SocketAddr,
    executor: impl FnOnce() -> E,
) {
    use clap::{Args, Command, FromArgMatches};
    let command = HostArgs::augment_args(Command::new(binary).about(format!(
        "The {service} subgraph of graphql-cache-lab (default --listen {default_listen})"
    )));
    let args = match HostArgs::from_arg_matches(&command.get_matches()) {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{binary}: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(run(service, executor(), args, default_listen)) {
        eprintln!("{binary}: {e:#}");
        std::process::exit(1);
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
