//! What one request's fetches found: the data gathered (answers and where each was
//! merged), the errors at their places in the response, and the places answered from
//! stale entries. Each fetch records its answers here, under one lock per fetch.

use std::time::Duration;

use super::data::{owned_path, Data, Node, PathStep};
use super::subgraph_request::InPlace;
use super::walks::Entity;
use crate::answer::piece::Piece;
use crate::plan::Sources;
use crate::response::http_cache::Freshness;
use crate::upstream::{FetchError, PathItem, UpstreamError};

/// An error found during execution, at its place in the response.
#[derive(Debug, Clone)]
pub struct FoundError {
    pub path: Vec<PathItem>,
    pub message: String,
    pub extensions: Option<serde_json::Value>,
    /// A fetch that failed for the object or root field at `path` (rather than a
    /// subgraph's own error): the response reports it at each field it leaves
    /// without a value.
    pub failed_fetch: bool,
}

/// What the fetches of one request found so far.
#[derive(Default)]
pub(super) struct Found {
    pub(super) data: Data,
    pub(super) errors: Vec<FoundError>,
    pub(super) stale: Vec<(Vec<PathItem>, Duration)>,
    /// What the pieces noted allow HTTP caches ([`Freshness`]).
    pub(super) freshness: Freshness,
}

impl Found {
    /// Record `piece`'s errors (paths relative to `at`) and its staleness (at each
    /// place it answers; its freshness is noted once per piece, by [`Found::note_fresh`]).
    pub(super) fn note(&mut self, piece: &Piece, at: &[PathStep<'_>]) {
        self.note_errors(piece.errors(), at);
        if let Some(stale_for) = piece.served_stale {
            self.stale.push((owned_path(at), stale_for));
        }
    }

    /// Note what `piece` allows HTTP caches (once per piece, wherever it answers).
    pub(super) fn note_fresh(&mut self, piece: &Piece) {
        let fetched_at = piece.fetched_at.filter(|_| piece.served_stale.is_none());
        self.freshness.note_parts(
            piece.cache_control,
            fetched_at,
            piece.kept_for,
            piece.per_caller,
        );
    }

    /// Record a subgraph's `errors` (paths relative to `at`).
    fn note_errors(&mut self, errors: &[UpstreamError], at: &[PathStep<'_>]) {
        for e in errors {
            let mut path = owned_path(at);
            path.extend(e.path.iter().cloned());
            self.errors.push(FoundError {
                path,
                message: e.message.clone(),
                extensions: e.extensions.clone(),
                failed_fetch: false,
            });
        }
    }

    /// Record the answer for `entity`, whose targets' places are spans of `steps`,
    /// from the fetches `by` ([`Sources::ALL`] for a cache's answer).
    pub(super) fn entity(
        &mut self,
        entity: &Entity,
        steps: &[PathStep<'_>],
        answer: Result<Piece, FetchError>,
        by: Sources,
    ) {
        match answer {
            Err(e) => {
                let message = e.to_string();
                for (_, path) in &entity.targets {
                    self.fail(owned_path(&steps[path.clone()]), message.clone());
                }
            }
            Ok(piece) => {
                self.note_fresh(&piece);
                for (_, path) in &entity.targets {
                    self.note(&piece, &steps[path.clone()]);
                }
                if let Some(value) = piece.value() {
                    let index = value.index();
                    let tape = self.data.add_tape(piece.tape(), by);
                    for (target, _) in &entity.targets {
                        self.data.merge(*target, Node { tape, index });
                    }
                }
            }
        }
    }

    /// An entity fetch's answer read in place: for each entity, in order, what
    /// [`Found::entity`] records for its piece, the answer's tape kept once.
    pub(super) fn entities_in_place(
        &mut self,
        entities: &[Entity],
        steps: &[PathStep<'_>],
        answer: Result<InPlace, FetchError>,
        by: Sources,
    ) {
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                for entity in entities {
                    self.entity(entity, steps, Err(e.clone()), by);
                }
                return;
            }
        };
        if answer.values.iter().any(Option::is_some) {
            self.freshness
                .note_answer(answer.cache_control, answer.received);
        }
        let mut tape = None;
        let mut errors = answer.errors.iter().peekable();
        for (i, (entity, value)) in entities.iter().zip(&answer.values).enumerate() {
            if let Some((_, found)) = errors.next_if(|(at, _)| *at == i) {
                for (_, path) in &entity.targets {
                    self.note_errors(found, &steps[path.clone()]);
                }
            }
            if let Some(index) = *value {
                let tape = *tape.get_or_insert_with(|| self.data.add_tape(&answer.tape, by));
                for (target, _) in &entity.targets {
                    self.data.merge(*target, Node { tape, index });
                }
            }
        }
    }

    /// Record that a fetch failed for the object or root field at `path`.
    pub(super) fn fail(&mut self, path: Vec<PathItem>, message: String) {
        self.errors.push(FoundError {
            path,
            message,
            extensions: None,
            failed_fetch: true,
        });
    }
}
