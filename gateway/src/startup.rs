//! Start-up: get the supergraph, build the planner, and assemble a running gateway.
//!
//! The supergraph is a file (`--supergraph`), or the lab's own composition of the
//! subgraphs' SDL (`--subgraph NAME=URL`); either way one supergraph SDL reaches
//! the one reader and planner ([`crate::supergraph::join`]). Subgraphs often start
//! at the same time as the gateway, so reading their SDL is retried with
//! exponential backoff until a deadline; the error then names the subgraph and the
//! last failure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};

use crate::caching::edge::EdgePurge;
use crate::caching::requests::{RequestCache, RequestStrategy};
use crate::caching::{CacheSettings, ResolverCache, StorageKind};
use crate::documents::persisted::{PersistedDocuments, PersistedSettings};
use crate::documents::validation::Validator;
use crate::documents::{DocumentCache, DocumentLimits};
use crate::execute::Executor;
use crate::pipeline::App;
use crate::plan::Planner;
use crate::server::metrics::Metrics;
use crate::server::request::RequestLimits;
use crate::server::turns::Turns;
use crate::supergraph::{Subgraph, Supergraph};
use crate::upstream::{Upstream, UpstreamSettings};

/// How long and how often to retry reading a subgraph's SDL.
#[derive(Debug, Clone)]
pub struct Backoff {
    pub deadline: Duration,
    pub first: Duration,
    pub max: Duration,
}

/// Where the supergraph comes from.
#[derive(Debug, Clone)]
pub enum GraphSource {
    /// Compose these subgraphs' SDL.
    Compose(Vec<Subgraph>),
    /// A supergraph file's text, its subgraphs, and URLs that replace some of theirs.
    Supergraph {
        sdl: String,
        subgraphs: Vec<Subgraph>,
        overrides: Vec<Subgraph>,
    },
}

impl GraphSource {
    /// The subgraphs' names, in order.
    pub fn subgraph_names(&self) -> Vec<String> {
        let subgraphs = match self {
            GraphSource::Compose(s) => s,
            GraphSource::Supergraph { subgraphs, .. } => subgraphs,
        };
        subgraphs.iter().map(|s| s.name.clone()).collect()
    }
}

/// Everything needed to build a gateway.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub graph: GraphSource,
    pub startup: Backoff,
    /// Per subgraph: connect and request timeouts, and the circuit breaker.
    pub upstream: UpstreamSettings,
    /// Largest subgraph response body read, in bytes.
    pub max_upstream_body_bytes: usize,
    pub requests: RequestLimits,
    pub documents: DocumentLimits,
    /// Serve `GET /debug/profile` for flamegraphs.
    pub profiling: bool,
    /// Resolver caching; `None` is the baseline with no cache layer at all.
    pub cache: Option<CacheSettings>,
    /// The request-level strategy in front of execution (`--request-strategy`).
    pub request_strategy: Option<RequestStrategy>,
    /// `--invalidation`: whether a mutation drops the stored answers that refer to
    /// the entities it returned (the resolver cache's own copy is in `cache`).
    pub invalidation: bool,
    /// Bound of the parsed-document cache in bytes; 0 disables it.
    pub doc_cache_bytes: u64,
    /// Trusted documents, the safelist and the APQ store's bound.
    pub persisted: PersistedSettings,
    /// `--surrogate-keys`: answers name the entities they hold in `Surrogate-Key`.
    pub surrogate_keys: bool,
    /// `--edge-purge`: the edge cache purged after mutations and on `/invalidate`.
    pub edge_purge: Option<Arc<EdgePurge>>,
    /// The shards the gateway runs on ([`crate::runtime`]; 1 under the pool): the
    /// upstream keeps idle subgraph connections per shard.
    pub shards: usize,
}

/// Ask `url` for `_service { sdl }` until it answers or `backoff.deadline` passes.
pub async fn fetch_sdl(
    http: &reqwest::Client,
    sg: &Subgraph,
    backoff: &Backoff,
) -> anyhow::Result<String> {
    let started = Instant::now();
    let mut wait = backoff.first;
    loop {
        let attempt = async {
            let response = http
                .post(&sg.url)
                .json(&serde_json::json!({ "query": "{ _service { sdl } }" }))
                .send()
                .await?;
            let status = response.status();
            let body: serde_json::Value = response.json().await?;
            match body.pointer("/data/_service/sdl").and_then(|v| v.as_str()) {
                Some(sdl) => Ok(sdl.to_string()),
                None => Err(anyhow!("HTTP {status}, no _service.sdl in {body}")),
            }
        };
        let error = match attempt.await {
            Ok(sdl) => return Ok(sdl),
            Err(e) => e,
        };
        if started.elapsed() + wait > backoff.deadline {
            return Err(anyhow!(
                "subgraph {} at {} did not answer `_service {{ sdl }}` within {:?}: {error:#}",
                sg.name,
                sg.url,
                backoff.deadline
            ));
        }
        tracing::info!(
            "waiting for subgraph {} ({error:#}); retrying in {wait:?}",
            sg.name
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(backoff.max);
    }
}

/// Read the SDL of every subgraph and compose them: the supergraph SDL.
pub async fn compose(subgraphs: &[Subgraph], backoff: &Backoff) -> anyhow::Result<String> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    let mut sdls = Vec::with_capacity(subgraphs.len());
    for sg in subgraphs {
        sdls.push(fetch_sdl(&http, sg, backoff).await?);
    }
    Ok(crate::supergraph::compose::compose(subgraphs, &sdls)?)
}

/// Get the supergraph, build the planner, and build the app.
pub async fn build_app(config: &GatewayConfig) -> anyhow::Result<Arc<App>> {
    // Settings that cancel one another are refused before any subgraph is asked.
    if let Some(settings) = &config.cache {
        settings.check().map_err(|e| anyhow!(e))?;
    }
    let (sdl, overrides) = match &config.graph {
        GraphSource::Compose(subgraphs) => (compose(subgraphs, &config.startup).await?, &[][..]),
        GraphSource::Supergraph { sdl, overrides, .. } => (sdl.clone(), &overrides[..]),
    };
    let (mut model, hive) = Supergraph::from_sdl(&sdl)?;
    model.override_urls(overrides).map_err(|e| anyhow!(e))?;
    let supergraph = Arc::new(model);
    if let Some(settings) = &config.cache {
        crate::caching::check_policy_against(&settings.policies, &supergraph)
            .map_err(|e| anyhow!(e))?;
    }
    let subgraphs = &supergraph.subgraphs;
    let planner = Arc::new(Planner::new(
        hive,
        supergraph.clone(),
        // Answers carry their entities' references for the resolver cache, for a
        // response strategy's stored answers, and for `Surrogate-Key`.
        config.cache.is_some()
            || config.surrogate_keys
            || config.edge_purge.is_some()
            || config
                .request_strategy
                .as_ref()
                .is_some_and(RequestStrategy::stores),
    ));
    let metrics = Arc::new(Metrics::new(subgraphs.iter().map(|s| s.name.clone())));
    let upstream = Arc::new(Upstream::new(
        subgraphs,
        &config.upstream,
        // No subgraph answer is read past what one response may hold.
        config
            .max_upstream_body_bytes
            .min(config.documents.max_answer_bytes),
        config.shards,
        metrics.clone(),
    )?);
    metrics.add_source(&upstream, Upstream::prometheus);
    let cache = match config.cache.clone() {
        Some(settings) => Some(Arc::new(
            ResolverCache::new(settings).map_err(|e| anyhow::anyhow!(e))?,
        )),
        None => None,
    };
    if let Some(cache) = &cache {
        metrics.add_source(cache, ResolverCache::prometheus);
    }
    // The headers policies key by: they can change an answer, so they are part of a
    // request strategy's key and of every answer's `Vary`.
    let policies = config.cache.as_ref().map(|c| &c.policies.policy);
    let mut keyed_headers: Vec<String> = policies
        .into_iter()
        .flat_map(|p| p.values())
        .flat_map(|rule| rule.key.headers.iter().map(|h| h.to_ascii_lowercase()))
        .collect();
    keyed_headers.sort();
    keyed_headers.dedup();
    let vary = match keyed_headers.is_empty() {
        true => None,
        false => Some(
            axum::http::HeaderValue::from_str(&keyed_headers.join(", "))
                .context("a header a policy keys by")?,
        ),
    };
    let requests = match &config.request_strategy {
        Some(strategy) => {
            let requests = RequestCache::new(
                strategy.clone(),
                config.cache.as_ref().map(|c| c.ttl),
                keyed_headers.clone(),
                config.invalidation,
            )
            .map_err(|e| anyhow!(e))?;
            let requests = Arc::new(requests);
            metrics.add_source(&requests, RequestCache::prometheus);
            Some(requests)
        }
        None => None,
    };
    let documents = Arc::new(DocumentCache::new(config.doc_cache_bytes));
    metrics.add_source(&documents, DocumentCache::prometheus);
    let validator = Arc::new(
        Validator::new(&supergraph, &config.documents).context("building the public schema")?,
    );
    let executor = Executor {
        upstream,
        cache,
        validator: validator.clone(),
        supergraph: supergraph.clone(),
        max_answer_bytes: config.documents.max_answer_bytes,
    };
    // APQ registrations are shared through the cache's Redis, when it has one.
    let fleet = match &config.cache {
        Some(c) if c.storage != StorageKind::Memory => match &c.redis {
            Some(r) => Some(r.store().map_err(|e| anyhow!(e))?),
            None => None,
        },
        _ => None,
    };
    let persisted = Arc::new(PersistedDocuments::new(&config.persisted, fleet));
    metrics.add_source(&persisted, PersistedDocuments::prometheus);
    if let Some(edge) = &config.edge_purge {
        metrics.add_source(edge, EdgePurge::prometheus);
    }
    let turns = Arc::new(Turns::new(config.requests.max_executing));
    metrics.add_source(&turns, Turns::prometheus);
    Ok(Arc::new(App {
        supergraph,
        planner,
        validator,
        executor,
        requests,
        metrics,
        limits: config.requests.clone(),
        profiling: config.profiling,
        documents,
        document_limits: config.documents.clone(),
        turns,
        persisted,
        vary,
        surrogate_keys: config.surrogate_keys,
        edge: config.edge_purge.clone(),
    }))
}
