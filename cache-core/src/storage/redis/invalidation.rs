//! Removing entries: by reference (the sets that name them), by key, or all of them.
//!
//! An exact reference reads its set (`SMEMBERS`); a prefix `User:*` finds its sets with
//! `SCAN MATCH gcl:r:User:* COUNT 1000` (never `KEYS`; on a cluster, master by master).
//! Then, per 512 entries, each entry's head is read (`GETRANGE 0 274`: the namespace,
//! for the per-namespace count) and the entry `UNLINK`ed, and `SREM` takes the members
//! out of their sets (not `DEL` of the set, so a member added meanwhile by another
//! process is kept).
//!
//! Every step is a list of one-slot groups for [`Core::exchange`]: one `SMEMBERS` per
//! set, `GETRANGE` + `UNLINK` per entry, one `SREM` per set. On one server each step is
//! one pipeline; on a cluster the groups go to their own slots' masters, so a set and
//! the entries it names may live on different masters.

use std::sync::Arc;

use redis::{FromRedisValue, Value};

use super::connection::Group;
use super::{glob_escape, Core, SCAN_COUNT};
use crate::error::StorageError;
use crate::key::CacheKey;
use crate::references::ReferencePattern;
use crate::storage::codec::{envelope_head_len, envelope_namespace};
use crate::storage::{Removals, StorageResult};

/// Entries removed per pipeline.
const REMOVE_CHUNK: usize = 512;
/// Reference sets read per pipeline.
const SET_CHUNK: usize = 256;
/// The longest namespace read back from an entry's head.
const MAX_HEAD_NAMESPACE: usize = 256;
/// Where removals of an entry whose namespace could not be read are counted.
const UNKNOWN_NAMESPACE: &str = "(unknown)";

impl Core {
    /// Unlinks `entries` (full entry keys), counting each removed one under
    /// the namespace read from its head.
    pub(super) async fn remove_entries(
        &self,
        entries: &[String],
        removals: &mut Removals,
    ) -> StorageResult<()> {
        let head_end = envelope_head_len(MAX_HEAD_NAMESPACE) - 1;
        for chunk in entries.chunks(REMOVE_CHUNK) {
            let groups: Vec<Group> = chunk
                .iter()
                .map(|key| {
                    let mut head = redis::cmd("GETRANGE");
                    head.arg(key).arg(0).arg(head_end);
                    let mut unlink = redis::cmd("UNLINK");
                    unlink.arg(key);
                    vec![head, unlink]
                })
                .collect();
            let replies = self.exchange(vec![groups]).await?;
            for pair in &replies {
                let [head, Value::Int(removed)] = pair.as_slice() else {
                    continue;
                };
                if *removed > 0 {
                    let head = match head {
                        Value::BulkString(bytes) => bytes.as_slice(),
                        _ => &[],
                    };
                    let namespace = envelope_namespace(head).unwrap_or(UNKNOWN_NAMESPACE);
                    removals.record(&Arc::from(namespace));
                }
            }
        }
        Ok(())
    }

    /// Removes every entry named by a set that `patterns` match; returns what was
    /// removed, per namespace and by key.
    pub(super) async fn invalidate(
        &self,
        patterns: &[ReferencePattern],
    ) -> StorageResult<(Removals, Vec<CacheKey>)> {
        let mut sets = Vec::new();
        for pattern in patterns {
            match pattern {
                ReferencePattern::Exact(reference) => sets.push(self.ref_key(reference.as_str())),
                ReferencePattern::Prefix(prefix) => {
                    let glob = format!("{}{}*", glob_escape(&self.ref_prefix), glob_escape(prefix));
                    let mut cursor = 0;
                    loop {
                        let (next, found) = self.scan(cursor, &glob, SCAN_COUNT).await?;
                        sets.extend(found);
                        cursor = next;
                        if cursor == 0 {
                            break;
                        }
                    }
                }
            }
        }
        sets.sort_unstable();
        sets.dedup();
        let mut removals = Removals::new();
        let mut removed_keys = Vec::new();
        for chunk in sets.chunks(SET_CHUNK) {
            let members = self.members(chunk).await?;
            let mut keys: Vec<CacheKey> = members
                .iter()
                .flatten()
                .filter_map(|member| CacheKey::from_hex(member))
                .collect();
            keys.sort_unstable();
            keys.dedup();
            let entries: Vec<String> = keys.iter().map(|k| self.entry_key(*k)).collect();
            self.remove_entries(&entries, &mut removals).await?;
            removed_keys.extend(keys);
            self.exchange(vec![take_out(chunk, &members)]).await?;
        }
        Ok((removals, removed_keys))
    }

    /// The members of each of `sets` (`SMEMBERS`, one group per set).
    pub(super) async fn members(&self, sets: &[String]) -> StorageResult<Vec<Vec<String>>> {
        let groups = sets
            .iter()
            .map(|set| vec![redis::cmd("SMEMBERS").arg(set).clone()])
            .collect();
        self.exchange(vec![groups])
            .await?
            .into_iter()
            .map(|replies| {
                let reply = replies.into_iter().next().unwrap_or(Value::Nil);
                Vec::<String>::from_redis_value(reply).map_err(StorageError::backend)
            })
            .collect()
    }

    /// `SCAN MATCH <prefix>*` and the same removal for every key found: entries
    /// counted, other keys (reference sets) unlinked.
    pub(super) async fn clear(&self) -> StorageResult<Removals> {
        let pattern = format!("{}*", glob_escape(&self.prefix));
        let mut removals = Removals::new();
        let mut cursor = 0;
        loop {
            let (next, keys) = self.scan(cursor, &pattern, SCAN_COUNT).await?;
            let (entries, others): (Vec<String>, Vec<String>) = keys
                .into_iter()
                .partition(|k| k.starts_with(&self.entry_prefix));
            self.remove_entries(&entries, &mut removals).await?;
            let unlinks = others
                .iter()
                .map(|key| vec![redis::cmd("UNLINK").arg(key).clone()])
                .collect();
            self.exchange(vec![unlinks]).await?;
            cursor = next;
            if cursor == 0 {
                return Ok(removals);
            }
        }
    }
}

/// `SREM set members…` for each set with members (one group per set).
pub(super) fn take_out(sets: &[String], members: &[Vec<String>]) -> Vec<Group> {
    sets.iter()
        .zip(members)
        .filter(|(_, members)| !members.is_empty())
        .map(|(set, members)| vec![redis::cmd("SREM").arg(set).arg(members).clone()])
        .collect()
}
