//! A Redis store's configuration: where its Redis is (one server or a cluster's
//! seeds), its key prefix, auto-pipelining and its limits, the command timeout and
//! the circuit breaker; [`RedisStorageBuilder::build`] makes the connection (lazily)
//! and starts the batcher.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterConfig;

use super::batcher::{Batcher, BatcherLimits};
use super::connection::Connection;
use super::stats::Counts;
use super::{
    Core, RedisFault, RedisInner, RedisStorage, DEFAULT_BATCHES_IN_FLIGHT,
    DEFAULT_BREAKER_COOLDOWN, DEFAULT_BREAKER_THRESHOLD, DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_MAX_BATCH, DEFAULT_PREFIX, DEFAULT_QUEUE_CAPACITY,
};
use crate::breaker::{Breaker, BreakerSettings};
use crate::error::StorageError;

/// Where a store's Redis is.
#[derive(Clone, Debug)]
enum Target {
    /// One server: `redis://host:port[/db]`.
    Single(String),
    /// A Redis Cluster, reached through these seed nodes.
    Cluster(Vec<String>),
}

/// Configures a [`RedisStorage`].
#[derive(Clone, Debug)]
pub struct RedisStorageBuilder {
    target: Target,
    prefix: String,
    auto_pipeline: bool,
    batcher: BatcherLimits,
    timeout: Duration,
    breaker_threshold: u32,
    breaker_cooldown: Duration,
}

impl RedisStorageBuilder {
    /// The prefix of every key this store writes (default `gcl:`). Stores
    /// with the same prefix on one Redis share entries.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Whether concurrent `get`s are batched into one `MGET` (default on).
    /// Off, each `get` is its own `GET` round trip (still on the one
    /// multiplexed connection).
    pub fn auto_pipeline(mut self, on: bool) -> Self {
        self.auto_pipeline = on;
        self
    }

    /// The most keys one auto-pipelined `MGET` carries (default 512).
    pub fn max_batch(mut self, keys: usize) -> Self {
        self.batcher.max_batch = keys.max(1);
        self
    }

    /// The most gets waiting for the batcher (default 4096); a get that finds the
    /// queue full is refused at once (a miss for the cache) and counted.
    pub fn queue_capacity(mut self, gets: usize) -> Self {
        self.batcher.queue = gets.max(1);
        self
    }

    /// The most auto-pipelined `MGET`s in flight at once (default 32); past it the
    /// batcher waits and the queue fills.
    pub fn batches_in_flight(mut self, batches: usize) -> Self {
        self.batcher.in_flight = batches.max(1);
        self
    }

    /// The timeout of one round trip (default 250 ms).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Open the breaker after `threshold` consecutive failures (default 5;
    /// at least 1), for `cooldown` (default 1 s).
    pub fn breaker(mut self, threshold: u32, cooldown: Duration) -> Self {
        self.breaker_threshold = threshold.max(1);
        self.breaker_cooldown = cooldown;
        self
    }

    /// The store. Must run inside a tokio runtime (the batcher is a task);
    /// fails only on a malformed URL (or an empty seed list) or without a
    /// runtime. It does not connect: the first call does, and a Redis (or a
    /// cluster) that is down is a failing store, not an error here.
    pub fn build(self) -> Result<RedisStorage, StorageError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| StorageError::backend(RedisFault::NoRuntime))?;
        let connect_timeout = self.timeout.max(Duration::from_secs(1));
        let (conn, clients) = match &self.target {
            Target::Single(url) => {
                let client = redis::Client::open(url.as_str()).map_err(StorageError::backend)?;
                let config = ConnectionManagerConfig::new()
                    // One attempt per (re)connection: the breaker paces the retries.
                    .set_number_of_retries(0)
                    .set_min_delay(Duration::from_millis(50))
                    .set_max_delay(Duration::from_secs(1))
                    .set_connection_timeout(Some(connect_timeout));
                let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)
                    .map_err(StorageError::backend)?;
                (Connection::Single(conn), vec![client])
            }
            Target::Cluster(seeds) => {
                if seeds.is_empty() {
                    return Err(StorageError::backend(RedisFault::NoSeeds));
                }
                let clients = seeds
                    .iter()
                    .map(|url| redis::Client::open(url.as_str()))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(StorageError::backend)?;
                let cluster =
                    redis::cluster::ClusterClient::builder(seeds.iter().map(String::as_str))
                        .build()
                        .map_err(StorageError::backend)?;
                let config = ClusterConfig::new()
                    .set_connection_timeout(connect_timeout)
                    .set_response_timeout(self.timeout);
                // Connects in the background; the first command waits for it.
                let conn = cluster.get_pending_async_connection_with_config(config);
                (Connection::Cluster(conn), clients)
            }
        };
        let core = Arc::new(Core {
            conn,
            entry_prefix: format!("{}e:", self.prefix),
            ref_prefix: format!("{}r:", self.prefix),
            prefix: self.prefix,
            timeout: self.timeout,
            breaker: Breaker::new(BreakerSettings {
                consecutive_failures: self.breaker_threshold,
                error_ratio: None,
                open_for: self.breaker_cooldown,
                probes: 1,
            }),
            counts: Counts::default(),
        });
        let batcher = self
            .auto_pipeline
            .then(|| Batcher::start(Arc::clone(&core), &runtime, self.batcher));
        Ok(RedisStorage {
            inner: Arc::new(RedisInner {
                core,
                clients,
                batcher,
                gc_cursor: Mutex::new(0),
            }),
        })
    }
}

impl RedisStorage {
    /// Configures a store for the one Redis at `url` (`redis://127.0.0.1:6379`).
    pub fn builder(url: impl Into<String>) -> RedisStorageBuilder {
        Self::builder_for(Target::Single(url.into()))
    }

    /// Configures a store for the Redis Cluster that these seed nodes belong to
    /// (`redis://127.0.0.1:7000`, ...): the client learns the other nodes and the slot
    /// map from them. See the module docs for the layout on a cluster.
    pub fn cluster_builder<S: Into<String>>(
        seeds: impl IntoIterator<Item = S>,
    ) -> RedisStorageBuilder {
        Self::builder_for(Target::Cluster(seeds.into_iter().map(Into::into).collect()))
    }

    fn builder_for(target: Target) -> RedisStorageBuilder {
        RedisStorageBuilder {
            target,
            prefix: DEFAULT_PREFIX.to_owned(),
            auto_pipeline: true,
            batcher: BatcherLimits {
                max_batch: DEFAULT_MAX_BATCH,
                queue: DEFAULT_QUEUE_CAPACITY,
                in_flight: DEFAULT_BATCHES_IN_FLIGHT,
            },
            timeout: DEFAULT_COMMAND_TIMEOUT,
            breaker_threshold: DEFAULT_BREAKER_THRESHOLD,
            breaker_cooldown: DEFAULT_BREAKER_COOLDOWN,
        }
    }
}
