//! The version oracle: which write of each entity loadgen knows to be acknowledged, and
//! so whether a read's answer is stale.
//!
//! Every write carries a version `v<n>`, with `n` from one counter for the whole run,
//! so a version names exactly one write of one entity. Writes to one entity are
//! serialised by a per-entity lock held from send to answer: the subgraph then applies
//! them in version order, and "the newest acknowledged write" is well defined.
//!
//! A read of an entity sent at `t` returns version `r`. Let `a` be the newest write of
//! that entity acknowledged before `t`. The read is
//!
//! - **fresh** when there is no such write, or `r` is `a` or a later write (one in
//!   flight, or acknowledged after `t`);
//! - **stale** when `r` is older than `a` (the data as loaded counts as version 0). Its
//!   age is `t − ack(a)`; the oracle also gives how long the answer had been out of
//!   date, `t − ack(first write after r)`;
//! - a **wrong answer** when `r` is no write of this entity at all: another entity's
//!   data.
//!
//! Entities are kept per type in sharded maps (a read locks one shard briefly); an
//! entity appears at its first write.
//!
//! Version numbers come from one counter for the whole process, so the runs of one
//! `loadgen matrix` (every configuration and round, against subgraphs that may live
//! through them all: someone else's) never reuse one; the counter starts from the
//! clock (1000 numbers a second, wrapping every 5.5 hours, so that a number written as
//! `100·n` still fits a GraphQL `Int`), so that a later process does not reuse the
//! numbers an earlier one left in long-lived subgraphs either. A version below the
//! run's first is a write of an earlier run: to this run it is the data as it found
//! it (version 0).

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// Shards per entity type: enough that writers and readers on a few threads rarely meet.
const SHARDS: usize = 64;
/// An acknowledgement time not yet known.
const NOT_ACKED: u64 = u64::MAX;
/// The next version any write of this process carries.
static NEXT_VERSION: std::sync::LazyLock<AtomicU64> = std::sync::LazyLock::new(|| {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    AtomicU64::new(1 + (seconds % VERSION_CLOCK_WRAP) * VERSIONS_PER_SECOND)
});
/// The counter's start moves this many numbers a second ...
const VERSIONS_PER_SECOND: u64 = 1000;
/// ... and wraps after this many seconds: every version stays under 2·10⁷, so `100·n`
/// fits a signed 32-bit integer.
const VERSION_CLOCK_WRAP: u64 = 20_000;

/// One write of one entity.
#[derive(Debug, Clone, Copy)]
struct WriteRecord {
    version: u64,
    /// Nanoseconds since the oracle's start; [`NOT_ACKED`] while in flight or when failed.
    acked: u64,
}

#[derive(Debug, Default)]
struct Entity {
    /// In version order (writes to one entity are serialised).
    writes: Vec<WriteRecord>,
    /// Held by the write in flight.
    gate: Arc<tokio::sync::Mutex<()>>,
}

type Shard = Mutex<HashMap<Box<str>, Entity>>;

/// What the oracle says of one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Fresh,
    Stale {
        /// Read start − acknowledgement of the newest write acknowledged before it, ns.
        age_ns: u64,
        /// Read start − acknowledgement of the first write the answer misses, ns.
        out_of_date_ns: u64,
    },
    /// The version belongs to no write of this entity.
    Foreign,
}

/// A write in flight: its version, and the lock that keeps other writes of the same
/// entity waiting until it is answered.
#[derive(Debug)]
pub struct PendingWrite {
    pub type_index: usize,
    pub id: String,
    pub version: u64,
    _gate: tokio::sync::OwnedMutexGuard<()>,
}

/// The run's knowledge of writes; shared by every connection and thread.
#[derive(Debug)]
pub struct Oracle {
    start: Instant,
    /// The first version this run's writes may carry.
    first_version: u64,
    hasher: RandomState,
    /// `types × SHARDS` shards.
    shards: Vec<Shard>,
}

impl Oracle {
    pub fn new(types: usize) -> Oracle {
        Oracle {
            start: Instant::now(),
            first_version: NEXT_VERSION.load(Ordering::Relaxed),
            hasher: RandomState::new(),
            shards: (0..types.max(1) * SHARDS)
                .map(|_| Mutex::default())
                .collect(),
        }
    }

    /// Nanoseconds since the oracle started.
    pub fn clock(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.start).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    fn shard(&self, type_index: usize, id: &str) -> MutexGuard<'_, HashMap<Box<str>, Entity>> {
        let slot = (self.hasher.hash_one(id) as usize) % SHARDS;
        self.shards[type_index * SHARDS + slot]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Wait until no other write of this entity is in flight, then number this one.
    pub async fn begin_write(&self, type_index: usize, id: String) -> PendingWrite {
        let gate = {
            let mut shard = self.shard(type_index, &id);
            Arc::clone(&shard.entry(id.clone().into_boxed_str()).or_default().gate)
        };
        let guard = gate.lock_owned().await;
        let version = NEXT_VERSION.fetch_add(1, Ordering::Relaxed);
        let mut shard = self.shard(type_index, &id);
        if let Some(entity) = shard.get_mut(id.as_str()) {
            entity.writes.push(WriteRecord {
                version,
                acked: NOT_ACKED,
            });
        }
        drop(shard);
        PendingWrite {
            type_index,
            id,
            version,
            _gate: guard,
        }
    }

    /// The write was answered without errors at `at`: it is acknowledged.
    pub fn acknowledge(&self, write: PendingWrite, at: Instant) {
        let at = self.clock(at);
        let mut shard = self.shard(write.type_index, &write.id);
        if let Some(w) = shard.get_mut(write.id.as_str()).and_then(|e| {
            e.writes
                .iter_mut()
                .rev()
                .find(|w| w.version == write.version)
        }) {
            w.acked = at;
        }
        // Dropping `write` opens the gate for the next write of this entity.
    }

    /// Judge a read of entity `id` that returned `version` and was sent at `sent`.
    pub fn judge(&self, type_index: usize, id: &str, version: u64, sent: u64) -> Verdict {
        // An earlier run's write: the data as this run found it.
        let version = if version < self.first_version {
            0
        } else {
            version
        };
        let shard = self.shard(type_index, id);
        let writes: &[WriteRecord] = shard.get(id).map_or(&[], |e| e.writes.as_slice());
        // The newest write acknowledged before the read was sent. Acknowledgements come
        // in version order, so it is the last acknowledged one with an earlier time.
        let newest = writes
            .iter()
            .rposition(|w| w.acked != NOT_ACKED && w.acked < sent);
        let returned = if version == 0 {
            None
        } else {
            match writes.binary_search_by_key(&version, |w| w.version) {
                Ok(i) => Some(i),
                Err(_) => return Verdict::Foreign,
            }
        };
        match newest {
            Some(a) if returned.is_none_or(|r| r < a) => {
                let first_missed = returned.map_or(0, |r| r + 1);
                // The first missed write may have failed (never acknowledged): the
                // answer has been out of date since the first acknowledged one after it.
                let since = writes[first_missed..=a]
                    .iter()
                    .find(|w| w.acked != NOT_ACKED)
                    .map_or(writes[a].acked, |w| w.acked);
                Verdict::Stale {
                    age_ns: sent - writes[a].acked,
                    out_of_date_ns: sent.saturating_sub(since),
                }
            }
            _ => Verdict::Fresh,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn reads_are_judged_against_acknowledged_writes() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let oracle = Oracle::new(2);
        let t0 = oracle.start;
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let ns = |ms: u64| ms * 1_000_000;
        // Version numbers are the process's: other tests may take some meanwhile.
        let unused = u64::MAX / 2;
        // Unwritten entities: version 0 is fresh, any other version is someone else's.
        assert_eq!(oracle.judge(0, "p1", 0, ns(1)), Verdict::Fresh);
        assert_eq!(oracle.judge(0, "p1", unused, ns(1)), Verdict::Foreign);

        let w1 = runtime.block_on(oracle.begin_write(0, "p1".into()));
        let v1 = w1.version;
        assert!(v1 >= oracle.first_version);
        // In flight: reading either version is fresh.
        assert_eq!(oracle.judge(0, "p1", 0, ns(5)), Verdict::Fresh);
        assert_eq!(oracle.judge(0, "p1", v1, ns(5)), Verdict::Fresh);
        oracle.acknowledge(w1, at(10));
        // A read sent before the acknowledgement may see the old value.
        assert_eq!(oracle.judge(0, "p1", 0, ns(9)), Verdict::Fresh);
        assert_eq!(
            oracle.judge(0, "p1", 0, ns(30)),
            Verdict::Stale {
                age_ns: ns(20),
                out_of_date_ns: ns(20)
            }
        );
        assert_eq!(oracle.judge(0, "p1", v1, ns(30)), Verdict::Fresh);
        // Another entity's version is a wrong answer, in the same type or another.
        let w2 = runtime.block_on(oracle.begin_write(0, "p2".into()));
        let v2 = w2.version;
        oracle.acknowledge(w2, at(40));
        assert_eq!(oracle.judge(0, "p1", v2, ns(50)), Verdict::Foreign);
        assert_eq!(oracle.judge(1, "p1", v1, ns(50)), Verdict::Foreign);
        // Two writes later: the age counts from the newest, "out of date" from the first missed.
        let w3 = runtime.block_on(oracle.begin_write(0, "p1".into()));
        let v3 = w3.version;
        oracle.acknowledge(w3, at(60));
        assert_eq!(
            oracle.judge(0, "p1", 0, ns(100)),
            Verdict::Stale {
                age_ns: ns(40),
                out_of_date_ns: ns(90)
            }
        );
        assert_eq!(
            oracle.judge(0, "p1", v1, ns(100)),
            Verdict::Stale {
                age_ns: ns(40),
                out_of_date_ns: ns(40)
            }
        );
        assert_eq!(oracle.judge(0, "p1", v3, ns(100)), Verdict::Fresh);
        // The next run: this run's writes are the data as it finds them.
        let next = Oracle::new(2);
        assert!(next.first_version > v3);
        assert_eq!(next.judge(0, "p1", v3, ns(1)), Verdict::Fresh);
        assert_eq!(next.judge(0, "p2", v1, ns(1)), Verdict::Fresh);
    }

    #[test]
    fn writes_to_one_entity_wait_for_each_other() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let oracle = Oracle::new(1);
        runtime.block_on(async {
            let first = oracle.begin_write(0, "u1".into()).await;
            let first_version = first.version;
            let other = oracle.begin_write(0, "u2".into()).await;
            let second = tokio::time::timeout(
                Duration::from_millis(50),
                oracle.begin_write(0, "u1".into()),
            )
            .await;
            assert!(second.is_err(), "a second write of u1 waited for the first");
            drop(other);
            oracle.acknowledge(first, Instant::now());
            let second = tokio::time::timeout(
                Duration::from_millis(500),
                oracle.begin_write(0, "u1".into()),
            )
            .await
            .expect("the gate opened");
            // The timed-out attempt never took a number.
            assert!(second.version > first_version, "{}", second.version);
        });
    }
}
