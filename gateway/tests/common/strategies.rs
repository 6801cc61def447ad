//! The strategy tests' rig: cache settings with strategies by spec, subgraphs with
//! faults and `Cache-Control` of the test's choosing, and the strategies' decisions
//! as `/metrics` counts them.

use gateway::answer::piece::Piece;
use subgraph_host::faults::FaultPlan;
use subgraph_host::{cli::CacheControl, Options};

use super::{cache, Lab};

/// One post, as every strategy test reads it.
pub const POST: &str = r#"{ getPost(pid: "p1") { pid title } }"#;

/// Cache settings: `ttl` seconds and these strategies (by spec).
pub fn with_strategies(ttl: f64, specs: &[&str]) -> Option<gateway::caching::CacheSettings> {
    let mut settings = cache(ttl)?;
    settings.strategies = specs
        .iter()
        .map(|s| cache_core::strategies::parse_and_build::<Piece>(s).expect(s))
        .collect();
    Some(settings)
}

/// `gateway_cache_strategy_decisions_total` for one namespace, strategy and decision.
pub fn decisions(text: &str, namespace: &str, strategy: &str, decision: &str) -> u64 {
    let series = format!(
        "gateway_cache_strategy_decisions_total{{namespace=\"{namespace}\",strategy=\"{strategy}\",decision=\"{decision}\"}}"
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// `subgraph_requests_total` of post-service.
pub async fn posts_asked(lab: &Lab) -> u64 {
    lab.subgraph_requests().await.1
}

/// A posts subgraph with these faults and `Cache-Control`.
pub fn posts(faults: FaultPlan, cache_control: CacheControl) -> axum::Router {
    subgraph_host::router_with(
        "post",
        post_service::schema().into(),
        Options {
            faults,
            cache_control,
            ..Options::default()
        },
    )
}

/// A users subgraph with this `Cache-Control`.
pub fn users(cache_control: CacheControl) -> axum::Router {
    subgraph_host::router_with(
        "user",
        user_service::schema().into(),
        Options {
            cache_control,
            ..Options::default()
        },
    )
}
