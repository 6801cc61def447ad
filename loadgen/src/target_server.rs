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
//! | anything else | 200 with the body after the server's default delay (with a recording: the recorded answer, or 404) |
//!
//! The body is `{"data":{"ok":true}}`, or any bytes the caller gives (`loadgen target
//! --body FILE`): a captured gateway answer served this way makes the target's cost
//! per exchange that of a bare HTTP exchange of that answer's size. With a recording
//! (`loadgen target --replay DIR`, [`crate::replay`]), a POST to any other path
//! `/NAME` is answered as the subgraph NAME answered that same request body when it
//! was recorded, or 404; a GET there still gets the body (to see the server up).
//! Every answer is `application/json`, framed by `content-length`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::replay::Replay;

/// The body of the paths without their own, unless the caller gives another.
pub const OK_BODY: &[u8] = br#"{"data":{"ok":true}}"#;
const GRAPHQL_ERROR_BODY: &[u8] = br#"{"data":null,"errors":[{"message":"resolver failed"}]}"#;

/// What one server answers.
#[derive(Debug)]
pub struct Setup {
    /// Delay of every answer on the paths without a behaviour of their own.
    pub default_delay: Duration,
    /// What the paths without a body of their own answer ([`OK_BODY`] unless the
    /// caller has another).
    pub body: Bytes,
    /// Recorded exchanges: when given, the paths without a behaviour of their own
    /// answer from it instead of with `body`.
    pub replay: Option<Replay>,
}

impl Default for Setup {
    /// No delay, no recording, and [`OK_BODY`].
    fn default() -> Setup {
        Setup::answering(Bytes::from_static(OK_BODY))
    }
}

impl Setup {
    /// No delay, no recording, and `body` on the paths without a body of their own.
    pub fn answering(body: Bytes) -> Setup {
        Setup {
            default_delay: Duration::ZERO,
            body,
            replay: None,
        }
    }
}

/// Shared state of one server.
#[derive(Debug, Default)]
struct TargetState {
    setup: Setup,
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
            Ok(respond(StatusCode::OK, state.setup.body.clone()))
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
            0 => Ok(respond(StatusCode::OK, state.setup.body.clone())),
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
            if !state.setup.default_delay.is_zero() {
                tokio::time::sleep(state.setup.default_delay).await;
            }
            match &state.setup.replay {
                // A GET (to wait for the server) has nothing to look up.
                Some(replay) if request.method() == hyper::Method::POST => {
                    let name = head.to_owned();
                    Ok(replayed(replay, &name, request).await)
                }
                _ => Ok(respond(StatusCode::OK, state.setup.body.clone())),
            }
        }
    }
}

/// The recorded answer to `request`'s body sent to the subgraph `name`, or 404 with
/// a GraphQL error saying none was recorded.
async fn replayed(
    replay: &Replay,
    name: &str,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => {
            let message = format!("reading the request body: {e}");
            return respond(StatusCode::BAD_REQUEST, graphql_error(&message));
        }
    };
    match replay.answer(name, &body) {
        Some(answer) => respond(StatusCode::OK, answer.clone()),
        None => {
            let message = format!(
                "the replay holds no recorded request of {} bytes like this one to {name:?}",
                body.len()
            );
            respond(StatusCode::NOT_FOUND, graphql_error(&message))
        }
    }
}

/// `{"errors":[{"message":…}]}`.
fn graphql_error(message: &str) -> Bytes {
    Bytes::from(serde_json::json!({ "errors": [{ "message": message }] }).to_string())
}

/// Accept connections on `listener` and serve them, as `setup` says, until the
/// future is dropped.
pub async fn serve(listener: TcpListener, setup: Setup) {
    let state = Arc::new(TargetState {
        setup,
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
        BackgroundTarget::start_with(
            Setup {
                default_delay,
                ..Setup::default()
            },
            worker_threads,
        )
    }

    /// [`BackgroundTarget::start`], answering as `setup` says.
    pub fn start_with(setup: Setup, worker_threads: usize) -> std::io::Result<BackgroundTarget> {
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
                        _ = serve(listener, setup) => {}
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
