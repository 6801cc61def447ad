//! The invalidation broadcast of a layered store over Redis pub/sub: the messages
//! (the sender's id, then `clear` or the removed keys), the publishing side, and the
//! subscriber task that applies the other processes' messages to this process's L1,
//! reconnecting with backoff and clearing L1 whenever it may have missed one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use tokio::task::AbortHandle;

use super::{done, Counts};
use crate::key::CacheKey;
use crate::storage::redis::RedisStorage;
use crate::storage::{MemoryStorage, Storage};

/// Past this many removed keys, an invalidation message says "clear".
pub(super) const MAX_KEYS_PER_MESSAGE: usize = 10_000;

/// The Redis side of the broadcast.
pub(super) struct Bus {
    pub(super) redis: RedisStorage,
    channel: String,
    instance: u64,
    task: AbortHandle,
}

impl Bus {
    /// The bus of a store over `redis`, on the channel `<prefix>invalidate`; its
    /// subscriber task, started now, applies the other processes' messages to `l1`.
    pub(super) fn start<V: Clone + Send + Sync + 'static>(
        redis: &RedisStorage,
        l1: &MemoryStorage<V>,
        counts: &Arc<Counts>,
    ) -> Bus {
        let channel = format!("{}invalidate", redis.prefix());
        let instance = instance_id();
        let task = tokio::spawn(subscribe(
            redis.clone(),
            channel.clone(),
            instance,
            l1.clone(),
            Arc::clone(counts),
        ));
        Bus {
            redis: redis.clone(),
            channel,
            instance,
            task: task.abort_handle(),
        }
    }

    /// Broadcasts `message`, counted as published or as a publish error.
    pub(super) async fn publish(&self, message: Message<'_>, counts: &Counts) {
        let payload = message.encode(self.instance);
        match self.redis.publish(&self.channel, payload.as_bytes()).await {
            Ok(()) => counts.published.fetch_add(1, Ordering::Relaxed),
            Err(error) => {
                tracing::debug!(%error, "layered storage: invalidation not broadcast");
                counts.publish_errors.fetch_add(1, Ordering::Relaxed)
            }
        };
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What goes over the channel: the sender's id on the first line, then
/// `clear`, or `keys` and one 32-hex key per line.
pub(super) enum Message<'a> {
    Keys(&'a [CacheKey]),
    Clear,
}

impl Message<'_> {
    fn encode(&self, instance: u64) -> String {
        match self {
            Message::Clear => format!("{instance:016x}\nclear"),
            Message::Keys(keys) => {
                let mut out = String::with_capacity(22 + keys.len() * 33);
                out.push_str(&format!("{instance:016x}\nkeys"));
                for key in keys.iter() {
                    out.push('\n');
                    out.push_str(&key.to_string());
                }
                out
            }
        }
    }
}

/// Applies a message from another instance to `l1`. Returns whether it
/// was one (not ours, well formed).
fn apply<V: Clone + Send + Sync + 'static>(
    l1: &MemoryStorage<V>,
    instance: u64,
    payload: &[u8],
) -> bool {
    let Ok(text) = std::str::from_utf8(payload) else {
        return false;
    };
    let mut lines = text.split('\n');
    let sender = lines.next().and_then(|id| u64::from_str_radix(id, 16).ok());
    if sender.is_none() || sender == Some(instance) {
        return false;
    }
    match lines.next() {
        Some("clear") => {
            done(l1.clear());
            true
        }
        Some("keys") => {
            for key in lines.filter_map(CacheKey::from_hex) {
                done(l1.delete(key));
            }
            true
        }
        _ => false,
    }
}

/// The subscriber task: subscribe, apply messages, reconnect with backoff. Each
/// attempt takes the next of the store's pub/sub clients (one server: always its own;
/// a cluster: its masters, then the seeds), so a subscriber whose node went away
/// moves to another node.
async fn subscribe<V: Clone + Send + Sync + 'static>(
    redis: RedisStorage,
    channel: String,
    instance: u64,
    l1: MemoryStorage<V>,
    counts: Arc<Counts>,
) {
    const MIN_BACKOFF: Duration = Duration::from_millis(100);
    const MAX_BACKOFF: Duration = Duration::from_secs(5);
    let mut backoff = MIN_BACKOFF;
    let mut attempt = 0usize;
    loop {
        let clients = redis.pubsub_clients().await;
        let Some(client) = clients.get(attempt % clients.len().max(1)) else {
            tokio::time::sleep(MAX_BACKOFF).await;
            continue;
        };
        attempt = attempt.wrapping_add(1);
        let connected = tokio::time::timeout(Duration::from_secs(2), async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(pubsub)
        })
        .await;
        match connected {
            Ok(Ok(pubsub)) => {
                backoff = MIN_BACKOFF;
                // Messages sent while we were not subscribed are lost.
                counts.generation.fetch_add(1, Ordering::AcqRel);
                done(l1.clear());
                counts.subscribed.store(true, Ordering::Relaxed);
                let mut messages = pubsub.into_on_message();
                while let Some(message) = messages.next().await {
                    // Bumped before the removal: a read that fills L1 after the
                    // removal must see it (an own message bumps it harmlessly).
                    counts.generation.fetch_add(1, Ordering::AcqRel);
                    if apply(&l1, instance, message.get_payload_bytes()) {
                        counts.received.fetch_add(1, Ordering::Relaxed);
                    }
                }
                counts.subscribed.store(false, Ordering::Relaxed);
                counts.generation.fetch_add(1, Ordering::AcqRel);
                done(l1.clear());
                tracing::debug!("layered storage: invalidation subscription lost; reconnecting");
            }
            Ok(Err(error)) => {
                tracing::debug!(%error, "layered storage: cannot subscribe to invalidations");
            }
            Err(_) => tracing::debug!("layered storage: subscribing timed out"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// A per-process id for this store's messages: not secret, only distinct.
fn instance_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut seed = Vec::with_capacity(32);
    seed.extend_from_slice(&nanos.to_le_bytes());
    seed.extend_from_slice(&std::process::id().to_le_bytes());
    seed.extend_from_slice(&NEXT.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&seed)
}
