//! Removing entries: by reference (the sets that name them), by key, or all of them.
//!
//! An exact reference reads its set (`SMEMBERS`); a prefix `User:*` finds its sets with
//! `SCAN MATCH gcl:r:User:* COUNT 1000` (never `KEYS`). Then one pipeline per 512
//! entries reads each entry's head (`GETRANGE 0 274`: the namespace, for the
//! per-namespace count) and `UNLINK`s it, and `SREM` takes the members out of their
//! sets (not `DEL` of the set, so a member added meanwhile by another process is kept).

use std::sync::Arc;

use redis::Value;

use super::{glob_escape, Core, SCAN_COUNT};
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
            let mut pipe = redis::pipe();
            for key in chunk {
                pipe.cmd("GETRANGE").arg(key).arg(0).arg(head_end);
                pipe.cmd("UNLINK").arg(key);
            }
            let mut conn = self.conn.clone();
            let replies = self
                .run(2 * chunk.len() as u64, async move {
                    pipe.query_async::<Vec<Value>>(&mut conn).await
                })
                .await?;
            for pair in replies.chunks(2) {
                let [head, Value::Int(removed)] = pair else {
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
            let mut pipe = redis::pipe();
            for set in chunk {
                pipe.cmd("SMEMBERS").arg(set);
            }
            let mut conn = self.conn.clone();
            let members = self
                .run(chunk.len() as u64, async move {
                    pipe.query_async::<Vec<Vec<String>>>(&mut conn).await
                })
                .await?;
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
            let mut pipe = redis::pipe();
            let mut commands = 0;
            for (set, members) in chunk.iter().zip(&members) {
                if !members.is_empty() {
                    pipe.cmd("SREM").arg(set).arg(members).ignore();
                    commands += 1;
                }
            }
            if commands > 0 {
                let mut conn = self.conn.clone();
                self.run(
                    commands,
                    async move { pipe.query_async::<()>(&mut conn).await },
                )
                .await?;
            }
        }
        Ok((removals, removed_keys))
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
            if !others.is_empty() {
                let mut cmd = redis::cmd("UNLINK");
                cmd.arg(&others);
                let mut conn = self.conn.clone();
                self.run(1, async move { cmd.query_async::<()>(&mut conn).await })
                    .await?;
            }
            cursor = next;
            if cursor == 0 {
                return Ok(removals);
            }
        }
    }
}
