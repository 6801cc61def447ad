//! Connections: accept them within the connection limit, serve each with hyper, and
//! drain them all when the server is asked to stop.
//!
//! Each connection is a task in a `JoinSet` owned by [`serve`]; dropping that future
//! closes every connection with it. A connection past `--max-connections` is not
//! served: it is written a complete `503` with `Retry-After` and `connection: close`
//! (one non-blocking write into a fresh socket's buffer) and closed lingering, so the
//! client reads the refusal instead of a reset ([`crate::server::linger`]).
//!
//! **The drain.** When `shutdown` resolves (SIGTERM or SIGINT in the gateway process):
//! 1. the listener is dropped, so new connections are refused by the kernel at once;
//! 2. every connection is told to shut down gracefully: an idle keep-alive connection
//!    closes now; one with a request in progress finishes that answer, sent with
//!    `connection: close`, then closes;
//! 3. after the drain timeout, whatever is still open (a request stuck on a subgraph
//!    that hangs, say) is cut, so a drain always ends.
//!
//! **Shards.** Under the default runtime ([`crate::runtime`]) the accept loop gives each
//! connection to the shard with the fewest open connections: the socket leaves this
//! runtime's reactor and joins that shard's, and its task runs there. The `JoinSet`
//! holds every shard's connection tasks alike, so the drain and the cut above are the
//! same on every shard.
//!
//! The subgraphs drain the same way (`subgraph_host::server`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::runtime::Shards;
use crate::server::linger::{linger, Lingering};
use crate::server::load::{connection_refusal, Load};
use crate::server::Service;

/// How connections are served and drained.
#[derive(Clone)]
pub struct ServeOptions {
    /// Time a client has to send a request's headers.
    pub header_read_timeout: Duration,
    /// Longest wait for requests in progress once the drain begins.
    pub drain_timeout: Duration,
    /// The runtimes connections are spread over (empty: served where accepted).
    pub shards: Shards,
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Connections still open when the drain timeout ran out, closed unanswered.
    pub cut: usize,
}

/// Accept connections on `listener` and serve `service` (within `load`'s connection
/// limit) until `shutdown` resolves, then drain. Returns once every connection is
/// closed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: Service,
    load: Arc<Load>,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> Drained {
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
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let Some(seat) = load.admit_connection() else {
            refuse(stream, &load);
            continue;
        };
        let service = service.clone();
        let draining = draining.clone();
        let lingering = load.lingering.clone();
        let timeout = options.header_read_timeout;
        match options.shards.place() {
            None => {
                let io = TokioIo::new(Lingering::new(stream, lingering));
                connections.spawn(async move {
                    let _seat = seat;
                    serve_connection(io, service, timeout, draining).await;
                });
            }
            Some((shard, place)) => {
                // The socket moves to the shard's reactor: registered there, it wakes
                // only that shard's thread.
                let stream = match stream.into_std() {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!("cannot hand a connection to shard: {e}");
                        continue;
                    }
                };
                connections.spawn_on(
                    async move {
                        let _seats = (seat, place);
                        let stream = match TcpStream::from_std(stream) {
                            Ok(s) => s,
                            Err(e) => {
                                tracing::warn!("a shard cannot take a connection: {e}");
                                return;
                            }
                        };
                        let io = TokioIo::new(Lingering::new(stream, lingering));
                        serve_connection(io, service, timeout, draining).await;
                    },
                    shard,
                );
            }
        }
    }
    drop(listener);
    let _ = draining_tx.send(true);
    let all_closed = async { while connections.join_next().await.is_some() {} };
    match tokio::time::timeout(options.drain_timeout, all_closed).await {
        Ok(()) => Drained { cut: 0 },
        Err(_) => {
            let cut = connections.len();
            connections.shutdown().await;
            Drained { cut }
        }
    }
}

/// Serve one connection with hyper until it closes, or until the drain begins; then
/// let its request in progress finish.
async fn serve_connection(
    io: TokioIo<Lingering>,
    service: Service,
    header_read_timeout: Duration,
    mut draining: watch::Receiver<bool>,
) {
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .keep_alive(true)
        .serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = draining.wait_for(|d| *d) => conn.as_mut().graceful_shutdown(),
    }
    let _ = conn.await;
}

/// Answer a connection past the limit with a `503` and close it lingering.
fn refuse(stream: TcpStream, load: &Load) {
    let answer = connection_refusal();
    if matches!(stream.try_write(&answer), Ok(n) if n == answer.len()) {
        linger(stream, load.lingering.clone());
    }
}

/// `/metrics`: each shard's open connections (nothing when connections are served
/// where they are accepted).
pub fn shard_gauges(shards: &Shards) -> String {
    let mut out = String::new();
    if !shards.is_empty() {
        crate::server::metrics::family(
            &mut out,
            "gauge",
            "gateway_shard_connections_open",
            "Client connections open now on each shard (current-thread runtime).",
            shards
                .open()
                .into_iter()
                .enumerate()
                .map(|(i, n)| (format!("shard=\"{i}\""), n as u64)),
        );
    }
    out
}
