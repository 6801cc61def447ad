//! The response data one request has gathered: every subgraph answer as it came,
//! and where each answer was merged.
//!
//! Nothing is copied into a tree. Each answer stays in its [`Tape`]; the request's
//! data is the list of root objects (each root fetch's `data`) and, per object, the
//! entity answers merged into it. One object of the response is therefore a *view*:
//! the answer objects that stand at its place, in the order they arrived (an object
//! a root fetch returned, then each entity answer for it, and, for nested objects,
//! the values every one of those has under the same key). Reading a field reads it
//! from each object of the view: a scalar from the first that has it, objects and
//! lists merged again, element by element, which is the deep merge the federation
//! spec asks for, done lazily.
//!
//! Entity answers are attached to a view's first object, which stays first however
//! many answers join later (they are appended), so a later walk of the same path
//! finds them. What was merged into an object is found through its tape's table of
//! slots, one per node (made on the first merge into that tape), not through a hash
//! map: a view is built thousands of times per deep request, and each build looks up
//! every object of it. Both the walks that build entity representations ([`Data::targets`],
//! [`Data::representation`]) and the response writer ([`crate::response`]) read
//! the data this way.
//!
//! Each tape also carries the fetch its answers came from, so a look-up reads only
//! the answers whose request named the key it looks for ([`Sources`]): fewer reads,
//! and never a key a subgraph was not asked for.

use std::borrow::Cow;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::answer::tape::{Children, Kind, Tape, Value};
use crate::plan::{FetchId, MemberHint, RootSources, Sources};
use crate::supergraph::Supergraph;
use crate::upstream::PathItem;

mod nodes;
mod representation;
mod walk;

pub use nodes::{Node, Nodes, NodesIter};
pub use walk::Target;

/// Index of a tape in [`Data`].
pub type TapeId = u32;

/// The items of a merged list ([`Data::elements`]).
pub struct Elements<'d> {
    data: &'d Data,
    lists: &'d Nodes,
    /// A list that stands alone: its tape, and its items still to come.
    alone: Option<(TapeId, Children<'d>)>,
    /// A merged list: the next index, and its length (its first answer's).
    next: usize,
    len: usize,
}

impl Iterator for Elements<'_> {
    type Item = Nodes;

    fn next(&mut self) -> Option<Nodes> {
        if let Some((tape, items)) = &mut self.alone {
            let item = items.next()?;
            return Some(if item.is_null() {
                Nodes::default()
            } else {
                Nodes::one(Node {
                    tape: *tape,
                    index: item.index(),
                })
            });
        }
        if self.next >= self.len {
            return None;
        }
        self.next += 1;
        Some(self.data.element(self.lists, self.next - 1))
    }
}

/// A member of a view's first answer: its position among the members, and its
/// tape index.
#[derive(Debug, Clone, Copy)]
pub struct Place {
    ordinal: u32,
    index: u32,
}

/// One step of a place in the response, its keys borrowed from the plan.
#[derive(Debug, Clone, Copy)]
pub enum PathStep<'p> {
    Key(&'p str),
    Index(usize),
}

/// A place in the response as errors carry it.
pub fn owned_path(path: &[PathStep<'_>]) -> Vec<PathItem> {
    path.iter()
        .map(|s| match s {
            PathStep::Key(k) => PathItem::Key(k.to_string()),
            PathStep::Index(i) => PathItem::Index(*i),
        })
        .collect()
}

/// Everything one request's fetches found.
#[derive(Default)]
pub struct Data {
    tapes: Vec<Arc<Tape>>,
    /// Per tape, what is known of its answers (one list: one allocation).
    facts: Vec<TapeFacts>,
    /// Each root fetch's `data` object, with the fetch it answers.
    roots: SmallVec<[(FetchId, Node); 4]>,
    /// Per object merged into, the entity answers merged into it, in order (found
    /// by the object's slot in its tape's [`TapeFacts::slots`]).
    merged: Vec<Nodes>,
    /// How many times anything was added (see [`Data::changes`]).
    changes: u64,
}

/// What is known of one tape's answers.
#[derive(Debug, Clone)]
struct TapeFacts {
    /// The fetches its answers came from ([`Sources`]): a look-up skips the answers
    /// that cannot hold the key it looks for.
    answered_by: Sources,
    /// Per node of the tape, 0 when nothing was merged into it, else 1 + the index
    /// in [`Data::merged`] of what was. Empty until the first merge into the tape
    /// (most tapes are never merged into); then one `u32` per node, a sixth of what
    /// the tape's own nodes take.
    slots: Vec<u32>,
}

impl Data {
    /// Room for `answers` answers (a plan's fetch count: one tape per root fetch or
    /// entity answer, so most requests never grow it) and `merges` entity answers
    /// merged into objects (what the plan's last request merged:
    /// [`crate::plan::SizeHints`]).
    pub fn with_capacity(answers: usize, merges: usize) -> Data {
        Data {
            tapes: Vec::with_capacity(answers),
            facts: Vec::with_capacity(answers),
            merged: Vec::with_capacity(merges),
            ..Data::default()
        }
    }

    /// How many objects have entity answers merged into them.
    pub fn merged_objects(&self) -> usize {
        self.merged.len()
    }

    /// How many times an answer was kept, a root added or an answer merged: two
    /// reads of the data between which it has not changed find the same.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Every answer gathered, in the order it came (the entities of one answer, read
    /// where they are, share its one tape: see [`Data::add_tape`]).
    pub fn tapes(&self) -> impl Iterator<Item = &Arc<Tape>> {
        self.tapes.iter()
    }

    /// Keep `tape`, whose answers came from the fetches `by` ([`Sources::ALL`] when
    /// that is not known for sure: a cache's answer); the same tape as the last one
    /// kept (the entities of one answer, read where they are) keeps its id.
    pub fn add_tape(&mut self, tape: &Arc<Tape>, by: Sources) -> TapeId {
        self.changes += 1;
        if let Some(last) = self.tapes.last() {
            if Arc::ptr_eq(last, tape) {
                let id = self.tapes.len() - 1;
                self.facts[id].answered_by = self.facts[id].answered_by.union(by);
                return id as TapeId;
            }
        }
        self.tapes.push(tape.clone());
        self.facts.push(TapeFacts {
            answered_by: by,
            slots: Vec::new(),
        });
        (self.tapes.len() - 1) as TapeId
    }

    /// The `data` object of the root fetch `fetch`.
    pub fn add_root(&mut self, fetch: FetchId, node: Node) {
        self.changes += 1;
        self.roots.push((fetch, node));
    }

    /// The root answers that hold the root field `key`: the one of the fetch that
    /// alone answers it ([`RootSources`]; none when that fetch has no answer), or
    /// every root answer.
    pub fn root_answers(&self, sources: &RootSources, key: &str) -> Nodes {
        let Some(fetch) = sources.get(key) else {
            return self.all_roots();
        };
        match self.roots.iter().find(|(f, _)| *f == fetch) {
            Some((_, node)) => Nodes::one(*node),
            None => Nodes::default(),
        }
    }

    /// An entity answer for the object `target`.
    pub fn merge(&mut self, target: Node, answer: Node) {
        self.changes += 1;
        let facts = &mut self.facts[target.tape as usize];
        if facts.slots.is_empty() {
            facts.slots = vec![0; self.tapes[target.tape as usize].node_count()];
        }
        let slot = &mut facts.slots[target.index as usize];
        if *slot == 0 {
            self.merged.push(Nodes::default());
            *slot = self.merged.len() as u32;
        }
        self.merged[*slot as usize - 1].push(answer);
    }

    pub fn value(&self, node: Node) -> Value<'_> {
        self.tapes[node.tape as usize].at(node.index)
    }

    /// Every root fetch's `data` object, in the order they came.
    fn all_roots(&self) -> Nodes {
        let mut nodes = Nodes::default();
        for (_, node) in &self.roots {
            nodes.push(*node);
        }
        nodes
    }

    /// The root object's view.
    pub fn root_view(&self) -> Nodes {
        self.view_of(&self.all_roots())
    }

    /// The view of the objects in `nodes` (others are left out): each, then what
    /// was merged into it, recursively.
    #[inline]
    pub fn view_of(&self, nodes: &Nodes) -> Nodes {
        if let Some(node) = nodes.only() {
            // One object in an answer nothing was merged into: itself.
            if self.merged_into(node).is_none() {
                return Nodes::one(node);
            }
        }
        self.merged_view(nodes)
    }

    /// The entity answers merged into `node`, if any.
    #[inline]
    fn merged_into(&self, node: Node) -> Option<&Nodes> {
        let facts = self.facts.get(node.tape as usize)?;
        let slot = *facts.slots.get(node.index as usize)?;
        slot.checked_sub(1).map(|i| &self.merged[i as usize])
    }

    fn merged_view(&self, nodes: &Nodes) -> Nodes {
        let mut view = Nodes::default();
        for node in nodes.iter() {
            if self.value(node).kind() == Kind::Object {
                self.expand(node, &mut view, 0);
            }
        }
        view
    }

    /// `node`, then what was merged into it, recursively (to a depth of 65). The
    /// usual merged answer has nothing merged into it in turn: it is added without
    /// a call of its own.
    fn expand(&self, node: Node, out: &mut Nodes, depth: usize) {
        out.push(node);
        if depth > 64 {
            return;
        }
        if let Some(merged) = self.merged_into(node) {
            for m in merged.iter() {
                match self.merged_into(m) {
                    Some(_) => self.expand(m, out, depth + 1),
                    None => out.push(m),
                }
            }
        }
    }

    /// Every non-null value under `key` in the objects of `view`, and whether some
    /// object had it null; `sources` are the fetches whose answers may hold `key`
    /// (the objects of other answers are not read).
    pub fn member(&self, view: &Nodes, key: &str, sources: Sources) -> (Nodes, bool) {
        let (found, null, _) = self.find_member(view, key, sources);
        (found, null)
    }

    /// [`Data::member`], and where its first value is: the answer's position in the
    /// view, and the member's in that answer. A scalar is read from the first answer
    /// that has it, and no further.
    fn find_member(
        &self,
        view: &Nodes,
        key: &str,
        sources: Sources,
    ) -> (Nodes, bool, Option<(usize, Place)>) {
        let mut found = Nodes::default();
        let mut null = false;
        let mut place = None;
        for (answer, node) in view.iter().enumerate() {
            if !sources.may_hold(self.facts[node.tape as usize].answered_by) {
                continue;
            }
            if let Some((ordinal, v)) = self.value(node).find(key) {
                if v.is_null() {
                    null = true;
                    continue;
                }
                let scalar = !matches!(v.kind(), Kind::Object | Kind::Array);
                if found.is_empty() {
                    place = Some((
                        answer,
                        Place {
                            ordinal,
                            index: v.index(),
                        },
                    ));
                }
                found.push(node.at(v.index()));
                if scalar && found.is_single() {
                    // The first answer's scalar is the value: no other is read.
                    return (found, null, place);
                }
            }
        }
        (found, null, place)
    }

    /// [`Data::member`], remembering in `hint` where its first value was (for
    /// [`Data::hinted_member`] next time), and leaving `cursor` there when the
    /// view's first answer held it.
    fn member_hinting(
        &self,
        view: &Nodes,
        key: &str,
        sources: Sources,
        hint: &MemberHint,
        cursor: &mut Option<Place>,
    ) -> (Nodes, bool) {
        let (found, null, place) = self.find_member(view, key, sources);
        hint.set(place.map(|(answer, p)| (answer, p.ordinal)));
        if let Some((0, place)) = place {
            *cursor = Some(place);
        }
        (found, null)
    }

    /// The value under `key` when it stands where `hint` remembers it (an answer of
    /// the view, and a member of it), its key is the field's and it is not null, and
    /// that answer is the one to read it from:
    /// - it is the first answer of the view whose fetches (`sources`) may hold the
    ///   key: a scalar is read from the first answer that has it. A hint is one
    ///   request's finding, and the next request's answers may come from other
    ///   fetches, so this is checked each time (`first_by`, the first answer's
    ///   fetches, is read once per object by [`Data::first_answered_by`]);
    /// - and, when `sole` (an object or a list of a view of several answers, merged
    ///   from every answer that holds it), no other answer may hold it either.
    ///
    /// Then no other answer needs reading. `cursor` is the member read before from
    /// the view's first answer; stepping on from it saves starting over.
    #[inline(always)]
    pub fn hinted_member(
        &self,
        view: &Nodes,
        key: &str,
        (sources, first_by): (Sources, Sources),
        sole: bool,
        hint: &MemberHint,
        cursor: &mut Option<Place>,
    ) -> Option<Node> {
        let (answer, ordinal) = hint.get()?;
        let node = match (answer, sole) {
            // The usual case, in a step: the first answer, for a scalar.
            (0, false) if sources.may_hold(first_by) => view.first()?,
            (0, false) => return None,
            _ => self.hinted_answer(view, answer, (sources, first_by), sole)?,
        };
        let from = match answer {
            0 => cursor.map(|c| (c.ordinal, c.index)),
            _ => None,
        };
        let v = self.value(node).named_member_at(ordinal, from, key)?;
        if answer == 0 {
            *cursor = Some(Place {
                ordinal,
                index: v.index(),
            });
        }
        Some(node.at(v.index()))
    }

    /// The answer at position `answer` of `view`, when it is the one to read a key
    /// its fetches (`sources`) name from ([`Data::hinted_member`]). Kept out of line:
    /// the first answer, the usual case, needs none of it.
    #[inline(never)]
    fn hinted_answer(
        &self,
        view: &Nodes,
        answer: usize,
        (sources, first_by): (Sources, Sources),
        sole: bool,
    ) -> Option<Node> {
        let mut held = None;
        for (i, node) in view.iter().enumerate() {
            let by = match i {
                0 => first_by,
                _ => self.facts[node.tape as usize].answered_by,
            };
            match (i == answer, sources.may_hold(by)) {
                // The remembered answer, which may hold it.
                (true, true) => {
                    held = Some(node);
                    if !sole {
                        break;
                    }
                }
                // An answer before it (or, for a merged value, any other) may hold it.
                (false, true) if held.is_none() || sole => return None,
                (true, false) => return None,
                _ => {}
            }
        }
        held
    }

    /// The values under `key` in `view`, and whether some answer had it null: read
    /// where `hint` says when it holds there ([`Data::hinted_member`], with the same
    /// arguments), else looked up in every answer that may hold it, remembering
    /// where it was for next time.
    #[inline(always)]
    pub fn member_by_hint(
        &self,
        view: &Nodes,
        key: &str,
        (sources, first_by): (Sources, Sources),
        sole: bool,
        hint: &MemberHint,
        cursor: &mut Option<Place>,
    ) -> (Nodes, bool) {
        match self.hinted_member(view, key, (sources, first_by), sole, hint, cursor) {
            Some(node) => (Nodes::one(node), false),
            None => self.member_hinting(view, key, sources, hint, cursor),
        }
    }

    /// The fetches the first answer of `view` came from.
    #[inline]
    pub fn first_answered_by(&self, view: &Nodes) -> Sources {
        view.first().map_or(Sources::ALL, |node| {
            self.facts[node.tape as usize].answered_by
        })
    }

    /// The items of a merged list, in order: per item, its values (item `i` of each
    /// list in `lists` that has one, nulls left out). A list that stands alone (most
    /// do) is read item after item; a merged one by index.
    pub fn elements<'d>(&'d self, lists: &'d Nodes) -> Elements<'d> {
        let alone = lists
            .only()
            .map(|list| (list.tape, self.value(list).items()));
        let len = if alone.is_some() {
            0
        } else {
            self.list_len(lists)
        };
        Elements {
            data: self,
            lists,
            alone,
            next: 0,
            len,
        }
    }

    /// Item `i` of each list in `lists` that has one (the values at one place of a
    /// merged list).
    pub fn element(&self, lists: &Nodes, i: usize) -> Nodes {
        let mut out = Nodes::default();
        for list in lists.iter() {
            if let Some(item) = self.value(list).items().nth(i) {
                if !item.is_null() {
                    out.push(list.at(item.index()));
                }
            }
        }
        out
    }

    /// The length of a merged list: its first answer's.
    pub fn list_len(&self, lists: &Nodes) -> usize {
        lists.first().map_or(0, |l| self.value(l).items().count())
    }

    /// The object's type, from the `__typename`s of its view: the first that names
    /// an object type (an interface object's answer names its interface), else the
    /// first there is.
    pub fn typename<'s>(&'s self, view: &Nodes, supergraph: &Supergraph) -> Option<Cow<'s, str>> {
        if let Some(node) = view.only() {
            return self.value(node).get("__typename").and_then(|t| t.as_str());
        }
        // Read in place (no list of names is built): the usual merged view's answers
        // all name one type, which the first pass finds.
        let names = || {
            view.iter()
                .filter_map(|node| self.value(node).get("__typename").and_then(|t| t.as_str()))
        };
        // One pass reads each name once (the first is not read again to skip it).
        let mut rest = names();
        let first = rest.next()?;
        if rest.all(|n| n == first) {
            return Some(first);
        }
        names()
            .find(|n| supergraph.fields_of(n).is_some() && !supergraph.is_abstract(n))
            .or(Some(first))
    }
}
