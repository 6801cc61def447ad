//! A deduplicating async cache with TTL, stale-while-revalidate,
//! references and pluggable storage: the Rust counterpart of
//! async-cache-dedupe. It knows nothing of GraphQL or HTTP.
//!
//! # Quick start
//!
//! ```
//! use std::time::Duration;
//! use cache_core::{Cache, Fetched, KeyParts};
//! use serde_json::{json, Value};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cache: Cache<Value> = Cache::builder()
//!     .ttl(Duration::from_secs(10))   // fresh for 10 s
//!     .stale(Duration::from_secs(5))  // then served stale for 5 s while one refresh runs
//!     .max_entries(10_000)            // a moka memory store of 10 000 entries
//!     .build();
//!
//! // One namespace per resolver; make it once and keep it.
//! let user = cache.namespace("Query.user");
//! let args = json!({"id": "u1"});
//! let key = user.key(&KeyParts::new().args(&args));
//!
//! let value = cache
//!     .get_or_fetch(key, &user, || async {
//!         // The real fetch goes here; concurrent callers share one run.
//!         Ok::<_, std::io::Error>(
//!             Fetched::new(json!({"id": "u1", "name": "Ada"})).references(["User:u1"]),
//!         )
//!     })
//!     .await?;
//! assert_eq!(value["name"], "Ada");
//!
//! // After a mutation: drop what refers to the user (or `"User:*"`).
//! cache.invalidate(["User:u1"]).await?;
//!
//! let stats = cache.stats();
//! assert_eq!(stats.namespace("Query.user").map(|s| s.misses), Some(1));
//! println!("{}", stats.table());
//! # Ok(())
//! # }
//! ```
//!
//! # What it does
//!
//! - [`Cache::get_or_fetch`] returns a fresh stored value at once, else
//!   joins the fetch already in flight for the key, else runs `fetch` once
//!   for every concurrent caller.
//! - `ttl = 0` (the default) keeps nothing: only overlapping callers share
//!   a fetch, for the cost of one insert and one remove in the dedupe table.
//!   A namespace with strategies still reads and writes the store at
//!   `ttl = 0`, for the strategies that keep values on their own
//!   (`origin-ttl`, `stale-if-error`; see [`strategies::check_lifetimes`]).
//! - For `stale` after the ttl, a stale value is served at once while
//!   exactly one background refresh runs. Both durations can be computed
//!   from the value ([`Policy::ttl_fn`]) or set by the fetch
//!   ([`Fetched::ttl`]).
//! - Errors are never stored; every waiter gets the error. A leader that is
//!   cancelled mid-fetch hands over to a follower (or, with
//!   [`CacheBuilder::detach_fetches`], its fetch runs on in its own task).
//!   [`CacheBuilder::wait_timeout`] lets followers give up.
//! - Values carry references; [`Cache::invalidate`] drops entries by exact
//!   reference or `Prefix:*`, [`Cache::clear`] drops everything, and a fetch
//!   that raced an invalidation of its references does not store.
//! - Storage is one async trait ([`storage::Storage`]) with batched gets,
//!   made for remote stores; [`storage::MemoryStorage`] is built on moka,
//!   [`storage::Encoded`] stores values as bytes through a [`storage::Codec`].
//! - [`storage::RedisStorage`] shares entries between processes:
//!   auto-pipelined `MGET`s, references as Redis sets, a circuit breaker
//!   and timeouts so a sick Redis only costs misses, and a GC for
//!   reference sets. [`storage::LayeredStorage`] puts a short-lived memory
//!   tier in front of it and broadcasts invalidations over pub/sub. Over
//!   such a remote store, concurrent callers of one key also share one
//!   storage read.
//! - Keys ([`CacheKey`]) are 128-bit xxh3 hashes of a canonical encoding of
//!   namespace, parent, arguments and selection; a [`KeyFunction`] can
//!   replace the derivation per namespace.
//! - Counters per namespace: [`Cache::stats`], [`Cache::report_every`],
//!   [`StatsSnapshot::to_prometheus`].
//!
//! # Per-namespace policies
//!
//! One cache serves many namespaces; each [`Namespace`] carries its own
//! [`Policy`], so different `Type.field`s get different ttls while sharing
//! one storage, one dedupe table and one invalidation path:
//!
//! ```
//! # use std::time::Duration;
//! # use cache_core::{Cache, Policy};
//! let cache: Cache<String> = Cache::builder().ttl(Duration::from_secs(30)).build();
//! let posts = cache.namespace("Query.posts");                        // 30 s
//! let me = cache.namespace_with("Query.me", Policy::new());          // dedupe only
//! let slow = cache.namespace_with(
//!     "User.avatar",
//!     Policy::new().ttl(Duration::from_secs(600)).stale(Duration::from_secs(60)),
//! );
//! # drop((posts, me, slow));
//! ```
//!
//! # Extending it with a strategy
//!
//! A [`Strategy`] hooks into a call: [`Strategy::bypass`] before the
//! lookup, [`Strategy::refresh_early`] on a fresh hit,
//! [`Strategy::admit`] before a value is stored, [`Strategy::recover`]
//! after a fetch failed (see [`strategy`] for when each runs and what it may
//! cost). A namespace's strategies are part of its [`Policy`]; add one to
//! the default policy with [`CacheBuilder::strategy`]. The crate ships
//! `second-hit`, `early-refresh`, `stale-if-error` and `origin-ttl` in
//! [`strategies`], with a registry that builds them by name
//! ([`strategies::parse_and_build`]).
//!
//! A worked example: **negative caching**. "Not found" is an error from the
//! fetch, so by default it is never stored and every lookup of a missing
//! user reaches the back end. This strategy turns that error into a `None`
//! value and keeps it, but for one second only, while found values keep
//! the policy's ttl.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//! use std::time::Duration;
//! use cache_core::{
//!     Admission, Cache, FetchError, Fetched, KeyParts, Lifetime, Recovery, Stored, Strategy,
//!     StrategyContext,
//! };
//!
//! #[derive(Debug)]
//! struct NotFound;
//! impl std::fmt::Display for NotFound {
//!     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
//!         f.write_str("not found")
//!     }
//! }
//! impl std::error::Error for NotFound {}
//!
//! /// Remembers "not found" as `None` for `ttl`.
//! struct NegativeCaching {
//!     ttl: Duration,
//! }
//!
//! impl<T: Send + Sync + 'static> Strategy<Option<T>> for NegativeCaching {
//!     fn recover(
//!         &self,
//!         _: &StrategyContext<'_>,
//!         error: &FetchError,
//!         _previous: Option<&Stored<Option<T>>>,
//!     ) -> Recovery<Option<T>> {
//!         // Only "not found" becomes a value; other errors go through.
//!         match error.downcast_ref::<NotFound>() {
//!             Some(_) => Recovery::Replace(Fetched::new(None)),
//!             None => Recovery::Fail,
//!         }
//!     }
//!
//!     fn admit(
//!         &self,
//!         _: &StrategyContext<'_>,
//!         fetched: &Fetched<Option<T>>,
//!         lifetime: &mut Lifetime,
//!     ) -> Admission {
//!         if fetched.value().is_none() {
//!             lifetime.ttl = lifetime.ttl.min(self.ttl);
//!             lifetime.stale = Duration::ZERO;
//!         }
//!         Admission::Store
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let cache: Cache<Option<Arc<str>>> = Cache::builder()
//!     .ttl(Duration::from_secs(60))
//!     .strategy(NegativeCaching { ttl: Duration::from_secs(1) })
//!     .build();
//! let user = cache.namespace("Query.user");
//! let key = user.key(&KeyParts::new().args(&"missing"));
//!
//! let lookups = Arc::new(AtomicUsize::new(0));
//! for _ in 0..3 {
//!     let lookups = Arc::clone(&lookups);
//!     let found = cache
//!         .get_or_fetch(key, &user, move || async move {
//!             lookups.fetch_add(1, Ordering::SeqCst);
//!             Err::<Option<Arc<str>>, _>(NotFound)
//!         })
//!         .await;
//!     assert!(matches!(found, Ok(None)));
//! }
//! // The back end was asked once; the next two calls were hits.
//! assert_eq!(lookups.load(Ordering::SeqCst), 1);
//! // Each decision is counted, per namespace and strategy.
//! let stats = cache.stats();
//! let ns = stats.namespace("Query.user").unwrap();
//! assert_eq!(ns.decision("NegativeCaching", "recovered"), 1);
//! assert_eq!(ns.decision("NegativeCaching", "adjusted"), 1);
//! # }
//! ```
//!
//! The guide in `docs/strategies.md` walks through writing a strategy for
//! the registry, so that the gateway's `--strategy` and its experiments can
//! name it.
//!
//! # Module map
//!
//! - `cache`: [`Cache`], [`CacheBuilder`], the call path and the race check.
//! - `inflight`: the dedupe table (leaders, followers, cancellation).
//! - [`key`]: [`CacheKey`] and its canonical encoding.
//! - [`storage`]: the trait, the moka back end, codecs, the Redis back end
//!   (`storage/redis/`: the store, its batcher, invalidation, GC and counters)
//!   and the layered memory-over-Redis store (`storage/layered.rs`).
//! - [`breaker`]: a lock-free circuit breaker for one remote backend (the Redis
//!   store's, and the gateway's per subgraph).
//! - [`references`]: references, patterns, the reference index.
//! - [`stats`]: counters per namespace and the periodic report.
//! - [`strategy`]: the extension point: the hooks and what the cache
//!   guarantees around them.
//! - [`strategies`]: the shipped strategies, one file each, and the registry
//!   that builds them by name.
//! - [`cache_control`]: an origin's `Cache-Control` directives, for
//!   strategies to read.

mod batch;
pub mod breaker;
mod cache;
pub mod cache_control;
pub mod error;
mod inflight;
pub mod key;
pub mod namespace;
pub mod policy;
pub mod references;
pub mod stats;
pub mod storage;
pub mod strategies;
pub mod strategy;

pub use batch::BatchCall;
pub use cache::{Cache, CacheBuilder};
pub use cache_control::CacheDirectives;
pub use error::{CacheError, FetchError, StorageError};
pub use key::{CacheKey, CanonicalKey, KeyBuilder, KeyFunction, KeyHasher, KeyPart, KeyParts};
pub use namespace::Namespace;
pub use policy::{Fetched, Policy, Ttl};
pub use references::{IntoPatterns, Reference, ReferencePattern};
pub use stats::{Counter, DecisionCount, NamespaceStats, ReportError, ReportTask, StatsSnapshot};
pub use storage::Stored;
pub use strategies::{EarlyRefresh, OriginTtl, SecondHitAdmission, StaleIfError, StrategySpec};
pub use strategy::{Admission, Lifetime, NamedStrategy, Recovery, Strategy, StrategyContext};
