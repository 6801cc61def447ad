//! Serving a subgraph's router over HTTP/1.1, and the graceful drain that ends it.
//!
//! Each connection runs as its own task in a `JoinSet` that this module owns. When the
//! shutdown signal fires (SIGTERM or SIGINT in a process, any future in a test) the
//! drain begins:
//!
//! 1. the listener is dropped, so new connections are refused at once;
//! 2. every open connection is told to shut down gracefully: an idle keep-alive
//!    connection closes now, a connection with a request in progress finishes that
//!    response (sent with `connection: close`) and then closes;
//! 3. after `--drain-timeout`, whatever is still open (a request stuck in a slow
//!    backend, or one injected with `--hang-rate`, which never answers) is cut, so
//!    that a drain always ends.
//!
//! Either way the process then exits 0: it was asked to stop and it stopped. What a
//! drain had to cut is printed and returned, so a test can tell a clean drain from a
//! cut one.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Connections still open when `--drain-timeout` ran out, closed unanswered.
    pub cut: usize,
}

/// Serve `router` on `listener` until `shutdown` resolves, then drain: stop
/// accepting, let requests in progress finish for up to `drain_timeout`, and cut what
/// remains. Returns once every connection is closed.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
    drain_timeout: Duration,
) -> Drained {
    let service = hyper_util::service::TowerToHyperService::new(router);
    let (draining_tx, draining) = watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        while connections.try_join_next().is_some() {}
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    eprintln!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        let mut draining = draining.clone();
        connections.spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = draining.wait_for(|d| *d) => conn.as_mut().graceful_shutdown(),
            }
            let _ = conn.await;
        });
    }
    drop(listener);
    let _ = draining_tx.send(true);
    let all_closed = async { while connections.join_next().await.is_some() {} };
    match tokio::time::timeout(drain_timeout, all_closed).await {
        Ok(()) => Drained { cut: 0 },
        Err(_) => {
            let cut = connections.len();
            connections.shutdown().await;
            Drained { cut }
        }
    }
}

/// Bind `addr` and serve `router` as `service` until SIGINT/SIGTERM, then drain for up
/// to `drain_timeout`. Prints the address it listens on (`<service> listening on
/// http://ADDR/graphql`, which is how a parent that asked for port 0 learns the port)
/// and how the drain ended.
pub async fn run(
    service: &str,
    addr: SocketAddr,
    router: Router,
    drain_timeout: Duration,
) -> anyhow::Result<()> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("--listen {addr}: cannot bind: {e}"))?;
    eprintln!(
        "{service} listening on http://{}/graphql",
        listener.local_addr()?
    );
    let drained = serve(listener, router, shutdown_signal(), drain_timeout).await;
    if drained.cut == 0 {
        eprintln!("{service}: drained, every request answered");
    } else {
        eprintln!(
            "{service}: --drain-timeout {drain_timeout:?} ran out; closed {} connection(s) \
             with requests still in progress",
            drained.cut
        );
    }
    Ok(())
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
