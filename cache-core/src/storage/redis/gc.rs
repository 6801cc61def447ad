//! Garbage collection of reference sets: members whose entry expired, was replaced or
//! evicted, removed by a Lua script per set so that a member re-added between the check
//! and the removal is not lost.

use super::{glob_escape, Core, RedisStorage, SCAN_COUNT};
use crate::error::StorageError;
use crate::storage::StorageResult;

/// Removes the members of one reference set whose entry is gone. `KEYS[1]`
/// is the set, `ARGV[1]` the entry-key prefix. Returns `{members, removed}`.
///
/// It reads entry keys it was not given in `KEYS`: fine on a single Redis, not on
/// Redis Cluster (which this store does not support).
const GC_SCRIPT: &str = r#"
local members = redis.call('SMEMBERS', KEYS[1])
local removed = 0
for _, member in ipairs(members) do
  if redis.call('EXISTS', ARGV[1] .. member) == 0 then
    redis.call('SREM', KEYS[1], member)
    removed = removed + 1
  end
end
return {#members, removed}
"#;

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
    /// Runs the GC script on each of `sets` in one pipeline.
    async fn gc_sets(&self, sets: &[String], report: &mut GcReport) -> StorageResult<()> {
        if sets.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for set in sets {
            pipe.cmd("EVAL")
                .arg(GC_SCRIPT)
                .arg(1)
                .arg(set)
                .arg(&self.entry_prefix);
        }
        let mut conn = self.conn.clone();
        let results = self
            .run(sets.len() as u64, async move {
                pipe.query_async::<Vec<(u64, u64)>>(&mut conn).await
            })
            .await?;
        for (members, removed) in results {
            report.scanned_sets += 1;
            report.scanned_members += members;
            report.removed_members += removed;
            if members > 0 && removed == members {
                report.removed_sets += 1;
            }
        }
        Ok(())
    }
}
