//! The one seam through which every subgraph request passes.
//!
//! Resolvers describe what they need as a [`FetchRequest`] (which subgraph, a root
//! field or an `_entities` batch, the query text, the caller's `authorization`) and
//! hand it to a [`Fetch`]. [`SubgraphClients`] is the real thing: one keep-alive
//! connection pool per subgraph, a reset keep-alive connection retried once for
//! queries, and the upstream counters for `/metrics`. A cache layer implements
//! [`Fetch`] by wrapping another [`Fetch`], so caching slots in here without touching
//! planning or execution.

use std::sync::Arc;
use std::time::Duration;

use async_graphql_value::ConstValue;
use futures::future::BoxFuture;
use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde::Deserialize;

use crate::metrics::Metrics;
use crate::supergraph::{Subgraph, SubgraphId};

/// What a resolver asks of a subgraph.
#[derive(Debug)]
pub struct FetchRequest<'a> {
    pub subgraph: SubgraphId,
    pub kind: FetchKind<'a>,
    /// The GraphQL document sent to the subgraph.
    pub query: String,
    /// Variables sent with it (the representations, for `_entities`).
    pub variables: Option<serde_json::Value>,
    /// The client's `authorization` header, forwarded as is.
    pub authorization: Option<&'a HeaderValue>,
}

#[derive(Debug, Clone, Copy)]
pub enum FetchKind<'a> {
    /// A root field: `namespace` is `Query.me`, `Mutation.updateUser`, …
    Root { namespace: &'a str, mutation: bool },
    /// An `_entities` batch for objects of `type_name`.
    Entities { type_name: &'a str },
}

impl FetchKind<'_> {
    pub fn is_mutation(&self) -> bool {
        matches!(self, FetchKind::Root { mutation: true, .. })
    }
}

/// A subgraph's GraphQL response.
#[derive(Debug, Default, Deserialize)]
pub struct UpstreamResponse {
    #[serde(default)]
    pub data: Option<ConstValue>,
    #[serde(default)]
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
}

/// Anything that can answer a [`FetchRequest`]: the subgraph clients, or a cache around them.
pub trait Fetch: Send + Sync + 'static {
    fn fetch<'a>(
        &'a self,
        request: FetchRequest<'a>,
    ) -> BoxFuture<'a, Result<Arc<UpstreamResponse>, FetchError>>;
}

/// HTTP clients for every subgraph.
pub struct SubgraphClients {
    subgraphs: Vec<Subgraph>,
    http: reqwest::Client,
    timeout: Duration,
    metrics: Arc<Metrics>,
}

impl SubgraphClients {
    pub fn new(
        subgraphs: Vec<Subgraph>,
        timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(1024)
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .timeout(timeout)
            .build()?;
        Ok(SubgraphClients {
            subgraphs,
            http,
            timeout,
            metrics,
        })
    }

    async fn send_once(
        &self,
        request: &FetchRequest<'_>,
        body: &bytes::Bytes,
    ) -> Result<UpstreamResponse, (FetchError, bool)> {
        let subgraph = &self.subgraphs[request.subgraph];
        self.metrics.upstream_request(request.subgraph);
        let mut builder = self
            .http
            .post(&subgraph.url)
            .header(CONTENT_TYPE, "application/json")
            .body(body.clone());
        if let Some(auth) = request.authorization {
            builder = builder.header(AUTHORIZATION, auth.clone());
        }
        let name = || subgraph.name.clone();
        // Only a request that may have met a dead keep-alive connection is worth a
        // second try: not a timeout, and not a refused connect (the subgraph is down).
        let response = match builder.send().await {
            Ok(r) => r,
            Err(e) => {
                let retryable = !e.is_timeout() && !e.is_connect();
                return Err((self.transport_error(&subgraph.name, &e), retryable));
            }
        };
        let status = response.status();
        let bytes = match response.bytes().await {
            Ok(b) => b,
            Err(e) => return Err((self.transport_error(&subgraph.name, &e), !e.is_timeout())),
        };
        match serde_json::from_slice::<UpstreamResponse>(&bytes) {
            Ok(parsed) if parsed.data.is_some() || !parsed.errors.is_empty() => Ok(parsed),
            Ok(_) | Err(_) if !status.is_success() => Err((
                FetchError::Status {
                    subgraph: name(),
                    status: status.as_u16(),
                },
                false,
            )),
            Ok(_) => Err((
                FetchError::Malformed {
                    subgraph: name(),
                    detail: "neither data nor errors".into(),
                },
                false,
            )),
            Err(e) => Err((
                FetchError::Malformed {
                    subgraph: name(),
                    detail: e.to_string(),
                },
                false,
            )),
        }
    }

    fn transport_error(&self, subgraph: &str, e: &reqwest::Error) -> FetchError {
        if e.is_timeout() {
            return FetchError::Timeout {
                subgraph: subgraph.to_string(),
                timeout: self.timeout,
            };
        }
        let mut detail = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            detail = format!("{detail}: {s}");
            source = s.source();
        }
        FetchError::Unavailable {
            subgraph: subgraph.to_string(),
            detail,
        }
    }
}

impl Fetch for SubgraphClients {
    fn fetch<'a>(
        &'a self,
        request: FetchRequest<'a>,
    ) -> BoxFuture<'a, Result<Arc<UpstreamResponse>, FetchError>> {
        Box::pin(async move {
            let body = match &request.variables {
                Some(vars) => serde_json::json!({ "query": request.query, "variables": vars }),
                None => serde_json::json!({ "query": request.query }),
            };
            let body = bytes::Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
            // A keep-alive connection the subgraph closed under us fails the first
            // attempt; a query is safe to send once more, a mutation is not.
            let retries_left = if request.kind.is_mutation() { 0 } else { 1 };
            let mut attempt = 0;
            loop {
                match self.send_once(&request, &body).await {
                    Ok(response) => return Ok(Arc::new(response)),
                    Err((error, retryable)) => {
                        self.metrics.upstream_error(request.subgraph);
                        if !retryable || attempt == retries_left {
                            return Err(error);
                        }
                        attempt += 1;
                    }
                }
            }
        })
    }
}
