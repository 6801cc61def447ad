//! The gateway's runtimes: by default one tokio current-thread runtime per core, each
//! serving its share of the connections (the *shards*); with `--worker-threads N`,
//! tokio's work-stealing pool of N threads instead.
//!
//! **Why shards.** A request's work is short and its data is its own: a work-stealing
//! pool spends much of a small request on waking idle workers and handing tasks and
//! sockets between threads. A current-thread runtime does none of that, and on the lab's
//! two cores one such thread measured 0.6–0.9x the pool's CPU per request
//! (docs/cpu-and-peers.md, "Worker threads"), but it leaves every other core idle. One
//! current-thread runtime per core keeps the single thread's economy and uses every core.
//!
//! **What lives where.**
//! - *A connection lives on one shard for its life*: its reads and writes, the tasks
//!   of its requests, and the subgraph connections those requests use. The upstream
//!   keeps its idle connections per shard ([`current_shard`]), so a subgraph exchange
//!   never wakes another thread.
//! - *Everything else is shared by all shards*: the caches, the in-flight tables, the
//!   document cache, the breakers and the metrics, behind the same atomics and locks
//!   the pool uses. A request on one shard can wait for a fetch another shard leads.
//! - *The acceptor runs on shard 0* (the main thread). It hands each new connection to
//!   the shard with the fewest open connections (ties to the lowest), so a handful of
//!   long-lived client connections still spreads evenly, which `SO_REUSEPORT`'s hash
//!   of the four-tuple would not promise.
//! - *Background work* (a stale-while-revalidate refresh, a lingering close) runs on the
//!   shard whose request spawned it; the work started at startup (the Redis client's
//!   batcher, cache reports) on shard 0.
//!
//! With one shard this is exactly `--worker-threads 1`: the whole gateway on the main
//! thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use tokio::runtime::{Builder, Handle, Runtime};
use tokio::sync::oneshot;

/// How the gateway runs its tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeShape {
    /// This many current-thread runtimes, one per thread (at least 1).
    Shards(usize),
    /// tokio's work-stealing pool; `None`: one worker per core.
    Pool(Option<usize>),
}

impl RuntimeShape {
    /// The gateway's default: one shard per core the process may run on.
    pub fn default_for_machine() -> RuntimeShape {
        RuntimeShape::Shards(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// How many shards serve connections (1 under the pool: it is one runtime).
    pub fn shards(self) -> usize {
        match self {
            RuntimeShape::Shards(n) => n.max(1),
            RuntimeShape::Pool(_) => 1,
        }
    }

    /// As the startup line says it.
    pub fn describe(self) -> String {
        match self {
            RuntimeShape::Shards(1) => "one thread (a current-thread runtime)".to_owned(),
            RuntimeShape::Shards(n) => format!("{n} shards (a current-thread runtime each)"),
            RuntimeShape::Pool(Some(n)) => format!("a work-stealing pool of {n} threads"),
            RuntimeShape::Pool(None) => "a work-stealing pool, one thread per core".to_owned(),
        }
    }
}

thread_local! {
    static SHARD: Cell<usize> = const { Cell::new(0) };
}

/// The shard the calling thread runs (0 on the main thread, under the pool, and on
/// any thread that is not a shard's).
pub fn current_shard() -> usize {
    SHARD.with(Cell::get)
}

/// The other shards' runtimes, for the acceptor to hand connections to; empty when
/// every connection is served on the runtime that accepts it.
#[derive(Clone, Default)]
pub struct Shards {
    /// Shard 0 first; its handle is the main runtime's.
    handles: Arc<[Handle]>,
    /// Open connections per shard.
    open: Arc<[AtomicUsize]>,
}

/// A connection's place on a shard, held for the connection's life.
pub struct Seat {
    open: Arc<[AtomicUsize]>,
    shard: usize,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.open[self.shard].fetch_sub(1, Relaxed);
    }
}

impl Shards {
    /// Whether every connection is served where it was accepted.
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// The shard with the fewest open connections (the lowest index among equals), its
    /// runtime, and a seat on it; `None` when there are no shards.
    pub fn place(&self) -> Option<(&Handle, Seat)> {
        let shard = (0..self.open.len()).min_by_key(|&i| self.open[i].load(Relaxed))?;
        self.open[shard].fetch_add(1, Relaxed);
        let seat = Seat {
            open: self.open.clone(),
            shard,
        };
        Some((&self.handles[shard], seat))
    }

    /// Open connections per shard, shard 0 first.
    pub fn open(&self) -> Vec<usize> {
        self.open.iter().map(|n| n.load(Relaxed)).collect()
    }
}

/// The running runtimes: the main one (this thread's), and under shards one thread
/// per further shard, each running its own current-thread runtime until dropped.
pub struct Runtimes {
    main: Runtime,
    shards: Shards,
    others: Vec<(oneshot::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Runtimes {
    /// Start the runtimes `shape` names.
    pub fn start(shape: RuntimeShape) -> std::io::Result<Runtimes> {
        match shape {
            RuntimeShape::Pool(threads) => {
                let mut pool = Builder::new_multi_thread();
                if let Some(n) = threads {
                    pool.worker_threads(n.max(1));
                }
                Ok(Runtimes {
                    main: pool.enable_all().build()?,
                    shards: Shards::default(),
                    others: Vec::new(),
                })
            }
            RuntimeShape::Shards(n) => {
                let main = Builder::new_current_thread().enable_all().build()?;
                let mut handles = vec![main.handle().clone()];
                let mut others = Vec::new();
                for shard in 1..n.max(1) {
                    let runtime = Builder::new_current_thread().enable_all().build()?;
                    handles.push(runtime.handle().clone());
                    let (stop, stopped) = oneshot::channel::<()>();
                    let thread = std::thread::Builder::new()
                        .name(format!("gateway-shard-{shard}"))
                        .spawn(move || {
                            SHARD.with(|s| s.set(shard));
                            runtime.block_on(async {
                                let _ = stopped.await;
                            });
                        })?;
                    others.push((stop, thread));
                }
                let shards = if handles.len() > 1 {
                    Shards {
                        open: handles.iter().map(|_| AtomicUsize::new(0)).collect(),
                        handles: handles.into(),
                    }
                } else {
                    Shards::default()
                };
                Ok(Runtimes {
                    main,
                    shards,
                    others,
                })
            }
        }
    }

    /// The shards to serve connections on (empty under the pool or with one shard).
    pub fn shards(&self) -> Shards {
        self.shards.clone()
    }

    /// Run `future` to completion on the main runtime (shard 0).
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.main.block_on(future)
    }
}

impl Drop for Runtimes {
    fn drop(&mut self) {
        for (stop, thread) in self.others.drain(..) {
            let _ = stop.send(());
            let _ = thread.join();
        }
    }
}
