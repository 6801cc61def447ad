//! A small HTTP/1.1 server with known behaviour, to test and calibrate the load generator.
//!
//! The tests start it in-process on port 0; `loadgen target` runs it as a process, so
//! that loadgen and wrk can be compared against the same target. What it does depends
//! on the path:
//!
//! | path | answer |
//! |---|---|
//! | `/delay/<ms>` | 200 with the body after `<ms>` milliseconds |
//! | `/status/<code>` | that status, with a JSON body |
//! | `/graphql-errors` | 200 with a GraphQL `errors` list |
//! | `/drop` | closes the connection without answering |
//! | `/hang` | never answers (until the client gives up) |
//! | `/mixed` | in turn: 200 with the body, 500, 200 with GraphQL errors, dropped connection |
//! | anything else | 200 with the body after the server's default delay |
//!
//! The body is `{"data":{"ok":true}}`, or any bytes the caller gives (`loadgen target
//! --body FILE`): a captured gateway answer served this way makes the target's cost
//! per exchange that of a bare HTTP exchange of that answer's size. Every answer is
//! `application/json`, framed by `content-length`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// The body of the paths without their own, unless the caller gives another.
pub const OK_BODY: &[u8] = br#"{"data":{"ok":true}}"#;
const GRAPHQL_ERROR_BODY: &[u8] = br#"{"data":null,"errors":[{"message":"resolver failed"}]}"#;

/// Shared state of one server.
#[derive(Debug, Default)]
struct TargetState {
    default_delay: Duration,
    /// What the paths without a body of their own answer.
    body: Bytes,
    mixed_turn: AtomicU64,
}

/// The error that makes hyper close a connection without a response.
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped on purpose")
    }
}

impl std::error::Error for Dropped {}

fn respond(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

async fn answer(
    state: Arc<TargetState>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Dropped> {
    let path = request.uri().path();
    let mut segments = path.trim_start_matches('/').splitn(2, '/');
    let head = segments.next().unwrap_or("");
    let arg = segments.next();
    match (head, arg) {
        ("delay", Some(ms)) => {
            let ms: u64 = ms.parse().unwrap_or(0);
            if ms > 0 {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            Ok(respond(StatusCode::OK, state.body.clone()))
        }
        ("status", Some(code)) => {
            let status = code
                .parse::<u16>()
                .ok()
                .and_then(|c| StatusCode::from_u16(c).ok())
                .unwrap_or(StatusCode::BAD_REQUEST);
            Ok(respond(
                status,
                Bytes::from_static(br#"{"error":"as requested"}"#),
            ))
        }
        ("graphql-errors", None) => Ok(respond(
            StatusCode::OK,
            Bytes::from_static(GRAPHQL_ERROR_BODY),
        )),
        ("drop", None) => Err(Dropped),
        ("hang", None) => {
            std::future::pending::<()>().await;
            Err(Dropped)
        }
        ("mixed", None) => match state.mixed_turn.fetch_add(1, Ordering::Relaxed) % 4 {
            0 => Ok(respond(StatusCode::OK, state.body.clone())),
            1 => Ok(respond(
                StatusCode::INTERNAL_SERVER_ERROR,
                Bytes::from_static(br#"{"error":"boom"}"#),
            )),
            2 => Ok(respond(
                StatusCode::OK,
                Bytes::from_static(GRAPHQL_ERROR_BODY),
            )),
            _ => Err(Dropped),
        },
        _ => {
            if !state.default_delay.is_zero() {
                tokio::time::sleep(state.default_delay).await;
            }
            Ok(respond(StatusCode::OK, state.body.clone()))
        }
    }
}

/// Accept connections on `listener` and serve them until the future is dropped; the
/// paths without a body of their own answer `body` ([`OK_BODY`] unless the caller has
/// another).
pub async fn serve(listener: TcpListener, default_delay: Duration, body: Bytes) {
    let state = Arc::new(TargetState {
        default_delay,
        body,
        mixed_turn: AtomicU64::new(0),
    });
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let state = Arc::clone(&state);
                async move { answer(state, request).await }
            });
            // Errors here are the dropped and hung connections the paths ask for.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// A target server running on its own thread; it stops when this is dropped.
pub struct BackgroundTarget {
    pub addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BackgroundTarget {
    /// Start on 127.0.0.1 port 0 with `worker_threads` runtime threads.
    pub fn start(
        default_delay: Duration,
        worker_threads: usize,
    ) -> std::io::Result<BackgroundTarget> {
        BackgroundTarget::start_with_body(
            default_delay,
            worker_threads,
            Bytes::from_static(OK_BODY),
        )
    }

    /// [`BackgroundTarget::start`], the paths without a body of their own answering
    /// `body`.
    pub fn start_with_body(
        default_delay: Duration,
        worker_threads: usize,
        body: Bytes,
    ) -> std::io::Result<BackgroundTarget> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads.max(1))
            .enable_all()
            .build()?;
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let (shutdown, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("target-server".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = TcpListener::from_std(std_listener) else {
                        return;
                    };
                    tokio::select! {
                        _ = serve(listener, default_delay, body) => {}
                        _ = stopped => {}
                    }
                });
                runtime.shutdown_background();
            })?;
        Ok(BackgroundTarget {
            addr,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// `http://addr/path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

impl Drop for BackgroundTarget {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
