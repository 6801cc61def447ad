//! Auto-pipelining: the `get`s queued in one scheduling turn go out as one `MGET`.
//!
//! Each `get` queues its key, with a oneshot for the answer, on a bounded channel to
//! the batcher task. The batcher wakes on the first request, takes a slot among the
//! `MGET`s allowed in flight, yields once so that the other callers of the same turn
//! can queue theirs, drains the channel (at most `max_batch` keys) and sends one `MGET`
//! for the lot from a task of its own, so the next batch can go out while this one is
//! in flight (the connection is multiplexed).
//!
//! Nothing here grows without bound. When Redis is slow, the `MGET`s in flight reach
//! their limit, the batcher stops draining, the queue fills, and a `get` that finds it
//! full is refused at once ([`RedisFault::QueueFull`], counted as `queue_refused`):
//! the cache reads that as a miss, so a slow Redis costs fetches, never a growing heap
//! of waiting callers. Each `MGET` is bounded by the command timeout, so a slot is never
//! held longer than that.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::{open, Core, RedisFault};
use crate::error::StorageError;
use crate::key::CacheKey;
use crate::storage::{StorageResult, Stored};

struct GetRequest {
    key: CacheKey,
    reply: oneshot::Sender<StorageResult<Option<Stored<Bytes>>>>,
}

/// The store's handle on its batcher task. Dropping it ends the task.
pub(super) struct Batcher {
    requests: mpsc::Sender<GetRequest>,
}

/// How much a batcher may hold.
#[derive(Clone, Copy, Debug)]
pub(super) struct BatcherLimits {
    /// Most keys in one `MGET`.
    pub max_batch: usize,
    /// Most `get`s waiting to be batched.
    pub queue: usize,
    /// Most `MGET`s in flight at once.
    pub in_flight: usize,
}

impl Batcher {
    /// Spawn the batcher task on `runtime`.
    pub fn start(
        core: Arc<Core>,
        runtime: &tokio::runtime::Handle,
        limits: BatcherLimits,
    ) -> Batcher {
        let (requests, queue) = mpsc::channel(limits.queue.max(1));
        runtime.spawn(run(core, queue, limits));
        Batcher { requests }
    }

    /// Queue a read of `key` and wait for its batch's answer.
    pub async fn get(&self, core: &Core, key: CacheKey) -> StorageResult<Option<Stored<Bytes>>> {
        let (reply, answer) = oneshot::channel();
        match self.requests.try_send(GetRequest { key, reply }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                core.counts.queue_refused.fetch_add(1, Ordering::Relaxed);
                return Err(StorageError::backend(RedisFault::QueueFull));
            }
            Err(TrySendError::Closed(_)) => {
                return Err(StorageError::backend(RedisFault::BatcherStopped))
            }
        }
        answer
            .await
            .unwrap_or_else(|_| Err(StorageError::backend(RedisFault::BatcherStopped)))
    }
}

async fn run(core: Arc<Core>, mut requests: mpsc::Receiver<GetRequest>, limits: BatcherLimits) {
    let in_flight = Arc::new(Semaphore::new(limits.in_flight.max(1)));
    while let Some(first) = requests.recv().await {
        let Ok(slot) = Arc::clone(&in_flight).acquire_owned().await else {
            return;
        };
        // Let the other tasks of this turn queue their gets.
        tokio::task::yield_now().await;
        let mut batch = vec![first];
        while batch.len() < limits.max_batch {
            match requests.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        let core = Arc::clone(&core);
        tokio::spawn(async move {
            let _slot = slot;
            let keys: Vec<CacheKey> = batch.iter().map(|r| r.key).collect();
            match core.mget(keys).await {
                Ok(found) => {
                    for (request, slot) in batch.into_iter().zip(found) {
                        let _ = request.reply.send(slot.map(open).transpose());
                    }
                }
                Err(error) => {
                    for request in batch {
                        let _ = request.reply.send(Err(error.clone()));
                    }
                }
            }
        });
    }
}
