//! Garbage collection of reference sets: members whose entry expired, was replaced or
//! evicted.
//!
//! A cluster forbids a command or a script to touch keys of two slots, and a set and the
//! entries it names sit in different slots (see the module docs of `redis`), so GC is a
//! few exchanges of one-slot groups instead of one script. For each chunk of sets:
//! 1. `SMEMBERS` of each set;
//! 2. `EXISTS` of each member's entry;
//! 3. `SREM` of the members whose entry is gone, from their sets;
//! 4. `PTTL` of those entries again;
//! 5. any that exists now (stored again between 2 and 3) goes back into its sets with
//!    `SADD` and the set's ttl (`PEXPIRE … NX`, `… GT`, as a write does).
//!
//! Why a member is never lost from a set while its entry lives: a write stores the entry
//! before it adds the entry to its sets (one pipeline in that order on one server, two
//! stages on a cluster). If a write's `SADD` came before step 3 removed the member, its
//! `SET` came before that too, so step 4 sees the entry and step 5 puts the member back.
//! If the `SADD` came after step 3, nothing was removed. The cost is five round trips per
//! chunk of sets where the former Lua script took one, on a job that runs in the
//! background or from `gateway redis-gc`.

use std::collections::HashSet;

use redis::{FromRedisValue, Value};

use super::connection::Group;
use super::invalidation::take_out;
use super::{add_to_set, glob_escape, Core, RedisStorage, MAX_TTL_MILLIS, SCAN_COUNT};
use crate::error::StorageError;
use crate::storage::StorageResult;

/// Which garbage collection [`RedisStorage::gc`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcMode {
    /// One `SCAN` step of about `chunk` keys, from the cursor the store kept
    /// from the previous lazy call (a pass ends when the returned cursor is
    /// 0, and the next call starts a new one).
    Lazy {
        /// The `COUNT` hint of the `SCAN` step.
        chunk: usize,
    },
    /// A full pass over every reference set.
    Strict,
}

/// What one [`RedisStorage::gc`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Reference sets examined.
    pub scanned_sets: u64,
    /// Members of those sets examined.
    pub scanned_members: u64,
    /// Members removed because their entry is gone.
    pub removed_members: u64,
    /// Sets that lost every member (Redis deletes an empty set).
    pub removed_sets: u64,
    /// The `SCAN` cursor after the call: 0 when a pass is complete.
    pub cursor: u64,
}

impl RedisStorage {
    /// Makes the next lazy [`gc`](Self::gc) start at `cursor` (a cursor an
    /// earlier [`GcReport`] returned, perhaps in another process: `gateway
    /// redis-gc --cursor N` continues a pass this way).
    pub fn resume_gc_at(&self, cursor: u64) {
        *self.inner.gc_cursor.lock() = cursor;
    }

    /// Removes reference-set members whose entry is gone (expired, deleted,
    /// evicted), and so the sets left empty. See [`GcMode`].
    pub async fn gc(&self, mode: GcMode) -> Result<GcReport, StorageError> {
        let core = &self.inner.core;
        let pattern = format!("{}*", glob_escape(&core.ref_prefix));
        let mut report = GcReport::default();
        match mode {
            GcMode::Lazy { chunk } => {
                let start = *self.inner.gc_cursor.lock();
                let (cursor, sets) = core.scan(start, &pattern, chunk.max(1)).await?;
                core.gc_sets(&sets, &mut report).await?;
                *self.inner.gc_cursor.lock() = cursor;
                report.cursor = cursor;
            }
            GcMode::Strict => {
                let mut cursor = 0;
                loop {
                    let (next, sets) = core.scan(cursor, &pattern, SCAN_COUNT).await?;
                    core.gc_sets(&sets, &mut report).await?;
                    cursor = next;
                    if cursor == 0 {
                        break;
                    }
                }
            }
        }
        Ok(report)
    }
}

impl Core {
    /// Collects the garbage of `sets` (see the module docs).
    async fn gc_sets(&self, sets: &[String], report: &mut GcReport) -> StorageResult<()> {
        if sets.is_empty() {
            return Ok(());
        }
        let members = self.members(sets).await?;
        let distinct: Vec<&String> = {
            let mut seen = HashSet::new();
            members
                .iter()
                .flatten()
                .filter(|m| seen.insert(*m))
                .collect()
        };
        let exists = self
            .per_entry("EXISTS", &distinct)
            .await?
            .into_iter()
            .map(|v| i64::from_redis_value(v).map(|n| n > 0))
            .collect::<Result<Vec<bool>, _>>()
            .map_err(StorageError::backend)?;
        let gone: HashSet<&String> = distinct
            .iter()
            .zip(&exists)
            .filter(|(_, exists)| !**exists)
            .map(|(member, _)| *member)
            .collect();
        let dead: Vec<Vec<String>> = members
            .iter()
            .map(|set| set.iter().filter(|m| gone.contains(m)).cloned().collect())
            .collect();
        self.exchange(vec![take_out(sets, &dead)]).await?;

        // Step 4: an entry stored again meanwhile goes back into its sets.
        let removed: Vec<&String> = gone.iter().copied().collect();
        let ttls = self
            .per_entry("PTTL", &removed)
            .await?
            .into_iter()
            .map(i64::from_redis_value)
            .collect::<Result<Vec<i64>, _>>()
            .map_err(StorageError::backend)?;
        let back: Vec<(&String, u64)> = removed
            .iter()
            .zip(ttls)
            .filter_map(|(member, ttl)| match ttl {
                -2 => None,
                -1 => Some((*member, MAX_TTL_MILLIS)),
                ttl => Some((*member, u64::try_from(ttl).unwrap_or(1).max(1))),
            })
            .collect();
        let mut restores: Vec<Group> = Vec::new();
        let mut restored = vec![0u64; sets.len()];
        if !back.is_empty() {
            for (i, (set, dead)) in sets.iter().zip(&dead).enumerate() {
                let again: Vec<(&str, u64)> = back
                    .iter()
                    .filter(|(member, _)| dead.contains(member))
                    .map(|(member, ttl)| (member.as_str(), *ttl))
                    .collect();
                if let Some(ttl) = again.iter().map(|(_, ttl)| *ttl).max() {
                    let names: Vec<&str> = again.iter().map(|(m, _)| *m).collect();
                    restores.push(add_to_set(set, &names, ttl));
                    restored[i] = names.len() as u64;
                }
            }
            self.exchange(vec![restores]).await?;
        }
        for ((set, dead), restored) in members.iter().zip(&dead).zip(restored) {
            let (total, removed) = (set.len() as u64, dead.len() as u64 - restored);
            report.scanned_sets += 1;
            report.scanned_members += total;
            report.removed_members += removed;
            if total > 0 && removed == total {
                report.removed_sets += 1;
            }
        }
        Ok(())
    }

    /// `command entry` for each member's entry key (one group each); the replies.
    async fn per_entry(&self, command: &str, members: &[&String]) -> StorageResult<Vec<Value>> {
        let groups = members
            .iter()
            .map(|member| {
                vec![redis::cmd(command)
                    .arg(format!("{}{member}", self.entry_prefix))
                    .clone()]
            })
            .collect();
        Ok(self
            .exchange(vec![groups])
            .await?
            .into_iter()
            .map(|replies| replies.into_iter().next().unwrap_or(Value::Nil))
            .collect())
    }
}
