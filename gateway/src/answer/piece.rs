//! A piece of a subgraph's answer: the value of one root field or of one entity, in
//! the tape of the response it came in, with the errors that concern it.
//!
//! Pieces are what the resolver cache keeps and what the response writer reads. A
//! piece shares its response's [`Tape`] (a root field's value) or owns a copy of its
//! part of it (an entity out of a batch, so a cached entity does not keep the whole
//! batch alive). Its errors' paths are relative to the value: an empty path means
//! the value itself failed.
//!
//! A piece also carries what the subgraph said about its freshness (its answer's
//! `Cache-Control`, read by the `origin-ttl` strategy), and, when the cache served it
//! in place of a failed fetch (`stale-if-error`), how long it had been stale: the
//! response says so in its `extensions`. With it, when its answer arrived and how
//! long the resolver cache keeps it: the answer's `Cache-Control` is made of these
//! ([`crate::response::http_cache`]).
//!
//! And it carries its **origin**: the [`Plan::origin`](crate::plan::Plan::origin) of
//! the operation that fetched it (0 when unknown: read back from Redis), so that a
//! cache hit can tell an entry another operation stored.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cache_core::CacheDirectives;

use crate::answer::tape::{JsonError, Tape, Value};
use crate::upstream::UpstreamError;

#[derive(Debug, Clone)]
pub struct Piece {
    tape: Arc<Tape>,
    /// The value's index in the tape; `None` for null or absent.
    node: Option<u32>,
    /// Its errors; `None` when it has none (most pieces: no allocation for them).
    errors: Option<Arc<[UpstreamError]>>,
    /// The `Cache-Control` directives of the subgraph answer it came in.
    pub cache_control: Option<CacheDirectives>,
    /// Served in place of a failed fetch, this long after it stopped being fresh.
    pub served_stale: Option<Duration>,
    /// The operation that fetched it; 0 when unknown.
    pub origin: u64,
    /// When its subgraph's answer arrived; `None` when unknown (read back from Redis).
    pub fetched_at: Option<Instant>,
    /// How long the gateway's resolver cache keeps it (its namespace's TTL), when it
    /// came through that cache.
    pub kept_for: Option<Duration>,
    /// Its cache key holds a request header (a policy keys its namespace by one).
    pub per_caller: bool,
}

impl Piece {
    pub fn new(tape: Arc<Tape>, node: Option<u32>, errors: Vec<UpstreamError>) -> Piece {
        let node = node.filter(|&n| !tape.at(n).is_null());
        Piece {
            tape,
            node,
            errors: (!errors.is_empty()).then(|| errors.into()),
            cache_control: None,
            served_stale: None,
            origin: 0,
            fetched_at: None,
            kept_for: None,
            per_caller: false,
        }
    }

    /// The same piece, fetched by the operation whose plan's origin is `origin`.
    pub fn with_origin(mut self, origin: u64) -> Piece {
        self.origin = origin;
        self
    }

    /// The same piece, with the directives of the answer it came in and when that
    /// answer arrived.
    pub fn with_cache_control(
        mut self,
        directives: Option<CacheDirectives>,
        received: Instant,
    ) -> Piece {
        self.cache_control = directives;
        self.fetched_at = Some(received);
        self
    }

    /// The same piece, marked as served in place of a failed fetch, `stale_for` past
    /// its freshness.
    pub fn served_stale(&self, stale_for: Duration) -> Piece {
        Piece {
            served_stale: Some(stale_for),
            ..self.clone()
        }
    }

    /// A piece read back from its JSON text (from Redis); it has no errors.
    pub fn from_json(bytes: Bytes) -> Result<Piece, JsonError> {
        let tape = Arc::new(Tape::parse(bytes)?);
        Ok(Piece::new(tape, Some(0), Vec::new()))
    }

    /// The errors that concern it, their paths relative to its value.
    pub fn errors(&self) -> &[UpstreamError] {
        self.errors.as_deref().unwrap_or_default()
    }

    /// The value, `None` when null.
    pub fn value(&self) -> Option<Value<'_>> {
        self.node.map(|n| self.tape.at(n))
    }

    /// The value's JSON text (`null` when null).
    pub fn json(&self) -> &[u8] {
        self.value().map_or(b"null", |v| v.raw())
    }

    pub fn tape(&self) -> &Arc<Tape> {
        &self.tape
    }

    /// Heap bytes it keeps alive (its tape may be shared with others).
    pub fn heap_size(&self) -> usize {
        self.tape.heap_size() + self.errors().len() * 64
    }
}
