//! One fetch's request to its subgraph, and its answer split into pieces.
//!
//! A [`SubgraphRequest`] owns everything its exchange needs (the plan, the
//! request's input, the items), so the cache can run it for any subset of its
//! items, at any time: the misses of a batch, or one stale entry's background
//! refresh.
//!
//! - A root fetch is one item: its body as the plan prepared it (when it sends no
//!   variables), or its query with the variables it uses. Its piece is the answer's
//!   `data` object, with every error (paths from `data`).
//! - An entity fetch has one item per distinct representation, in its group (one
//!   aliased `_entities` field); the request carries each group's asked
//!   representations in the group's variable (an empty list for a group with none
//!   asked). Entity `j` asked of a group is item `j` of `data.<alias>`, copied into
//!   a tape of its own when a cache may keep it (so that a cached entity does not
//!   keep the whole answer alive; without a cache it is read where it is), with the
//!   errors whose path starts `<alias>, j` (made relative to it) and those that name
//!   no entity.
//! - Without a cache, an entity fetch whose answers no group rewrites is not split
//!   into pieces at all ([`SubgraphRequest::send_in_place`]): its answer comes back
//!   once, with each entity's value and errors, and execution merges them from there.
//!   A piece per entity (and a count on the tape for each) cost the deep query 3% of
//!   its instructions.
//!
//! The planner's output rewrites are applied to the answer before it is read.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;

use super::rewrites;
use crate::answer::piece::Piece;
use crate::answer::tape::{Children, Tape, Value};
use crate::plan::{EntityGroup, Fetch, FetchId, FetchKind, Plan};
use crate::server::request::RequestInput;
use crate::supergraph::Supergraph;
use crate::upstream::{
    request_body, FetchError, PathItem, SubgraphRequest as Exchange, Upstream, UpstreamError,
    UpstreamResponse,
};

/// One item of an entity fetch: its group, and where its representation is in the
/// fetch's [`SubgraphRequest::representations`].
#[derive(Debug, Clone)]
pub struct Item {
    pub group: u32,
    pub span: Range<u32>,
}

impl Item {
    /// Its representation, out of the fetch's `representations`.
    pub fn representation<'r>(&self, representations: &'r [u8]) -> &'r [u8] {
        &representations[self.span.start as usize..self.span.end as usize]
    }
}

/// A fetch's request, for some of its items.
pub struct SubgraphRequest {
    pub upstream: Arc<Upstream>,
    pub supergraph: Arc<Supergraph>,
    pub plan: Arc<Plan>,
    pub input: Arc<RequestInput>,
    pub fetch: FetchId,
    /// An entity fetch's distinct representations, one after another (empty for a
    /// root fetch): written into one buffer, so an item costs no allocation.
    pub representations: Bytes,
    /// An entity fetch's items (none for a root fetch).
    pub items: Vec<Item>,
    /// Whether a cache may keep the pieces: then each entity is copied out of the
    /// answer; otherwise it is read where it is.
    pub kept: bool,
}

impl SubgraphRequest {
    fn fetch_def(&self) -> &Fetch {
        &self.plan.fetches[self.fetch as usize]
    }

    /// Send the items at `asked` as one request; one answer per asked item, in
    /// order.
    ///
    /// The future is boxed: it holds the upstream exchange (kilobytes of state), and
    /// only a leader's fetch ever creates it, so a hit or a deduplicated follower
    /// neither carries nor copies that state through its own futures.
    pub fn send(
        self: Arc<Self>,
        asked: Vec<usize>,
    ) -> BoxFuture<'static, Vec<Result<Piece, FetchError>>> {
        Box::pin(async move {
            let fetch = self.fetch_def();
            match self.upstream.send(self.exchange(&asked)).await {
                Err(e) => asked.iter().map(|_| Err(e.clone())).collect(),
                Ok(response) => match &fetch.kind {
                    FetchKind::Root(root) => {
                        vec![Ok(self.root_piece(response, &root.output_rewrites))]
                    }
                    FetchKind::Entities(groups) => self.entity_pieces(groups, &asked, response),
                },
            }
        })
    }

    /// Whether this request's answer may be read in place, with every item asked
    /// ([`SubgraphRequest::send_in_place`]): an entity fetch whose answers no cache
    /// keeps and no group rewrites.
    pub fn in_place(&self) -> bool {
        !self.kept
            && matches!(&self.fetch_def().kind, FetchKind::Entities(groups)
                if groups.iter().all(|g| g.output_rewrites.is_empty()))
    }

    /// Send every item as one request, for a fetch that [`SubgraphRequest::in_place`]
    /// allows, and read the answer where it is: its tape once, and per item its value
    /// and errors, with no [`Piece`] (nor a count on the tape) per entity. Boxed for the
    /// reason [`SubgraphRequest::send`] is.
    pub fn send_in_place(self: Arc<Self>) -> BoxFuture<'static, Result<InPlace, FetchError>> {
        Box::pin(async move {
            // A root fetch has no items: nothing of its answer is read.
            let groups: &[EntityGroup] = match &self.fetch_def().kind {
                FetchKind::Entities(groups) => groups,
                FetchKind::Root(_) => &[],
            };
            let asked: Vec<usize> = (0..self.items.len()).collect();
            let response = self.upstream.send(self.exchange(&asked)).await?;
            let mut values = Vec::with_capacity(asked.len());
            let mut errors = Vec::new();
            for (i, (_, value, found)) in self.asked_values(groups, &asked, &response).enumerate() {
                values.push(value.map(|v| v.index()));
                if !found.is_empty() {
                    errors.push((i, found));
                }
            }
            Ok(InPlace {
                tape: response.tape,
                values,
                errors,
                cache_control: response.cache_control,
                received: response.received,
            })
        })
    }

    /// The exchange that asks for the items at `asked`.
    fn exchange(&self, asked: &[usize]) -> Exchange<'_> {
        let fetch = self.fetch_def();
        let body = match &fetch.kind {
            FetchKind::Root(_) => self.root_body(),
            FetchKind::Entities(groups) => self.entities_body(groups.len(), asked),
        };
        Exchange {
            subgraph: fetch.subgraph,
            body,
            authorization: self.input.authorization.as_ref(),
            mutation: fetch.mutation,
        }
    }

    /// Write `"name":value` for each of the fetch's variables the client sent.
    fn write_variables(&self, out: &mut Vec<u8>, mut first: bool) {
        for name in &self.fetch_def().variables {
            if let Some(value) = self.input.variable(name) {
                if !first {
                    out.push(b',');
                }
                first = false;
                let _ = serde_json::to_writer(&mut *out, name.as_str());
                out.push(b':');
                let _ = serde_json::to_writer(&mut *out, value);
            }
        }
    }

    fn root_body(&self) -> Bytes {
        let fetch = self.fetch_def();
        if !fetch.body.is_empty() {
            return fetch.body.clone();
        }
        request_body(
            &fetch.query,
            0,
            Some(&|out: &mut Vec<u8>| self.write_variables(out, true)),
        )
    }

    fn entities_body(&self, groups: usize, asked: &[usize]) -> Bytes {
        let FetchKind::Entities(defs) = &self.fetch_def().kind else {
            return Bytes::new();
        };
        let write = |out: &mut Vec<u8>| {
            for (g, def) in defs.iter().enumerate().take(groups) {
                if g > 0 {
                    out.push(b',');
                }
                let _ = serde_json::to_writer(&mut *out, &*def.variable);
                out.extend_from_slice(b":[");
                let mut n = 0;
                for &a in asked {
                    let item = &self.items[a];
                    if item.group as usize == g {
                        if n > 0 {
                            out.push(b',');
                        }
                        n += 1;
                        out.extend_from_slice(item.representation(&self.representations));
                    }
                }
                out.push(b']');
            }
            self.write_variables(out, groups == 0);
        };
        // The asked representations, a comma after each.
        let room = asked
            .iter()
            .map(|&a| self.items[a].span.len() + 1)
            .sum::<usize>()
            + defs.len() * 32;
        request_body(&self.fetch_def().query, room, Some(&write))
    }

    /// The piece of a root fetch: the answer's `data`, every error with it.
    fn root_piece(&self, response: UpstreamResponse, rewrites: &[rewrites::Rewrite]) -> Piece {
        let (tape, data) = if rewrites.is_empty() || response.data.is_none() {
            (response.tape.clone(), response.data)
        } else {
            let raw = response.tape.at(response.data.unwrap_or(0)).raw();
            let text = rewrites::apply_to_text(rewrites, raw, &self.supergraph);
            match Tape::parse(Bytes::from(text)) {
                Ok(tape) => (Arc::new(tape), Some(0)),
                Err(_) => (response.tape.clone(), response.data),
            }
        };
        Piece::new(tape, data, response.errors)
            .with_cache_control(response.cache_control, response.received)
            .with_origin(self.plan.origin)
    }

    /// Per asked item, in `asked` order: its group, its value in `response` (`None`
    /// where the answer holds null or nothing), and its errors, paths made relative
    /// to it (an error whose path names no entity goes to every one). Entity `j`
    /// asked of a group is item `j` of the group's answer list, so each list is read
    /// once, in step.
    fn asked_values<'r>(
        &'r self,
        groups: &'r [EntityGroup],
        asked: &'r [usize],
        response: &'r UpstreamResponse,
    ) -> impl Iterator<Item = (usize, Option<Value<'r>>, Vec<UpstreamError>)> + 'r {
        let data = response.data.map(|d| response.tape.at(d));
        let mut lists: Vec<Option<Children<'r>>> = groups
            .iter()
            .map(|g| data.and_then(|d| d.get(&g.alias)).map(|l| l.items()))
            .collect();
        let mut seen = vec![0usize; groups.len()];
        asked.iter().map(move |&a| {
            let g = self.items[a].group as usize;
            let j = seen[g];
            seen[g] += 1;
            let alias = &*groups[g].alias;
            let errors = relative_errors(&response.errors, |path| match path {
                [PathItem::Key(k), PathItem::Index(i), rest @ ..] if k == alias => {
                    (*i == j).then_some(rest)
                }
                [PathItem::Key(k), ..] if groups.iter().any(|g| *g.alias == **k) => None,
                _ => Some(&[][..]),
            });
            let value = lists[g]
                .as_mut()
                .and_then(Iterator::next)
                .filter(|v| !v.is_null());
            (g, value, errors)
        })
    }

    /// Each asked entity's piece, in `asked` order.
    fn entity_pieces(
        &self,
        groups: &[EntityGroup],
        asked: &[usize],
        response: UpstreamResponse,
    ) -> Vec<Result<Piece, FetchError>> {
        self.asked_values(groups, asked, &response)
            .map(|(g, value, errors)| {
                let piece = match value {
                    Some(value) if !self.kept && groups[g].output_rewrites.is_empty() => {
                        Piece::new(response.tape.clone(), Some(value.index()), errors)
                    }
                    Some(value) => {
                        let rewrites = &groups[g].output_rewrites;
                        let tape = if rewrites.is_empty() {
                            value.to_tape()
                        } else {
                            let text =
                                rewrites::apply_to_text(rewrites, value.raw(), &self.supergraph);
                            Tape::parse(Bytes::from(text)).unwrap_or_else(|_| value.to_tape())
                        };
                        Piece::new(Arc::new(tape), Some(0), errors)
                    }
                    None => Piece::new(response.tape.clone(), None, errors),
                };
                Ok(piece
                    .with_cache_control(response.cache_control, response.received)
                    .with_origin(self.plan.origin))
            })
            .collect()
    }
}

/// An entity fetch's answer read where it is ([`SubgraphRequest::send_in_place`]).
pub struct InPlace {
    /// The answer.
    pub tape: Arc<Tape>,
    /// Per item, in order: its value's tape index (`None` where the answer holds null
    /// or nothing).
    pub values: Vec<Option<u32>>,
    /// The items that have errors, in order, each with its errors (paths relative to
    /// it). Most answers have none: no list per item is made, nor dropped.
    pub errors: Vec<(usize, Vec<UpstreamError>)>,
    /// The answer's `Cache-Control` directives, and when it arrived.
    pub cache_control: Option<cache_core::CacheDirectives>,
    pub received: std::time::Instant,
}

/// The errors `belongs` accepts, with the path it returns (relative to the piece).
fn relative_errors<'e>(
    errors: &'e [UpstreamError],
    belongs: impl Fn(&'e [PathItem]) -> Option<&'e [PathItem]>,
) -> Vec<UpstreamError> {
    errors
        .iter()
        .filter_map(|e| {
            belongs(&e.path).map(|rest| UpstreamError {
                message: e.message.clone(),
                path: rest.to_vec(),
                extensions: e.extensions.clone(),
            })
        })
        .collect()
}
