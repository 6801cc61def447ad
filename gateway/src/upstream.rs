//! Upstream: one lean HTTP/1.1 client per subgraph.
//!
//! Each subgraph's URL is parsed once, and its constant headers (`host`,
//! `content-type`) are built once. Connections are kept alive in a pool per subgraph
//! (last in, first out, so the warmest connection goes first). A connection is
//! hyper's sender plus its I/O future; instead of spawning that future as a task per
//! connection, [`drive`] polls it inside the request's own task while an exchange is
//! in flight, so an exchange costs no cross-task hand-off. While a connection sits in
//! the pool nobody polls it; the next user first asks it whether it is still ready,
//! which reads a close the subgraph sent meanwhile.
//!
//! A query that meets a keep-alive connection the subgraph closed under it is sent
//! once more on a new connection; a mutation never is (it may have run). Each
//! exchange, connect included, is bounded by the upstream timeout, and each response
//! body by a size limit. The body is parsed into a [`Tape`] and split into `data`
//! and `errors`; anything that is not a GraphQL response is a [`FetchError`].

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use serde::Deserialize;
use tokio::net::TcpStream;

use crate::json::Tape;
use crate::metrics::Metrics;
use crate::supergraph::{Subgraph, SubgraphId};

/// Most idle connections a pool keeps per subgraph.
const MAX_IDLE: usize = 512;

/// A subgraph's GraphQL response: the tape of its body, where `data` is in it, and
/// its errors.
#[derive(Debug, Clone)]
pub struct UpstreamResponse {
    pub tape: Arc<Tape>,
    /// The tape index of `data`, when present and not null.
    pub data: Option<u32>,
    pub errors: Vec<UpstreamError>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct UpstreamError {
    pub message: String,
    #[serde(default)]
    pub path: Vec<PathItem>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum PathItem {
    Index(usize),
    Key(String),
}

/// Why a subgraph request produced no GraphQL response.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FetchError {
    #[error("subgraph {subgraph} is unavailable: {detail}")]
    Unavailable { subgraph: String, detail: String },
    #[error("subgraph {subgraph} did not answer within {timeout:?}")]
    Timeout { subgraph: String, timeout: Duration },
    #[error("subgraph {subgraph} answered HTTP {status} without a GraphQL response")]
    Status { subgraph: String, status: u16 },
    #[error("subgraph {subgraph} sent a response that is not GraphQL JSON: {detail}")]
    Malformed { subgraph: String, detail: String },
    #[error("subgraph {subgraph} answered more than {limit} bytes")]
    TooLarge { subgraph: String, limit: usize },
}

/// One request to a subgraph.
pub struct SubgraphRequest<'a> {
    pub subgraph: SubgraphId,
    /// The JSON body: `{"query": …, "variables": …}`.
    pub body: Bytes,
    /// The client's `authorization` header, forwarded as is.
    pub authorization: Option<&'a HeaderValue>,
    /// Never retried (it may have run).
    pub mutation: bool,
}

type Driver = Pin<Box<http1::Connection<TokioIo<TcpStream>, Full<Bytes>>>>;

/// A keep-alive connection: hyper's sender, the future that does its I/O, and its
/// exchanges' timer.
struct Connection {
    sender: SendRequest<Full<Bytes>>,
    /// `None` once the connection has closed.
    driver: Option<Driver>,
    /// Re-armed lazily: it stays at an earlier exchange's deadline, which always
    /// comes first, and moves to the current one when it fires early. So the timer
    /// wheel is touched about once per timeout per connection, not once per exchange.
    timer: Pin<Box<tokio::time::Sleep>>,
}

/// Await `work` while polling the connection's I/O in the same task. When the
/// connection future ends (the peer closed, or it failed) it is dropped, and `work`
/// sees the closed channel as an error.
async fn drive<F: Future>(driver: &mut Option<Driver>, work: F) -> F::Output {
    let mut work = pin!(work);
    poll_fn(|cx| {
        // Two passes: the first lets the connection deliver what it read and lets
        // `work` queue a request; the second writes that request at once.
        for _ in 0..2 {
            if let Some(d) = driver.as_mut() {
                if d.as_mut().poll(cx).is_ready() {
                    *driver = None;
                }
            }
            if let Poll::Ready(out) = work.as_mut().poll(cx) {
                return Poll::Ready(out);
            }
        }
        Poll::Pending
    })
    .await
}

/// One subgraph: where it is, and its idle connections.
struct Endpoint {
    name: String,
    /// `host:port`, resolved at each connect (the pool makes connects rare).
    authority: String,
    path: Uri,
    host: HeaderValue,
    idle: Mutex<Vec<Connection>>,
}

/// The HTTP clients of every subgraph.
pub struct Upstream {
    endpoints: Vec<Endpoint>,
    timeout: Duration,
    max_body_bytes: usize,
    metrics: Arc<Metrics>,
}

/// How an exchange failed, and whether sending it again may help.
struct Failure {
    error: FetchError,
    retryable: bool,
}

impl Upstream {
    /// Clients for `subgraphs` (their URLs must be `http://host[:port]/path`).
    pub fn new(
        subgraphs: &[Subgraph],
        timeout: Duration,
        max_body_bytes: usize,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Upstream> {
        let endpoints = subgraphs
            .iter()
            .map(|sg| {
                let uri: Uri = sg
                    .url
                    .parse()
                    .map_err(|e| anyhow::anyhow!("subgraph {} URL {:?}: {e}", sg.name, sg.url))?;
                if uri.scheme_str() != Some("http") {
                    anyhow::bail!(
                        "subgraph {} URL {:?}: only http:// is supported",
                        sg.name,
                        sg.url
                    );
                }
                let authority = uri.authority().ok_or_else(|| {
                    anyhow::anyhow!("subgraph {} URL {:?} has no host", sg.name, sg.url)
                })?;
                let host = HeaderValue::from_str(authority.as_str())?;
                let port = authority.port_u16().unwrap_or(80);
                let path: Uri = uri.path_and_query().map_or("/", |p| p.as_str()).parse()?;
                Ok(Endpoint {
                    name: sg.name.clone(),
                    authority: format!("{}:{port}", authority.host()),
                    path,
                    host,
                    idle: Mutex::new(Vec::new()),
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Upstream {
            endpoints,
            timeout,
            max_body_bytes,
            metrics,
        })
    }

    /// The subgraph's name.
    pub fn name(&self, subgraph: SubgraphId) -> &str {
        &self.endpoints[subgraph].name
    }

    /// Send `request` and read its GraphQL response.
    pub async fn send(&self, request: SubgraphRequest<'_>) -> Result<UpstreamResponse, FetchError> {
        let endpoint = &self.endpoints[request.subgraph];
        let retries = if request.mutation { 0 } else { 1 };
        let mut attempt = 0;
        loop {
            self.metrics.upstream_request(request.subgraph);
            match self.exchange(endpoint, &request).await {
                Ok((status, body)) => {
                    return parse_response(&endpoint.name, status, body).inspect_err(|_| {
                        self.metrics.upstream_error(request.subgraph);
                    })
                }
                Err(failure) => {
                    self.metrics.upstream_error(request.subgraph);
                    if !failure.retryable || attempt == retries {
                        return Err(failure.error);
                    }
                    attempt += 1;
                }
            }
        }
    }

    /// One exchange on a pooled or new connection: the status and the whole body.
    async fn exchange(
        &self,
        endpoint: &Endpoint,
        request: &SubgraphRequest<'_>,
    ) -> Result<(u16, Bytes), Failure> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let timed_out = || Failure {
            error: FetchError::Timeout {
                subgraph: endpoint.name.clone(),
                timeout: self.timeout,
            },
            retryable: false,
        };
        let mut connection = tokio::time::timeout_at(deadline, self.checkout(endpoint))
            .await
            .map_err(|_| timed_out())??;
        let mut http = Request::builder()
            .method(Method::POST)
            .uri(endpoint.path.clone())
            .header(HOST, endpoint.host.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(auth) = request.authorization {
            http = http.header(AUTHORIZATION, auth.clone());
        }
        let http = http
            .body(Full::new(request.body.clone()))
            .map_err(|e| unavailable(endpoint, e.to_string(), false))?;
        let limit = self.max_body_bytes;
        let Connection {
            sender,
            driver,
            timer,
        } = &mut connection;
        if timer.is_elapsed() {
            timer.as_mut().reset(deadline);
        }
        let work = async {
            let response = sender.send_request(http).await?;
            let status = response.status().as_u16();
            let mut body = response.into_body();
            let mut first: Option<Bytes> = None;
            let mut rest: Vec<u8> = Vec::new();
            let mut size = 0usize;
            while let Some(frame) = body.frame().await {
                if let Ok(data) = frame?.into_data() {
                    size += data.len();
                    if size > limit {
                        return Ok(Err(size));
                    }
                    match &first {
                        None => first = Some(data),
                        Some(f) => {
                            if rest.is_empty() {
                                rest.extend_from_slice(f);
                            }
                            rest.extend_from_slice(&data);
                        }
                    }
                }
            }
            let bytes = if rest.is_empty() {
                first.unwrap_or_default()
            } else {
                Bytes::from(rest)
            };
            Ok::<_, hyper::Error>(Ok((status, bytes)))
        };
        let answer = {
            let mut work = pin!(drive(driver, work));
            poll_fn(|cx| {
                if let Poll::Ready(out) = work.as_mut().poll(cx) {
                    return Poll::Ready(Some(out));
                }
                while timer.as_mut().poll(cx).is_ready() {
                    if tokio::time::Instant::now() >= deadline {
                        return Poll::Ready(None);
                    }
                    timer.as_mut().reset(deadline);
                }
                Poll::Pending
            })
            .await
        };
        // A connection that timed out may still carry the late answer: never reused.
        let Some(answer) = answer else {
            return Err(timed_out());
        };
        match answer {
            Ok(Ok(answer)) => {
                self.checkin(endpoint, connection);
                Ok(answer)
            }
            Ok(Err(_)) => Err(Failure {
                error: FetchError::TooLarge {
                    subgraph: endpoint.name.clone(),
                    limit,
                },
                retryable: false,
            }),
            // The request may have met a connection the subgraph had just closed.
            Err(e) => Err(unavailable(endpoint, error_chain(&e), true)),
        }
    }

    /// An idle connection that is still open, or a new one.
    async fn checkout(&self, endpoint: &Endpoint) -> Result<Connection, Failure> {
        loop {
            let Some(mut connection) = endpoint.idle.lock().pop() else {
                break;
            };
            let Connection { sender, driver, .. } = &mut connection;
            if driver.is_some() && drive(driver, sender.ready()).await.is_ok() {
                return Ok(connection);
            }
        }
        let stream = TcpStream::connect(endpoint.authority.as_str())
            .await
            .map_err(|e| {
                unavailable(
                    endpoint,
                    format!("connect {}: {e}", endpoint.authority),
                    false,
                )
            })?;
        let _ = stream.set_nodelay(true);
        let (sender, driver) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unavailable(endpoint, error_chain(&e), false))?;
        Ok(Connection {
            sender,
            driver: Some(Box::pin(driver)),
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
        })
    }

    fn checkin(&self, endpoint: &Endpoint, connection: Connection) {
        if connection.driver.is_none() {
            return;
        }
        let mut idle = endpoint.idle.lock();
        if idle.len() < MAX_IDLE {
            idle.push(connection);
        }
    }
}

fn unavailable(endpoint: &Endpoint, detail: String, retryable: bool) -> Failure {
    Failure {
        error: FetchError::Unavailable {
            subgraph: endpoint.name.clone(),
            detail,
        },
        retryable,
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut detail = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        detail = format!("{detail}: {s}");
        source = s.source();
    }
    detail
}

/// A subgraph's answer as a GraphQL response: `data` or `errors` must be there.
fn parse_response(
    subgraph: &str,
    status: u16,
    body: Bytes,
) -> Result<UpstreamResponse, FetchError> {
    let success = (200..300).contains(&status);
    let malformed = |detail: String| {
        if success {
            FetchError::Malformed {
                subgraph: subgraph.to_string(),
                detail,
            }
        } else {
            FetchError::Status {
                subgraph: subgraph.to_string(),
                status,
            }
        }
    };
    let tape = Tape::parse(body).map_err(|e| malformed(e.to_string()))?;
    let root = tape.root();
    if root.kind() != crate::json::Kind::Object {
        return Err(malformed("the body is not a JSON object".into()));
    }
    let mut data = None;
    let mut saw_data = false;
    let mut errors = Vec::new();
    for member in root.members() {
        if member.key_is("data") {
            saw_data = !member.is_null();
            data = (!member.is_null()).then(|| member.index());
        } else if member.key_is("errors") && !member.is_null() {
            errors = serde_json::from_slice::<Vec<UpstreamError>>(member.raw())
                .map_err(|e| malformed(format!("errors: {e}")))?;
        }
    }
    if !saw_data && errors.is_empty() {
        return Err(malformed("neither data nor errors".into()));
    }
    Ok(UpstreamResponse {
        tape: Arc::new(tape),
        data,
        errors,
    })
}
