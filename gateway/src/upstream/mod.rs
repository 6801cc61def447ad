//! Upstream: one lean HTTP/1.1 client per subgraph.
//!
//! Each subgraph's URL is parsed once, and its request head made once
//! (`request_head`); exchanges run on [`http1_wire`]'s lean connections.
//! Connections are kept alive in a pool per subgraph and per shard (last in, first
//! out, so the warmest connection goes first), and an exchange runs in the request's
//! own task: no per-connection task, no channel, no hand-off. A shard ([`crate::runtime`])
//! only takes back connections it opened, so a subgraph socket is always polled by the
//! thread whose reactor it is registered with.
//!
//! A query that meets a keep-alive connection the subgraph closed under it (no byte
//! of an answer came back) is sent once more on a new connection; a mutation never
//! is (it may have run), and its idle connection is first checked for a close that
//! arrived while it waited. Each subgraph has its own limits (`settings`): a
//! connect timeout, and a request timeout that bounds everything from taking a
//! connection to the answer's last byte, retry included; each response body is
//! bounded by a size limit. The body is parsed into a tape and split into `data`
//! and `errors` (`response`); anything that is not a GraphQL response is a
//! [`FetchError`].
//!
//! Each subgraph also has a circuit breaker ([`cache_core::breaker`]): a request is
//! admitted by one atomic load while it is closed; timeouts, refused or reset
//! connections, 5xx answers and answers that are not GraphQL count as failures. While
//! it is open, a request fails at once with [`FetchError::BreakerOpen`], which the
//! response reports at every field the fetch was for, with its path; the other
//! subgraphs' fields resolve as usual. A request cancelled mid-way (its client went
//! away) gives no verdict. The answer's `Cache-Control` travels with it, for the
//! cache's `origin-ttl` strategy.

mod body;
mod request_head;
mod response;
mod settings;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cache_core::breaker::{Breaker, Permit};
use cache_core::CacheDirectives;
use hyper::header::HeaderValue;
use hyper::Uri;
use parking_lot::Mutex;

pub use body::{request_body, WriteVariables};
use http1_wire::{AnswerRules, Connection, ExchangeError};
use request_head::RequestHead;
use response::parse_response;
pub use response::{FetchError, PathItem, UpstreamError, UpstreamResponse};
pub use settings::{SubgraphLimits, UpstreamArgs, UpstreamSettings};

use crate::server::metrics::Metrics;
use crate::supergraph::{Subgraph, SubgraphId};

/// Most idle connections a pool keeps per subgraph.
const MAX_IDLE: usize = 512;

/// An idle connection older than this is checked for a close the subgraph sent
/// while it waited (servers close idle keep-alive connections after a while); a
/// younger one is used as it is, and a query that meets a close anyway is retried.
const CHECK_IDLE_AFTER: Duration = Duration::from_millis(50);

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

/// One subgraph: where it is, its request head, its idle connections, its limits
/// and its breaker.
struct Endpoint {
    name: String,
    /// `host:port`, resolved at each connect (the pool makes connects rare).
    authority: String,
    head: RequestHead,
    /// Idle connections, one pool per shard.
    idle: Box<[Mutex<Vec<Connection>>]>,
    limits: SubgraphLimits,
    breaker: Breaker,
    connect_timeouts: AtomicU64,
    request_timeouts: AtomicU64,
}

impl Endpoint {
    /// The calling shard's idle connections.
    fn idle(&self) -> &Mutex<Vec<Connection>> {
        &self.idle[crate::runtime::current_shard() % self.idle.len()]
    }
}

/// The HTTP clients of every subgraph.
pub struct Upstream {
    endpoints: Vec<Endpoint>,
    max_body_bytes: usize,
    metrics: Arc<Metrics>,
}

/// How an exchange failed, and whether sending it again may help.
struct Failure {
    error: FetchError,
    retryable: bool,
}

impl Upstream {
    /// Clients for `subgraphs` (their URLs must be `http://host[:port]/path`), each
    /// with its limits from `settings`.
    pub fn new(
        subgraphs: &[Subgraph],
        settings: &UpstreamSettings,
        max_body_bytes: usize,
        shards: usize,
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
                let limits = settings.of(&sg.name).clone();
                Ok(Endpoint {
                    name: sg.name.clone(),
                    authority: format!("{}:{port}", authority.host()),
                    head: RequestHead::new(path, authority.as_str()),
                    idle: (0..shards.max(1)).map(|_| Mutex::default()).collect(),
                    breaker: Breaker::new(limits.breaker.clone()),
                    limits,
                    connect_timeouts: AtomicU64::new(0),
                    request_timeouts: AtomicU64::new(0),
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Upstream {
            endpoints,
            max_body_bytes,
            metrics,
        })
    }

    /// The subgraph's name.
    pub fn name(&self, subgraph: SubgraphId) -> &str {
        &self.endpoints[subgraph].name
    }

    /// Send `request` and read its GraphQL response, unless the subgraph's breaker is
    /// open.
    pub async fn send(&self, request: SubgraphRequest<'_>) -> Result<UpstreamResponse, FetchError> {
        let endpoint = &self.endpoints[request.subgraph];
        let permit = endpoint
            .breaker
            .admit()
            .map_err(|refused| FetchError::BreakerOpen {
                subgraph: endpoint.name.clone(),
                retry_in: refused.retry_in,
            })?;
        let deadline = tokio::time::Instant::now() + endpoint.limits.request_timeout;
        let retries = if request.mutation { 0 } else { 1 };
        let mut attempt = 0;
        loop {
            self.metrics.upstream_request(request.subgraph);
            // A retry never takes another idle connection: the first may have shown
            // that the pool holds connections the subgraph closed.
            match self
                .exchange(endpoint, &request, attempt == 0, deadline)
                .await
            {
                Ok((status, body, cache_control)) => {
                    judge(permit, status < 500);
                    return parse_response(&endpoint.name, status, body)
                        .map(|response| UpstreamResponse {
                            cache_control,
                            ..response
                        })
                        .inspect_err(|_| {
                            self.metrics.upstream_error(request.subgraph);
                        });
                }
                Err(failure) => {
                    self.metrics.upstream_error(request.subgraph);
                    if !failure.retryable || attempt == retries {
                        endpoint.count(&failure.error);
                        // An answer too large says nothing of the subgraph's health.
                        if !matches!(failure.error, FetchError::TooLarge { .. }) {
                            judge(permit, false);
                        }
                        return Err(failure.error);
                    }
                    attempt += 1;
                }
            }
        }
    }

    /// Prometheus text: per subgraph, timeouts by phase, the breaker's state, its
    /// transitions, and the requests it refused.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        let per = |f: &dyn Fn(&Endpoint) -> Vec<(String, u64)>| -> Vec<(String, u64)> {
            self.endpoints.iter().flat_map(f).collect()
        };
        crate::server::metrics::family(
            &mut out,
            "counter",
            "gateway_upstream_timeouts_total",
            "Subgraph requests that timed out, by phase (connect, or the whole request).",
            per(&|e| {
                vec![
                    (
                        format!("subgraph=\"{}\",phase=\"connect\"", e.name),
                        e.connect_timeouts.load(Relaxed),
                    ),
                    (
                        format!("subgraph=\"{}\",phase=\"request\"", e.name),
                        e.request_timeouts.load(Relaxed),
                    ),
                ]
            }),
        );
        crate::server::metrics::family(
            &mut out,
            "gauge",
            "gateway_upstream_breaker_state",
            "Each subgraph's circuit breaker: 0 closed, 1 open, 2 half-open.",
            per(&|e| {
                vec![(
                    format!("subgraph=\"{}\"", e.name),
                    u64::from(e.breaker.stats().state),
                )]
            }),
        );
        crate::server::metrics::family(
            &mut out,
            "counter",
            "gateway_upstream_breaker_transitions_total",
            "Each subgraph's circuit breaker transitions, by the state entered.",
            per(&|e| {
                let s = e.breaker.stats();
                [
                    ("open", s.opened),
                    ("half_open", s.half_opened),
                    ("closed", s.closed),
                ]
                .into_iter()
                .map(|(to, n)| (format!("subgraph=\"{}\",to=\"{to}\"", e.name), n))
                .collect()
            }),
        );
        crate::server::metrics::family(
            &mut out,
            "counter",
            "gateway_upstream_refused_total",
            "Subgraph requests failed at once by an open (or busy half-open) breaker.",
            per(&|e| {
                vec![(
                    format!("subgraph=\"{}\"", e.name),
                    e.breaker.stats().refused,
                )]
            }),
        );
        out
    }

    /// One exchange on a pooled or new connection: the status, the whole body and
    /// the answer's `cache-control`.
    async fn exchange(
        &self,
        endpoint: &Endpoint,
        request: &SubgraphRequest<'_>,
        pooled: bool,
        deadline: tokio::time::Instant,
    ) -> Result<(u16, Bytes, Option<CacheDirectives>), Failure> {
        let now = tokio::time::Instant::now();
        let timed_out = || Failure {
            error: FetchError::Timeout {
                subgraph: endpoint.name.clone(),
                timeout: endpoint.limits.request_timeout,
            },
            retryable: false,
        };
        let checkout = self.checkout(endpoint, request.mutation, pooled, now, deadline);
        let mut connection = tokio::time::timeout_at(deadline, checkout)
            .await
            .map_err(|_| timed_out())??;
        let (prefix, tail) = endpoint
            .head
            .complete(request.body.len(), request.authorization);
        let rules = AnswerRules {
            max_body: self.max_body_bytes,
            head_request: false,
        };
        let mut cache_control = None;
        let outcome = connection
            .exchange(
                &[prefix, &tail, &request.body],
                deadline,
                rules,
                |name, value| {
                    if name.eq_ignore_ascii_case("cache-control") {
                        cache_control = Some(CacheDirectives::parse(value));
                    }
                },
            )
            .await;
        match outcome {
            Ok(http1_wire::Answer {
                status,
                body,
                reusable,
            }) => {
                if reusable {
                    connection.set_idle(now);
                    let mut idle = endpoint.idle().lock();
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
        deadline: tokio::time::Instant,
    ) -> Result<Connection, Failure> {
        loop {
            let taken = if pooled {
                endpoint.idle().lock().pop()
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
        // The connect timeout, unless less of the request's time is left (then the
        // request's own timeout fires first).
        let connect_by = deadline.min(now + endpoint.limits.connect_timeout);
        match tokio::time::timeout_at(connect_by, Connection::open(&endpoint.authority)).await {
            Ok(Ok(connection)) => Ok(connection),
            Ok(Err(e)) => Err(unavailable(
                endpoint,
                format!("connect {}: {e}", endpoint.authority),
                false,
            )),
            Err(_) if connect_by < deadline => Err(Failure {
                error: FetchError::ConnectTimeout {
                    subgraph: endpoint.name.clone(),
                    timeout: endpoint.limits.connect_timeout,
                },
                retryable: false,
            }),
            Err(_) => Err(Failure {
                error: FetchError::Timeout {
                    subgraph: endpoint.name.clone(),
                    timeout: endpoint.limits.request_timeout,
                },
                retryable: false,
            }),
        }
    }
}

impl Endpoint {
    /// Count a final failure that is a timeout.
    fn count(&self, error: &FetchError) {
        match error {
            FetchError::Timeout { .. } => self.request_timeouts.fetch_add(1, Relaxed),
            FetchError::ConnectTimeout { .. } => self.connect_timeouts.fetch_add(1, Relaxed),
            _ => 0,
        };
    }
}

/// Tell the breaker how the request went.
#[inline]
fn judge(permit: Permit<'_>, healthy: bool) {
    if healthy {
        permit.succeed()
    } else {
        permit.fail()
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
