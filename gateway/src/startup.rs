//! Start-up: read every subgraph's SDL, compose, and assemble a running gateway.
//!
//! Subgraphs often start at the same time as the gateway, so reading their SDL is
//! retried with exponential backoff until a deadline; the error then names the
//! subgraph and the last failure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};

use crate::caching::{CacheSettings, ResolverCache};
use crate::documents::DocumentCache;
use crate::execute::Executor;
use crate::metrics::Metrics;
use crate::pipeline::App;
use crate::request::RequestLimits;
use crate::supergraph::{Subgraph, Supergraph};
use crate::upstream::{Upstream, UpstreamSettings};
use crate::validation::{DocumentLimits, Validator};

/// How long and how often to retry reading a subgraph's SDL.
#[derive(Debug, Clone)]
pub struct Backoff {
    pub deadline: Duration,
    pub first: Duration,
    pub max: Duration,
}

/// Everything needed to build a gateway.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub subgraphs: Vec<Subgraph>,
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
    /// Bound of the parsed-document cache in bytes; 0 disables it.
    pub doc_cache_bytes: u64,
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

/// Read the SDL of every subgraph, compose, and build the app.
pub async fn build_app(config: &GatewayConfig) -> anyhow::Result<Arc<App>> {
    // Settings that cancel one another are refused before any subgraph is asked.
    if let Some(settings) = &config.cache {
        settings.check().map_err(|e| anyhow!(e))?;
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    let mut sdls = Vec::with_capacity(config.subgraphs.len());
    for sg in &config.subgraphs {
        sdls.push(fetch_sdl(&http, sg, &config.startup).await?);
    }
    let supergraph = Arc::new(Supergraph::compose(config.subgraphs.clone(), &sdls)?);
    if let Some(settings) = &config.cache {
        crate::caching::check_policy_against(&settings.policies, &supergraph)
            .map_err(|e| anyhow!(e))?;
    }
    let metrics = Arc::new(Metrics::new(
        config.subgraphs.iter().map(|s| s.name.clone()),
    ));
    let upstream = Arc::new(Upstream::new(
        &config.subgraphs,
        &config.upstream,
        config.max_upstream_body_bytes,
        metrics.clone(),
    )?);
    let weak = Arc::downgrade(&upstream);
    metrics.add_section(move |out| {
        if let Some(upstream) = weak.upgrade() {
            out.push_str(&upstream.prometheus());
        }
    });
    let cache = match config.cache.clone() {
        Some(settings) => Some(Arc::new(
            ResolverCache::new(settings).map_err(|e| anyhow::anyhow!(e))?,
        )),
        None => None,
    };
    if let Some(cache) = &cache {
        let cache = Arc::downgrade(cache);
        metrics.add_section(move |out| {
            if let Some(cache) = cache.upgrade() {
                out.push_str(&cache.prometheus());
            }
        });
    }
    let documents = Arc::new(DocumentCache::new(config.doc_cache_bytes));
    let weak = Arc::downgrade(&documents);
    metrics.add_section(move |out| {
        if let Some(documents) = weak.upgrade() {
            out.push_str(&documents.prometheus());
        }
    });
    let validator = Arc::new(
        Validator::new(&supergraph, &config.documents).context("building the public schema")?,
    );
    let executor = Executor {
        upstream,
        cache,
        validator: validator.clone(),
    };
    Ok(Arc::new(App {
        supergraph,
        validator,
        executor,
        metrics,
        limits: config.requests.clone(),
        profiling: config.profiling,
        documents,
        document_limits: config.documents.clone(),
    }))
}
