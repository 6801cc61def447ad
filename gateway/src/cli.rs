//! The gateway's command line: its flags and subcommands (clap derives the parser and
//! the help text from the doc comments here), and [`Cli::config`], the
//! [`GatewayConfig`] the flags describe, with a clear error naming the flag when they
//! do not make one. The `gateway` binary (`src/main.rs`) parses it, starts the runtime
//! the flags ask for and runs what they name.

use std::net::SocketAddr;
use std::time::Duration;

use cache_core::storage::Eviction;
use clap::{Args, Parser, Subcommand};

use crate::caching::requests::RequestStrategy;
use crate::caching::{build_strategies, RedisSettings, RedisTarget, StorageKind};
use crate::documents::limits::LimitArgs;
use crate::documents::persisted::{PersistedSettings, TrustedDocuments};
use crate::runtime::RuntimeShape;
use crate::server::request::RequestLimits;
use crate::startup::{Backoff, GatewayConfig, GraphSource};
use crate::supergraph::Subgraph;
use crate::upstream::{SubgraphLimits, UpstreamArgs};

#[derive(Parser, Debug)]
#[command(
    about = "Federating GraphQL gateway: reads a supergraph (or composes the subgraphs' SDL) and plans queries across them",
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    pub listen: SocketAddr,
    /// Run requests on tokio's work-stealing pool of N threads instead of the shards;
    /// 1 runs the whole gateway on one thread (tokio's current-thread runtime, the same
    /// as --shards 1). docs/cpu-and-peers.md ("Worker threads") measures each setting.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub worker_threads: Option<u16>,
    /// Current-thread runtimes that serve connections, each on its own thread; each
    /// connection is served by one of them for its life, and the caches are shared.
    /// Default: one per core (the gateway's default runtime; see --worker-threads).
    #[arg(long, value_name = "N", conflicts_with = "worker_threads", value_parser = clap::value_parser!(u16).range(1..))]
    pub shards: Option<u16>,
    /// A subgraph as NAME=URL (repeat for each subgraph): the gateway reads each
    /// one's `_service { sdl }` and composes them itself.
    #[arg(
        long = "subgraph",
        value_name = "NAME=URL",
        required_unless_present = "supergraph",
        conflicts_with = "supergraph",
        value_parser = parse_subgraph
    )]
    pub subgraphs: Vec<Subgraph>,
    /// A composed supergraph SDL (Federation 2: join v0.3 to v0.5), as Apollo's or
    /// The Guild's composition writes it; subgraph URLs come from the file.
    #[arg(long, value_name = "FILE")]
    pub supergraph: Option<std::path::PathBuf>,
    /// With --supergraph: use URL for subgraph NAME instead of the file's (repeat
    /// for each).
    #[arg(long = "subgraph-url", value_name = "NAME=URL", requires = "supergraph", value_parser = parse_subgraph)]
    pub subgraph_urls: Vec<Subgraph>,
    /// Give up reading the subgraphs' SDL after this many seconds.
    #[arg(long, default_value_t = 30.0)]
    pub startup_timeout_secs: f64,
    /// Timeout of one subgraph request, in milliseconds (every subgraph's default;
    /// --subgraph-timeout sets it per subgraph).
    #[arg(long, default_value_t = 10_000)]
    pub upstream_timeout_ms: u64,
    #[command(flatten)]
    pub upstream: UpstreamArgs,
    /// Most GraphQL requests in progress at once; past it a request is answered 503 with
    /// Retry-After at once (0: no limit).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_concurrent_requests: usize,
    /// Most GraphQL requests executing at once (running their plan and writing their
    /// response); the others wait their turn in arrival order, within the request timeout
    /// (0: no limit).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_executing_requests: usize,
    /// Most client connections open at once; past it a new connection is answered 503
    /// with Retry-After and closed (0: no limit).
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub max_connections: usize,
    /// On SIGTERM or SIGINT, stop accepting and let requests in progress finish for at
    /// most this long (e.g. 5s, 500ms), then close what remains and exit 0.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_drain_timeout)]
    pub drain_timeout: Duration,
    /// Largest subgraph response body read, in bytes (a larger one is an error at the
    /// fields it was for).
    #[arg(long, default_value_t = 64 << 20)]
    pub max_upstream_body_bytes: usize,
    /// Largest accepted request body, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub max_body_bytes: usize,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Time a client has to send its request headers, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub header_read_timeout_ms: u64,
    /// Time a client has to send its request body, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub body_read_timeout_ms: u64,
    /// Time the gateway allows itself per request, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    pub request_timeout_ms: u64,
    /// Serve GET /debug/profile?seconds=N&hz=H: CPU samples as collapsed stacks (for flamegraphs).
    #[arg(long)]
    pub profiling: bool,
    /// Cache every resolver that fetches from a subgraph, keeping results this many
    /// seconds (0: keep nothing, only deduplicate concurrent identical calls).
    /// Without --ttl and --policy there is no cache layer at all.
    #[arg(long, value_name = "SECONDS")]
    pub ttl: Option<f64>,
    /// Serve entries this many seconds past their ttl while one refresh runs.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub stale: f64,
    /// TOML overrides per Type.field (ttl, stale, skip, key, references, invalidate, storage).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<std::path::PathBuf>,
    /// Where cache entries live: memory, redis (one cache shared by every gateway on
    /// that Redis or Redis Cluster) or layered (a short-lived in-process L1 over Redis).
    #[arg(long, default_value = "memory", value_parser = StorageKind::parse)]
    pub storage: StorageKind,
    /// Redis for --storage redis or layered (and policies that name them), e.g.
    /// redis://127.0.0.1:6379.
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,
    /// A Redis Cluster instead of --redis: seed nodes, comma-separated, e.g.
    /// redis://127.0.0.1:7000,redis://127.0.0.1:7001 (the client learns the rest).
    /// Entries spread over the masters by key; invalidation and pub/sub work across them.
    #[arg(long, value_name = "URL[,URL...]", value_parser = RedisTarget::parse_cluster)]
    pub redis_cluster: Option<RedisTarget>,
    /// Batch the Redis reads of one scheduling turn into one MGET (on a cluster the
    /// client splits it into one MGET per hash slot).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub redis_autopipeline: bool,
    /// Longest wait for one Redis round trip, in milliseconds; a slower one is a miss
    /// (or a write not stored), and 5 in a row open the Redis breaker for 1 s.
    #[arg(long, value_name = "MS", default_value_t = 250, value_parser = clap::value_parser!(u64).range(1..))]
    pub redis_timeout_ms: u64,
    /// Longest time the layered storage's in-process L1 keeps an entry, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    l1_ttl: f64,
    /// Most entries the layered storage's in-process L1 keeps.
    #[arg(long, default_value_t = 10_000)]
    l1_max_entries: u64,
    /// Most entries the memory store keeps.
    #[arg(long, default_value_t = 100_000)]
    pub cache_max_entries: u64,
    /// Bound of the parsed-document cache, in bytes of estimated heap (0 disables it).
    #[arg(long, default_value_t = 32 << 20)]
    pub doc_cache_bytes: u64,
    /// Trusted documents: Apollo's persisted query manifest, or a JSON map of id to
    /// document. A request names one by "documentId" or by
    /// extensions.persistedQuery.sha256Hash.
    #[arg(long, value_name = "FILE")]
    pub persisted_documents: Option<std::path::PathBuf>,
    /// Run only the trusted documents of --persisted-documents, named by id (a
    /// safelist): any text, and any other id, is refused.
    #[arg(long, requires = "persisted_documents")]
    pub require_persisted: bool,
    /// Serve `POST /invalidate` on this address, a listener of its own (the public
    /// port never serves it): drop cached entries by reference, type, namespace or all.
    #[arg(long, value_name = "ADDR")]
    pub admin_listen: Option<SocketAddr>,
    /// Name the entities an answer holds in a `Surrogate-Key` header (`Post:p1 User:u1`
    /// and their types), so that an edge cache can purge by entity.
    #[arg(long)]
    pub surrogate_keys: bool,
    /// The edge cache in front (the lab's VCL is `local-varnish/lab.vcl`):
    /// after a mutation, and on `POST /invalidate`, send it a `PURGE` naming the
    /// surrogate keys to drop.
    #[arg(long, value_name = "URL", requires = "surrogate_keys")]
    pub edge_purge: Option<String>,
    /// Bound of the automatic persisted queries' store (APQ), in bytes of text
    /// (0 turns APQ off).
    #[arg(long, value_name = "BYTES", default_value_t = 8 << 20)]
    pub apq_cache_bytes: u64,
    /// Whether a mutation drops the cached entries that refer to the entities it
    /// returned: on (the default), or off (entries live until their ttl, as in
    /// mercurius-cache without references).
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = parse_switch, action = clap::ArgAction::Set)]
    pub invalidation: bool,
    /// Log a hits/misses/dedupes table every this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub cache_report_interval: Option<f64>,
    /// A cache strategy for every cached field, as NAME[:PARAM=VALUE,...] (e.g.
    /// early-refresh:beta=2); repeat for several, which run in the order given. A
    /// policy's `strategies` replaces the list for its field. `gateway strategies`
    /// lists them with their parameters.
    #[arg(long = "strategy", value_name = "NAME[:PARAM=VALUE,...]")]
    pub strategies: Vec<String>,
    /// Which entry the memory store evicts when it is full: lru, or tinylfu (moka's
    /// default: LRU behind a frequency filter). A setting of the store, not a strategy.
    #[arg(long, value_name = "lru|tinylfu", value_parser = Eviction::parse)]
    pub cache_eviction: Option<Eviction>,
    /// A request-level strategy in front of execution, with or without --ttl:
    /// coalesce (identical in-flight requests share one execution and its bytes) or
    /// response[:ttl=SECS,max_mb=MB] (the final bytes, stored and dropped by their
    /// entities' references). `gateway strategies` describes them.
    #[arg(long, value_name = "coalesce|response[:ttl=SECS,max_mb=MB]", value_parser = RequestStrategy::parse)]
    pub request_strategy: Option<RequestStrategy>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Garbage-collect the cache's Redis reference sets (members whose entry expired)
    /// and report what was scanned and removed.
    RedisGc(RedisGcArgs),
    /// Print the cache strategies --strategy takes (name, parameters with their
    /// defaults, what each does) and the memory store's settings.
    Strategies,
    /// Read each subgraph's SDL, compose them as the gateway does for --subgraph,
    /// and print the supergraph (join spec v0.3) on standard output.
    Compose(ComposeArgs),
}

#[derive(Args, Debug)]
pub struct ComposeArgs {
    /// A subgraph as NAME=URL (repeat for each subgraph).
    #[arg(long = "subgraph", value_name = "NAME=URL", required = true, value_parser = parse_subgraph)]
    pub subgraphs: Vec<Subgraph>,
    /// Give up reading the subgraphs' SDL after this many seconds.
    #[arg(long, default_value_t = 30.0)]
    pub startup_timeout_secs: f64,
}

#[derive(Args, Debug)]
pub struct RedisGcArgs {
    /// The Redis the gateways cache in, e.g. redis://127.0.0.1:6379.
    #[arg(
        long,
        value_name = "URL",
        required_unless_present = "redis_cluster",
        conflicts_with = "redis_cluster"
    )]
    pub redis: Option<String>,
    /// The Redis Cluster the gateways cache in, as seed nodes (URL[,URL...]); a lazy
    /// pass walks the masters one after the other, and its cursor says where it is.
    #[arg(long, value_name = "URL[,URL...]", value_parser = RedisTarget::parse_cluster)]
    pub redis_cluster: Option<RedisTarget>,
    /// A full pass over every reference set, instead of one chunk (lazy mode).
    #[arg(long)]
    pub strict: bool,
    /// Lazy mode: the SCAN COUNT of the one chunk examined.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "strict")]
    pub chunk: u64,
    /// Longest wait for one Redis round trip (a chunk's checks go out as one pipeline).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub timeout: f64,
    /// Lazy mode: continue a pass from the cursor an earlier run printed.
    #[arg(long, default_value_t = 0, conflicts_with = "strict")]
    pub cursor: u64,
}

fn parse_drain_timeout(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration like 500ms or 5s ({e})"))
}

pub(crate) fn parse_switch(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("{other:?}: expected on or off")),
    }
}

fn parse_subgraph(s: &str) -> Result<Subgraph, String> {
    let (name, url) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=URL, got {s:?}"))?;
    if name.is_empty() || !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("expected NAME=http://HOST:PORT/PATH, got {s:?}"));
    }
    Ok(Subgraph {
        name: name.to_string(),
        url: url.to_string(),
    })
}

impl Cli {
    /// The runtimes the flags ask for: `--worker-threads N` (N > 1) the pool,
    /// `--worker-threads 1` or `--shards N` that many shards, else one shard per core.
    pub fn runtime_shape(&self) -> RuntimeShape {
        match (self.worker_threads, self.shards) {
            (Some(1), _) => RuntimeShape::Shards(1),
            (Some(n), _) => RuntimeShape::Pool(Some(usize::from(n))),
            (None, Some(n)) => RuntimeShape::Shards(usize::from(n)),
            (None, None) => RuntimeShape::default_for_machine(),
        }
    }

    /// The configuration the flags describe. `given` says whether a flag (by its clap
    /// id) was on the command line rather than left at its default: a flag whose
    /// subject is absent (an L1 setting without layered storage, say) is refused
    /// instead of silently ignored.
    pub fn config(&self, given: &dyn Fn(&str) -> bool) -> Result<GatewayConfig, String> {
        let startup_deadline =
            Duration::try_from_secs_f64(self.startup_timeout_secs).map_err(|_| {
                "--startup-timeout-secs must be a non-negative number of seconds".to_string()
            })?;
        let graph = match &self.supergraph {
            Some(path) => {
                let sdl = std::fs::read_to_string(path)
                    .map_err(|e| format!("--supergraph {}: {e}", path.display()))?;
                let subgraphs = crate::supergraph::join::subgraphs_of(&sdl)
                    .map_err(|e| format!("--supergraph {}: {e}", path.display()))?;
                for o in &self.subgraph_urls {
                    if !subgraphs.iter().any(|s| s.name == o.name) {
                        let known: Vec<&str> = subgraphs.iter().map(|s| s.name.as_str()).collect();
                        return Err(format!(
                            "--subgraph-url {}: {} has no subgraph named {:?} (it has: {})",
                            o.name,
                            path.display(),
                            o.name,
                            known.join(", ")
                        ));
                    }
                }
                GraphSource::Supergraph {
                    sdl,
                    subgraphs,
                    overrides: self.subgraph_urls.clone(),
                }
            }
            None => {
                let mut names: Vec<&str> = self.subgraphs.iter().map(|s| s.name.as_str()).collect();
                names.sort_unstable();
                if names.windows(2).any(|w| w[0] == w[1]) {
                    return Err("--subgraph: each subgraph name may appear once".into());
                }
                GraphSource::Compose(self.subgraphs.clone())
            }
        };
        let names: Vec<String> = graph.subgraph_names();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let seconds = |flag: &str, v: f64| {
            Duration::try_from_secs_f64(v)
                .map_err(|_| format!("{flag} must be a non-negative number of seconds"))
        };
        // The cache's flags with a default that were given: refused when their subject
        // (the cache, a storage) is absent.
        let tuning: Vec<&str> = crate::caching::TUNING_FLAGS
            .into_iter()
            .filter(|flag| given(&flag[2..].replace('-', "_")))
            .collect();
        let cache = if self.ttl.is_some() || self.policy.is_some() {
            let policies = match &self.policy {
                Some(path) => crate::caching::PolicyFile::load(path)?,
                None => Default::default(),
            };
            let mut kinds: Vec<StorageKind> = policies
                .policy
                .values()
                .filter_map(|rule| rule.storage.as_deref())
                .filter_map(|s| StorageKind::parse(s).ok())
                .collect();
            let policy_needs_redis = kinds.iter().any(|k| k.needs_redis());
            kinds.push(self.storage);
            if kinds.contains(&StorageKind::Redis) && kinds.contains(&StorageKind::Layered) {
                return Err(
                    "--storage and --policy: redis and layered cannot be mixed in one gateway (they would share Redis's keys)"
                        .into(),
                );
            }
            let target = match (&self.redis, &self.redis_cluster) {
                (Some(_), Some(_)) => {
                    return Err(
                        "--redis and --redis-cluster: give one of them (one Redis, or a cluster's seed nodes)"
                            .into(),
                    )
                }
                (Some(url), None) => {
                    if !url.starts_with("redis://") {
                        return Err(format!("--redis {url:?}: expected redis://HOST:PORT"));
                    }
                    Some(RedisTarget::Single(url.clone()))
                }
                (None, cluster) => cluster.clone(),
            };
            let redis = match target {
                Some(target) if !self.storage.needs_redis() && !policy_needs_redis => {
                    let flag = target.describe();
                    let flag = flag.split(' ').next().unwrap_or_default();
                    return Err(format!(
                        "{flag} is used only with --storage redis or layered (or a policy's storage)"
                    ));
                }
                Some(target) => Some(RedisSettings {
                    target,
                    auto_pipeline: self.redis_autopipeline,
                    l1_ttl: seconds("--l1-ttl", self.l1_ttl)?,
                    l1_max_entries: self.l1_max_entries,
                    command_timeout: Duration::from_millis(self.redis_timeout_ms),
                }),
                None if self.storage.needs_redis() => {
                    return Err(format!(
                        "--storage {}: needs --redis URL or --redis-cluster URL[,URL...]",
                        self.storage.name()
                    ))
                }
                None if policy_needs_redis => {
                    return Err(
                        "--policy: a field's storage needs Redis; give --redis URL or --redis-cluster URL[,URL...]"
                            .into(),
                    )
                }
                None => None,
            };
            crate::caching::check_flags(&tuning, Some(&kinds))?;
            let strategies = build_strategies(&self.strategies, "--strategy")?;
            let report_interval = match self.cache_report_interval {
                Some(v) if v > 0.0 => Some(seconds("--cache-report-interval", v)?),
                Some(_) => return Err("--cache-report-interval must be positive".into()),
                None => None,
            };
            let settings = crate::caching::CacheSettings {
                storage: self.storage,
                redis,
                ttl: seconds("--ttl", self.ttl.unwrap_or(0.0))?,
                stale: seconds("--stale", self.stale)?,
                max_entries: self.cache_max_entries,
                report_interval,
                policies,
                invalidation: self.invalidation,
                strategies,
                eviction: self.cache_eviction.unwrap_or_default(),
                namespace_references: self.admin_listen.is_some(),
            };
            settings.check()?;
            Some(settings)
        } else {
            if self.storage.needs_redis() || self.redis.is_some() || self.redis_cluster.is_some() {
                return Err(
                    "--storage, --redis and --redis-cluster configure the cache: give --ttl or --policy too"
                        .into(),
                );
            }
            if !self.strategies.is_empty() || self.cache_eviction.is_some() {
                return Err(
                    "--strategy and --cache-eviction configure the cache: give --ttl or --policy too"
                        .into(),
                );
            }
            // --invalidation also governs a response strategy's stored answers.
            let stores = self
                .request_strategy
                .as_ref()
                .is_some_and(RequestStrategy::stores);
            let tuning: Vec<&str> = tuning
                .into_iter()
                .filter(|f| !(stores && *f == "--invalidation"))
                .collect();
            crate::caching::check_flags(&tuning, None)?;
            None
        };
        if let Some(strategy) = &self.request_strategy {
            // Refused before any subgraph is asked.
            strategy.lifetime(self.ttl.and_then(|t| Duration::try_from_secs_f64(t).ok()))?;
        }
        if let Some(bare) = self
            .upstream
            .subgraph_timeout
            .iter()
            .find(|v| !v.contains('='))
            .filter(|_| given("upstream_timeout_ms"))
        {
            return Err(format!(
                "--upstream-timeout-ms and --subgraph-timeout {bare} both set every subgraph's request timeout, and the second would silently replace the first: give one of them"
            ));
        }
        if self.upstream_timeout_ms == 0 {
            return Err("--upstream-timeout-ms must be positive".into());
        }
        let upstream = self.upstream.settings(
            &names,
            SubgraphLimits {
                request_timeout: Duration::from_millis(self.upstream_timeout_ms),
                ..SubgraphLimits::default()
            },
        )?;
        if self.max_body_bytes == 0 || self.max_upstream_body_bytes == 0 {
            return Err("--max-body-bytes and --max-upstream-body-bytes must be positive".into());
        }
        Ok(GatewayConfig {
            shards: self.runtime_shape().shards(),
            graph,
            startup: Backoff {
                deadline: startup_deadline,
                first: Duration::from_millis(50),
                max: Duration::from_secs(2),
            },
            upstream,
            max_upstream_body_bytes: self.max_upstream_body_bytes,
            requests: RequestLimits {
                max_body_bytes: self.max_body_bytes,
                body_read_timeout: Duration::from_millis(self.body_read_timeout_ms),
                header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
                request_timeout: Duration::from_millis(self.request_timeout_ms),
                max_executing: self.max_executing_requests,
            },
            documents: self.limits.limits(),
            profiling: self.profiling,
            cache,
            request_strategy: self.request_strategy.clone(),
            invalidation: self.invalidation,
            doc_cache_bytes: self.doc_cache_bytes,
            persisted: PersistedSettings {
                trusted: match &self.persisted_documents {
                    Some(path) => Some(std::sync::Arc::new(TrustedDocuments::read(path)?)),
                    None => None,
                },
                require: self.require_persisted,
                apq_bytes: self.apq_cache_bytes,
            },
            surrogate_keys: self.surrogate_keys,
            edge_purge: match &self.edge_purge {
                Some(url) => Some(std::sync::Arc::new(crate::caching::edge::EdgePurge::new(
                    url,
                )?)),
                None => None,
            },
        })
    }
}
