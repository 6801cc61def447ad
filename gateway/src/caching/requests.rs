//! Request-level strategies: what the gateway can do for a whole client request
//! before any resolver is asked (`--request-strategy`).
//!
//! - **`coalesce`**: requests with the same document, operation, variables and
//!   credentials (or none) that arrive while one of them is executing share that one
//!   execution, and every waiter gets the same bytes. Nothing is stored: once the
//!   execution answers, the next request executes again. This is what a router
//!   without a cache does for a burst of identical queries (Hive Router's and Apollo
//!   Router's inbound deduplication).
//! - **`response`** (`response:ttl=SECS,max_mb=MB`): the final response bytes are
//!   stored under the same key for `ttl` (default: `--ttl`), in an in-process store
//!   bounded by `max_mb` (default 256), and a stored answer is sent as it is: no
//!   plan is run, no resolver is asked, the bytes are not copied. Misses coalesce as
//!   above. An entry carries the references (`Type:key`) of every entity in the
//!   subgraph answers it was written from, so a mutation that returns one of those
//!   entities drops it before the mutation's response is sent (`--invalidation off`
//!   keeps it to its TTL). A request that carries `authorization` skips the response
//!   store and only coalesces with requests carrying the same credentials (counted
//!   under the namespace `response-per-caller`): no answer is ever served to another
//!   caller.
//!
//! Either sits in front of the resolver cache ([`super::ResolverCache`]), which may be
//! on or off: the matrix can then compare coalescing, response, entity and resolver
//! caching on one graph. Mutations are never coalesced or stored.
//!
//! Errors are never stored: an answer with GraphQL errors goes to the requests that
//! were waiting for it, as the resolver cache does with a piece with errors. A
//! leader that goes away (its client disconnected, its timeout passed) leaves its
//! followers to cache-core, which hands the execution to one of them.
//!
//! The counters are cache-core's, in `/metrics` as `gateway_request_cache_*_total`
//! with the strategy's name as the namespace label, and the response store's
//! `gateway_request_cache_entries` and `gateway_request_cache_bytes`.

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cache_core::storage::MemoryStorage;
use cache_core::{Cache, CacheError, CacheKey, Fetched, KeyParts, Namespace, Policy};

use crate::response::http_cache::Keepable;
use crate::server::request::RequestInput;

/// Which request-level strategy runs, as `--request-strategy` names it.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestStrategy {
    Coalesce,
    Response {
        ttl: Option<Duration>,
        max_bytes: u64,
    },
}

/// The default bound of the response store.
const DEFAULT_MAX_MB: u64 = 256;

impl RequestStrategy {
    /// Parses `coalesce`, `response` or `response:ttl=SECS,max_mb=MB`.
    pub fn parse(spec: &str) -> Result<RequestStrategy, String> {
        let flag = "--request-strategy";
        let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
        let params: Vec<(&str, &str)> = params
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                p.split_once('=')
                    .ok_or_else(|| format!("{flag} {spec:?}: parameter {p:?} is not NAME=VALUE"))
            })
            .collect::<Result<_, _>>()?;
        match name {
            "coalesce" => match params.first() {
                None => Ok(RequestStrategy::Coalesce),
                Some((p, _)) => Err(format!(
                    "{flag} {spec:?}: coalesce takes no parameters (got {p:?})"
                )),
            },
            "response" => {
                let mut ttl = None;
                let mut max_bytes = DEFAULT_MAX_MB << 20;
                for (p, v) in params {
                    match p {
                        "ttl" => {
                            let secs: f64 = v.parse().map_err(|_| {
                                format!("{flag} {spec:?}: ttl={v:?} is not a number of seconds")
                            })?;
                            let ttl_value = Duration::try_from_secs_f64(secs)
                                .ok()
                                .filter(|d| !d.is_zero())
                                .ok_or_else(|| {
                                    format!("{flag} {spec:?}: ttl must be positive seconds (for no store at all, use coalesce)")
                                })?;
                            ttl = Some(ttl_value);
                        }
                        "max_mb" => {
                            let mb: u64 = v.parse().ok().filter(|&m| m > 0).ok_or_else(|| {
                                format!("{flag} {spec:?}: max_mb={v:?} is not a positive whole number")
                            })?;
                            max_bytes = mb << 20;
                        }
                        other => {
                            return Err(format!(
                                "{flag} {spec:?}: response has no parameter {other:?} (it takes ttl and max_mb)"
                            ))
                        }
                    }
                }
                Ok(RequestStrategy::Response { ttl, max_bytes })
            }
            other => Err(format!(
                "{flag} {other:?}: there is no request strategy of that name; use coalesce or response[:ttl=SECS,max_mb=MB]"
            )),
        }
    }

    /// Whether it stores answers (the response strategy) rather than only sharing
    /// executions in flight.
    pub fn stores(&self) -> bool {
        matches!(self, RequestStrategy::Response { .. })
    }

    /// How long a stored answer lives: the strategy's own `ttl`, else `fallback`
    /// (`--ttl`) when positive; `None` for coalescing. An error naming the flag when a
    /// response strategy has neither.
    pub fn lifetime(&self, fallback: Option<Duration>) -> Result<Option<Duration>, String> {
        match self {
            RequestStrategy::Coalesce => Ok(None),
            RequestStrategy::Response { ttl, .. } => ttl
                .or(fallback.filter(|t| !t.is_zero()))
                .map(Some)
                .ok_or_else(|| {
                    "--request-strategy response: give its ttl (response:ttl=SECS) or a positive --ttl"
                        .into()
                }),
        }
    }

    /// Its name, the namespace its counters are labelled with.
    pub fn name(&self) -> &'static str {
        match self {
            RequestStrategy::Coalesce => "coalesce",
            RequestStrategy::Response { .. } => "response",
        }
    }

    /// The catalogue's lines (`gateway strategies`).
    pub fn catalogue() -> &'static str {
        "request-level strategies (--request-strategy NAME[:PARAM=VALUE,...]; one of them):\n  \
         coalesce                     identical in-flight client requests (document, operation, variables, credentials) share one execution and its bytes; nothing is stored\n  \
         response  ttl (--ttl), max_mb (256)  the final response bytes, stored for ttl and invalidated by the references of every entity in them; misses coalesce; requests with credentials skip the store\n"
    }
}

/// One executed request's answer, as every waiter sends it.
#[derive(Debug, Clone)]
pub struct Answer {
    pub body: Bytes,
    /// It carries GraphQL errors (then it is never stored).
    pub failed: bool,
    /// It has an `extensions` member already.
    pub extended: bool,
    /// What HTTP caches may keep of it, and its validator.
    pub keepable: Keepable,
}

/// What an execution hands the strategy: the answer, and the references of the
/// entities it was written from.
pub struct Produced {
    pub answer: Answer,
    pub references: Vec<String>,
    /// Some of it was answered from an entry served in place of a failed fetch
    /// (`stale-if-error`): shared with the requests waiting for it, never stored.
    pub stale: bool,
}

/// An answer with errors, as cache-core carries it to the waiters without storing it.
#[derive(Debug)]
struct WithErrors(Answer);

impl std::fmt::Display for WithErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the response carries GraphQL errors")
    }
}

impl std::error::Error for WithErrors {}

/// The running strategy.
pub struct RequestCache {
    strategy: RequestStrategy,
    cache: Cache<Answer>,
    namespace: Namespace<Answer>,
    /// Where the calls that must not be stored coalesce (the response strategy's
    /// requests with credentials; the coalesce strategy's are all such).
    passing: Namespace<Answer>,
    memory: MemoryStorage<Answer>,
    /// The store's bound in bytes (`max_mb`): an answer larger than it is never stored.
    max_bytes: u64,
    /// Headers the resolver policies key by: they can change an answer, so they are
    /// part of a request's key.
    keyed_headers: Vec<String>,
    invalidation: bool,
    /// How long a stored answer is kept (the response strategy's TTL).
    kept_for: Option<Duration>,
}

impl RequestCache {
    /// `ttl` fills in a `response` strategy given without one (`--ttl`); the error
    /// names the flag when neither is there.
    pub fn new(
        strategy: RequestStrategy,
        ttl: Option<Duration>,
        keyed_headers: Vec<String>,
        invalidation: bool,
    ) -> Result<RequestCache, String> {
        let kept_for = strategy.lifetime(ttl)?;
        let policy = match kept_for {
            Some(ttl) => Policy::new().ttl(ttl),
            None => Policy::new(),
        };
        let max_bytes = match &strategy {
            RequestStrategy::Response { max_bytes, .. } => *max_bytes,
            RequestStrategy::Coalesce => DEFAULT_MAX_MB << 20,
        };
        let memory = MemoryStorage::builder()
            .max_bytes(max_bytes, |a: &Answer| {
                u32::try_from(a.body.len()).unwrap_or(u32::MAX)
            })
            .build();
        let cache = Cache::builder().storage(memory.clone()).build();
        let namespace = cache.namespace_with(strategy.name(), policy);
        let passing = match strategy {
            RequestStrategy::Coalesce => namespace.clone(),
            RequestStrategy::Response { .. } => {
                cache.namespace_with("response-per-caller", Policy::new())
            }
        };
        Ok(RequestCache {
            strategy,
            cache,
            namespace,
            passing,
            memory,
            max_bytes,
            keyed_headers,
            invalidation,
            kept_for,
        })
    }

    pub fn strategy(&self) -> &RequestStrategy {
        &self.strategy
    }

    /// Whether executions must hand over their answers' references: the response
    /// strategy keeps them with each stored answer, and drops answers by them after a
    /// mutation.
    pub fn stores_references(&self) -> bool {
        self.strategy.stores() && self.invalidation
    }

    /// Whether a request with these inputs may be answered from the store (the
    /// response strategy, and no credentials).
    fn stores_for(&self, input: &RequestInput) -> bool {
        self.strategy.stores() && input.authorization.is_none()
    }

    /// The request's key: its document text, operation name, variables as sent, and
    /// the headers that can change its answer (`authorization`, and those policies key
    /// by), byte for byte (`callers.rs`).
    pub fn key(&self, text: &str, operation: Option<&str>, input: &RequestInput) -> CacheKey {
        let mut callers = String::new();
        let headers =
            std::iter::once("authorization").chain(self.keyed_headers.iter().map(String::as_str));
        for name in headers {
            callers.push('\u{0}');
            super::callers::push_header(&mut callers, input.headers.get(name));
        }
        let operation = operation.unwrap_or("");
        self.namespace.key(
            &KeyParts::new()
                .selection(&text)
                .args(&input.variables)
                .parent(&(callers + "\u{1}" + operation)),
        )
    }

    /// A stored answer for `key`, when the store has it fresh (counted as a hit).
    pub fn hit_now(&self, key: CacheKey, input: &RequestInput) -> Option<Answer> {
        if !self.stores_for(input) {
            return None;
        }
        self.cache.hit_now(key, &self.namespace, || {
            || async {
                Err::<Answer, WithErrors>(WithErrors(Answer {
                    body: Bytes::new(),
                    failed: true,
                    extended: false,
                    keepable: Keepable::never(),
                }))
            }
        })
    }

    /// The answer for the request under `key`: stored, shared with the execution in
    /// flight for the same key, or produced now by `execute` (and stored when the
    /// strategy stores, it has no errors, nothing in it was served stale and it fits the
    /// store).
    pub async fn answer<F, Fut>(
        &self,
        key: CacheKey,
        input: &RequestInput,
        execute: F,
    ) -> Result<Answer, String>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Produced> + Send + 'static,
    {
        let keep = self.stores_for(input);
        let max_bytes = self.max_bytes;
        let kept_for = self.kept_for;
        let fetch = move || async move {
            let mut produced = execute().await;
            if produced.answer.failed {
                return Err(WithErrors(produced.answer));
            }
            // "Keep nothing" for an answer written during an outage (once the subgraph
            // is back, the next request gets a fresh one), and for one larger than the
            // whole store (it would be kept only until the store's next maintenance).
            let unkept = produced.stale || produced.answer.body.len() as u64 > max_bytes;
            if let (true, false, Some(ttl)) = (keep, unkept, kept_for) {
                // A stored answer is kept no longer than its entry: HTTP caches are told
                // the time left of the two.
                let keepable = &mut produced.answer.keepable;
                keepable.freshness = keepable.freshness.bounded_by(Instant::now() + ttl);
            }
            let fetched = Fetched::new(produced.answer);
            let fetched = if keep {
                fetched.references(produced.references)
            } else {
                fetched
            };
            Ok::<_, WithErrors>(if unkept {
                fetched.ttl(Duration::ZERO).stale(Duration::ZERO)
            } else {
                fetched
            })
        };
        // Coalescing only, or a caller's own request: shared with the waiters of
        // this moment, never kept.
        let namespace = if keep { &self.namespace } else { &self.passing };
        let result = self.cache.get_or_fetch(key, namespace, fetch).await;
        match result {
            Ok(answer) => Ok(answer),
            Err(CacheError::Fetch(error)) => match error.downcast_ref::<WithErrors>() {
                Some(WithErrors(answer)) => Ok(answer.clone()),
                None => Err(error.to_string()),
            },
            Err(other) => Err(other.to_string()),
        }
    }

    /// After a mutation whose subgraph answers name the entities `references`: drop
    /// every stored answer written from one of them.
    pub async fn after_mutation(&self, references: Vec<String>) {
        if !self.invalidation || references.is_empty() || !self.strategy.stores() {
            return;
        }
        if let Err(e) = self.drop_answers(Some(references)).await {
            tracing::warn!("response cache invalidation failed: {e}");
        }
    }

    /// Drop the stored answers holding a reference that matches `patterns` (every one
    /// when `None`); how many were dropped.
    pub async fn drop_answers(&self, patterns: Option<Vec<String>>) -> Result<u64, String> {
        if !self.strategy.stores() {
            return Ok(0);
        }
        let result = match patterns {
            Some(p) => self.cache.invalidate(p).await,
            None => self.cache.clear().await,
        };
        result.map_err(|e| format!("the response store: {e}"))
    }

    /// Prometheus text: the strategy's counters, and what the response store holds.
    pub fn prometheus(&self) -> String {
        let mut out = self.cache.stats().to_prometheus("gateway_request_cache");
        self.memory.run_pending_tasks();
        let label = format!("namespace=\"{}\"", self.strategy.name());
        crate::server::metrics::family(
            &mut out,
            "gauge",
            "gateway_request_cache_entries",
            "Answers the response store holds.",
            [(label.as_str(), self.memory.entry_count())],
        );
        crate::server::metrics::family(
            &mut out,
            "gauge",
            "gateway_request_cache_bytes",
            "Bytes of the answers the response store holds.",
            [(label.as_str(), self.memory.weighted_size())],
        );
        out
    }
}
