//! Upstream: one lean HTTP/1.1 client per subgraph.
//!
//! Each subgraph's URL is parsed once, and its request head made once
//! ([`http1`]). Connections are kept alive in a pool per subgraph (last in, first
//! out, so the warmest connection goes first), and an exchange runs in the
//! request's own task: no per-connection task, no channel, no hand-off.
//!
//! A query that meets a keep-alive connection the subgraph closed under it (no byte
//! of an answer came back) is sent once more on a new connection; a mutation never
//! is (it may have run), and its idle connection is first checked for a close that
//! arrived while it waited. Each exchange, connect included, is bounded by the
//! upstream timeout, and each response body by a size limit. The body is parsed
//! into a [`Tape`] and split into `data` and `errors`; anything that is not a
//! GraphQL response is a [`FetchError`]. The answer's `Cache-Control` travels with
//! it, for the cache's `origin-ttl` strategy.

mod http1;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cache_core::CacheDirectives;
use hyper::header::HeaderValue;
use hyper::Uri;
use parking_lot::Mutex;
use serde::Deserialize;

use http1::{Connection, ExchangeError, RequestHead};

use crate::json::Tape;
use crate::metrics::Metrics;
use crate::supergraph::{Subgraph, SubgraphId};

/// Most idle connections a pool keeps per subgraph.
const MAX_IDLE: usize = 512;

/// An idle connection older than this is checked for a close the subgraph sent
/// while it waited (servers close idle keep-alive connections after a while); a
/// younger one is used as it is, and a query that meets a close anyway is retried.
const CHECK_IDLE_AFTER: Duration = Duration::from_millis(50);

/// A subgraph's GraphQL response: the tape of its body, where `data` is in it, and
/// its errors.
#[derive(Debug, Clone)]
pub struct UpstreamResponse {
    pub tape: Arc<Tape>,
    /// The tape index of `data`, when present and not null.
    pub data: Option<u32>,
    pub errors: Vec<UpstreamError>,
    /// The answer's `Cache-Control` directives, if it had the header.
    pub cache_control: Option<CacheDirectives>,
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

/// One subgraph: where it is, its request head, and its idle connections.
struct Endpoint {
    name: String,
    /// `host:port`, resolved at each connect (the pool makes connects rare).
    authority: String,
    head: RequestHead,
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
                let port = authority.port_u16().unwrap_or(80);
                let path = uri.path_and_query().map_or("/", |p| p.as_str());
                Ok(Endpoint {
                    name: sg.name.clone(),
                    authority: format!("{}:{port}", authority.host()),
                    head: RequestHead::new(path, authority.as_str()),
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
            // A retry never takes another idle connection: the first may have shown
            // that the pool holds connections the subgraph closed.
            match self.exchange(endpoint, &request, attempt == 0).await {
                Ok((status, body, cache_control)) => {
                    return parse_response(&endpoint.name, status, body)
                        .map(|response| UpstreamResponse {
                            cache_control,
                            ..response
                        })
                        .inspect_err(|_| {
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

    /// One exchange on a pooled or new connection: the status, the whole body and
    /// the answer's `cache-control`.
    async fn exchange(
        &self,
        endpoint: &Endpoint,
        request: &SubgraphRequest<'_>,
        pooled: bool,
    ) -> Result<(u16, Bytes, Option<CacheDirectives>), Failure> {
        let now = tokio::time::Instant::now();
        let deadline = now + self.timeout;
        let timed_out = || Failure {
            error: FetchError::Timeout {
                subgraph: endpoint.name.clone(),
                timeout: self.timeout,
            },
            retryable: false,
        };
        let checkout = self.checkout(endpoint, request.mutation, pooled, now);
        let mut connection = tokio::time::timeout_at(deadline, checkout)
            .await
            .map_err(|_| timed_out())??;
        let outcome = connection
            .exchange(
                &endpoint.head,
                &request.body,
                request.authorization,
                deadline,
                self.max_body_bytes,
            )
            .await;
        match outcome {
            Ok((status, body, reusable, cache_control)) => {
                if reusable {
                    connection.set_idle(now);
                    let mut idle = endpoint.idle.lock();
                    if idle.len() < MAX_IDLE {
                        idle.push(connection);
                    }
                }
                Ok((status, body, cache_control))
            }
            Err(ExchangeError::Timeout) => Err(timed_out()),
            Err(ExchangeError::TooLarge) => Err(Failure {
                error: FetchError::TooLarge {
                    subgraph: endpoint.name.clone(),
                    limit: self.max_body_bytes,
                },
                retryable: false,
            }),
            Err(ExchangeError::Protocol(detail)) => Err(Failure {
                error: FetchError::Malformed {
                    subgraph: endpoint.name.clone(),
                    detail,
                },
                retryable: false,
            }),
            // A request that got no answer at all may have met a connection the
            // subgraph had just closed: worth sending once more (queries only).
            Err(ExchangeError::Io { detail, answered }) => {
                Err(unavailable(endpoint, detail, !answered))
            }
        }
    }

    /// An idle connection (when `pooled`), or a new one. One that waited long in the
    /// pool, and any for a mutation (never sent twice), is first checked for a close
    /// the subgraph sent while it waited.
    async fn checkout(
        &self,
        endpoint: &Endpoint,
        mutation: bool,
        pooled: bool,
        now: tokio::time::Instant,
    ) -> Result<Connection, Failure> {
        loop {
            let taken = if pooled {
                endpoint.idle.lock().pop()
            } else {
                None
            };
            let Some(connection) = taken else {
                break;
            };
            let check = mutation || connection.idle_for(now) > CHECK_IDLE_AFTER;
            if !check || !connection.closed_while_idle() {
                return Ok(connection);
            }
        }
        Connection::open(&endpoint.authority).await.map_err(|e| {
            unavailable(
                endpoint,
                format!("connect {}: {e}", endpoint.authority),
                false,
            )
        })
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
        cache_control: None,
    })
}
