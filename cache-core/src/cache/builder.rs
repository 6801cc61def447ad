//! [`CacheBuilder`]: a cache's default policy, its storage (a memory store sized by
//! entries or bytes, or one given), how long a follower waits, whether fetches are
//! detached from their leader, its strategies, and how a value served stale is
//! marked. [`CacheBuilder::build`] wires the storage's evictions into the counters.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::RwLock;

use super::{Cache, Inner, StaleMarker};
use crate::inflight::InFlight;
use crate::policy::Policy;
use crate::stats::{Counter, StatsRegistry};
use crate::storage::{EvictionCause, MemoryStorage, MemoryStorageBuilder, Storage};
use crate::strategy::{NamedStrategy, Strategy};

enum StorageChoice<V> {
    Memory(MemoryStorageBuilder<V>),
    Given(Arc<dyn Storage<V>>),
}

/// Configures a [`Cache`]. Defaults: `ttl = 0`, `stale = 0`, a memory
/// storage of 10 000 entries, no wait timeout, fetches inline, no strategy.
pub struct CacheBuilder<V> {
    policy: Policy<V>,
    storage: StorageChoice<V>,
    wait_timeout: Option<Duration>,
    detach: bool,
    stale_marker: Option<StaleMarker<V>>,
}

impl<V: Clone + Send + Sync + 'static> CacheBuilder<V> {
    /// The default ttl: how long a value is fresh. `0` keeps nothing.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.policy = self.policy.ttl(ttl);
        self
    }

    /// A default ttl computed from each value.
    pub fn ttl_fn(mut self, f: impl Fn(&V) -> Duration + Send + Sync + 'static) -> Self {
        self.policy = self.policy.ttl_fn(f);
        self
    }

    /// The default stale window: how long after the ttl a value is still
    /// served at once while one refresh runs.
    pub fn stale(mut self, stale: Duration) -> Self {
        self.policy = self.policy.stale(stale);
        self
    }

    /// A default stale window computed from each value.
    pub fn stale_fn(mut self, f: impl Fn(&V) -> Duration + Send + Sync + 'static) -> Self {
        self.policy = self.policy.stale_fn(f);
        self
    }

    /// The whole default policy at once (its strategies included: this
    /// replaces any added with [`strategy`](Self::strategy) before).
    pub fn policy(mut self, policy: Policy<V>) -> Self {
        self.policy = policy;
        self
    }

    /// Use a memory storage bounded to `max` entries. Replaces any storage
    /// given before (the last storage setting wins).
    pub fn max_entries(mut self, max: u64) -> Self {
        self.storage = StorageChoice::Memory(MemoryStorage::builder().max_entries(max));
        self
    }

    /// Use a memory storage bounded to `max` bytes as weighed by `weigher`
    /// (see [`MemoryStorageBuilder::max_bytes`]). Replaces any storage given
    /// before.
    pub fn max_bytes(
        mut self,
        max: u64,
        weigher: impl Fn(&V) -> u32 + Send + Sync + 'static,
    ) -> Self {
        self.storage = StorageChoice::Memory(MemoryStorage::builder().max_bytes(max, weigher));
        self
    }

    /// Use this storage back end. Replaces any bound set before: bound the
    /// back end itself.
    pub fn storage(mut self, storage: impl Storage<V>) -> Self {
        self.storage = StorageChoice::Given(Arc::new(storage));
        self
    }

    /// Use a storage back end already shared elsewhere.
    pub fn shared_storage(mut self, storage: Arc<dyn Storage<V>>) -> Self {
        self.storage = StorageChoice::Given(storage);
        self
    }

    /// Followers give up after waiting this long for a fetch in flight (they
    /// get [`CacheError::Timeout`](crate::CacheError::Timeout); the fetch goes
    /// on). Needs a tokio runtime with its time driver enabled.
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait_timeout = Some(timeout);
        self
    }

    /// Run each fetch in its own task, so that it completes (and fills the
    /// cache) even if every caller is dropped. Off by default: the fetch
    /// runs inline and a follower takes over if its leader goes away.
    pub fn detach_fetches(mut self, detach: bool) -> Self {
        self.detach = detach;
        self
    }

    /// Adds a strategy to the default policy (consulted in the order
    /// added), counted under its type's name.
    pub fn strategy(mut self, strategy: impl Strategy<V>) -> Self {
        self.policy = self.policy.strategy(strategy);
        self
    }

    /// Adds a named strategy to the default policy (consulted in the order
    /// added); its decisions are counted under its name.
    pub fn named_strategy(mut self, strategy: NamedStrategy<V>) -> Self {
        self.policy = self.policy.named_strategy(strategy);
        self
    }

    /// How a value served in place of a failed fetch
    /// ([`Recovery::ServeStale`](crate::strategy::Recovery::ServeStale)) is
    /// marked, given how long it had been stale: a caller that must say so to
    /// its own caller (an `extensions` note, a `Warning` header) marks the
    /// value here. Unmarked by default.
    pub fn mark_served_stale(
        mut self,
        mark: impl Fn(&V, Duration) -> V + Send + Sync + 'static,
    ) -> Self {
        self.stale_marker = Some(Arc::new(mark));
        self
    }

    /// The cache.
    pub fn build(self) -> Cache<V> {
        let storage: Arc<dyn Storage<V>> = match self.storage {
            StorageChoice::Memory(builder) => Arc::new(builder.build()),
            StorageChoice::Given(storage) => storage,
        };
        let registry = Arc::new(StatsRegistry::default());
        let observed = Arc::clone(&registry);
        storage.observe_evictions(Arc::new(move |namespace: &str, cause| {
            let counter = match cause {
                EvictionCause::Size => Counter::Evictions,
                EvictionCause::Expired => Counter::Expirations,
            };
            observed.add(namespace, counter, 1);
        }));
        let shared_reads = storage.read_in_flight();
        Cache {
            inner: Arc::new(Inner {
                storage,
                inflight: InFlight::new(),
                shared_reads,
                reads: InFlight::new(),
                registry,
                defaults: self.policy,
                stale_marker: self.stale_marker,
                wait_timeout: self.wait_timeout,
                detach: self.detach,
                gate: RwLock::new(()),
            }),
        }
    }
}

impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// Configures a cache.
    pub fn builder() -> CacheBuilder<V> {
        CacheBuilder {
            policy: Policy::new(),
            storage: StorageChoice::Memory(MemoryStorage::builder()),
            wait_timeout: None,
            detach: false,
            stale_marker: None,
        }
    }
}
