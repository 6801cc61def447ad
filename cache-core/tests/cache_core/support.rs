//! Helpers shared by the behaviour tests: a release valve for fetches, a
//! fetch counter and a bounded wait.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cache_core::{Cache, CacheError, CacheKey, Namespace, StatsSnapshot};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Holds fetches until the test opens it.
#[derive(Clone)]
pub struct Valve {
    tx: Arc<watch::Sender<bool>>,
    rx: watch::Receiver<bool>,
}

impl Valve {
    pub fn closed() -> Self {
        let (tx, rx) = watch::channel(false);
        Self {
            tx: Arc::new(tx),
            rx,
        }
    }

    pub fn open(&self) {
        self.tx.send_replace(true);
    }

    pub async fn wait(&self) {
        let mut rx = self.rx.clone();
        // The sender lives as long as any clone of the valve.
        let _ = rx.wait_for(|open| *open).await;
    }
}

/// Counts fetches.
#[derive(Clone, Default)]
pub struct Calls(Arc<AtomicUsize>);

impl Calls {
    pub fn bump(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Polls `condition` every millisecond for up to ten seconds; panics with
/// `what` if it never holds.
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("timed out waiting until {what}");
}

/// The counters of one namespace (all zero if it was never used).
pub fn stats_of<V: Clone + Send + Sync + 'static>(
    cache: &Cache<V>,
    namespace: &str,
) -> cache_core::NamespaceStats {
    let snapshot: StatsSnapshot = cache.stats();
    snapshot.namespace(namespace).cloned().unwrap_or_default()
}

/// Waits until `n` callers of `namespace` are registered as a miss or a
/// dedupe, i.e. all have reached the dedupe table.
pub async fn callers_registered<V: Clone + Send + Sync + 'static>(
    cache: &Cache<V>,
    namespace: &str,
    n: u64,
) {
    eventually("every caller reached the dedupe table", || {
        let stats = stats_of(cache, namespace);
        stats.misses + stats.dedupes >= n
    })
    .await;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boom(pub &'static str);

impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "boom: {}", self.0)
    }
}

impl std::error::Error for Boom {}

/// Awaits `future`, failing the test instead of hanging if it takes more
/// than ten seconds.
pub async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(10), future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// A caller of `key` spawned on the current runtime: if it leads, its fetch counts
/// itself in `calls`, waits for `valve`, and returns 7.
pub fn gated_caller(
    cache: &Cache<u32>,
    ns: &Namespace<u32>,
    key: CacheKey,
    valve: &Valve,
    calls: &Calls,
) -> JoinHandle<Result<u32, CacheError>> {
    let (cache, ns, valve, calls) = (cache.clone(), ns.clone(), valve.clone(), calls.clone());
    tokio::spawn(async move {
        cache
            .get_or_fetch(key, &ns, move || async move {
                calls.bump();
                valve.wait().await;
                Ok::<_, std::convert::Infallible>(7u32)
            })
            .await
    })
}
