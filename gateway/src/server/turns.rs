//! Turns at execution: at most `--max-executing-requests` GraphQL requests run their plan
//! and write their response at once; the others wait for a turn, in the order they came.
//!
//! Why a gateway would hold back work it could start: one request's working data (its
//! subgraph answers and their tapes, the merge table, the representations, the response
//! being written) is a few hundred kilobytes on a deep query, and each step of the plan
//! reads it again. When a hundred requests interleave on one worker thread, a request's
//! data has left the processor's caches by the time its next step runs, and every step
//! pays for reading it back. With a few requests at a time, each finishes while its
//! data is still near, and the others wait their turn at no cost. docs/deep.md
//! ("Turns at execution") measures what that saves, and what it costs in latency.
//!
//! - **A turn spans execution and writing**: the writer reads every answer once more.
//!   It is given back when dropped, so a request that fails, times out or is
//!   cancelled never keeps one.
//! - **The wait counts against the request's timeout**, and how many may wait is
//!   bounded by `--max-concurrent-requests` ([`crate::server::load`]): a queue never
//!   grows without bound and never hangs a request.
//! - **A request that shares another's execution** (identical requests coalesced, or a
//!   stored response) waits for it without a turn of its own: only the request that
//!   executes holds one, so waiters can never take every turn from the one they wait for.
//! - With no limit (0, the default) taking a turn costs nothing.
//!
//! Turns are tokio's fair semaphore: a waiting request is served before any that
//! came after it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use tokio::sync::{Semaphore, SemaphorePermit};

/// The turns at execution (`--max-executing-requests`).
#[derive(Debug, Default)]
pub struct Turns {
    /// `None`: no limit.
    semaphore: Option<Semaphore>,
    limit: usize,
    /// Requests that found every turn taken and waited.
    waited: AtomicU64,
}

/// A request's turn: held while it executes and writes, given back when dropped.
#[must_use = "a turn is given back when dropped"]
pub struct Turn<'t> {
    /// `None` when there is no limit.
    _permit: Option<SemaphorePermit<'t>>,
}

impl Turns {
    /// At most `limit` requests at once (0: no limit).
    pub fn new(limit: usize) -> Turns {
        Turns {
            semaphore: (limit > 0).then(|| Semaphore::new(limit)),
            limit,
            waited: AtomicU64::new(0),
        }
    }

    /// A turn at once, when one is free or there is no limit; `None` when the request
    /// must wait for one ([`Turns::take`]). The usual request takes this path, which
    /// builds no future.
    pub fn try_take(&self) -> Option<Turn<'_>> {
        let Some(semaphore) = &self.semaphore else {
            return Some(Turn { _permit: None });
        };
        let permit = semaphore.try_acquire().ok()?;
        Some(Turn {
            _permit: Some(permit),
        })
    }

    /// A turn: at once when one is free (or there is no limit), else when the requests
    /// that came before have had theirs.
    pub async fn take(&self) -> Turn<'_> {
        if let Some(turn) = self.try_take() {
            return turn;
        }
        self.waited.fetch_add(1, Relaxed);
        // The semaphore is never closed, so acquiring cannot fail; were it to, the
        // request would run without a turn rather than fail.
        let permit = match &self.semaphore {
            Some(semaphore) => semaphore.acquire().await.ok(),
            None => None,
        };
        Turn { _permit: permit }
    }

    /// The limit and the waits, in Prometheus' text format.
    pub fn prometheus(&self) -> String {
        format!(
            "# HELP gateway_executing_requests_limit Most requests executing at once (--max-executing-requests; 0: no limit).\n\
             # TYPE gateway_executing_requests_limit gauge\n\
             gateway_executing_requests_limit {}\n\
             # HELP gateway_execution_waits_total Requests that waited for a turn at execution.\n\
             # TYPE gateway_execution_waits_total counter\n\
             gateway_execution_waits_total {}\n",
            self.limit,
            self.waited.load(Relaxed)
        )
    }
}
