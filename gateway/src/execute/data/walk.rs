//! The walks that find an entity fetch's objects: from the root of the data gathered
//! so far along a plan's path ([`Data::targets`]), or on from the objects an earlier
//! walk found, along the rest of a path that goes on from that walk's
//! ([`Data::targets_from`]).
//!
//! A walk steps through the path's segments: a key reads the member of the object's
//! view (its answers, merged: [`Data::view_of`]), a list steps into each item, a type
//! condition keeps the objects of those types. Each object at the path's end is a
//! [`Target`]: its view, and its place in the response. The places of all of one
//! fetch's targets are written one after another into one list of steps, so that a
//! fetch of hundreds of objects allocates for none of them alone.

use std::ops::Range;

use smallvec::SmallVec;

use super::{Data, Nodes, PathStep};
use crate::answer::tape::Kind;
use crate::plan::{PathSegment, RootSources};
use crate::supergraph::Supergraph;

/// An object to fetch entities for: its view, and its place in the response (a
/// span of the steps [`Data::targets`] wrote, so that a place costs no allocation of
/// its own: it is read only to report an error there).
pub struct Target {
    pub view: Nodes,
    pub path: Range<usize>,
}

/// One walk: the data, where the places are written, the objects found, and the
/// place of the value the walk stands on (a key per segment, an index per list on
/// the way, held inline for the usual depths; each target's are copied to `steps`).
struct Walker<'d, 'p, 's> {
    data: &'d Data,
    supergraph: &'d Supergraph,
    steps: &'s mut Vec<PathStep<'p>>,
    out: SmallVec<[Target; 1]>,
    at: SmallVec<[PathStep<'p>; 8]>,
}

impl Data {
    /// The objects at `path`, each with its view and its place in the response, as
    /// a span of `steps`, where the places are appended (`sources` says which root
    /// answer holds a root field); `room` is how many to make room for at once.
    pub fn targets<'p>(
        &self,
        path: &'p [PathSegment],
        sources: &RootSources,
        supergraph: &Supergraph,
        steps: &mut Vec<PathStep<'p>>,
        room: usize,
    ) -> SmallVec<[Target; 1]> {
        let mut walker = Walker::new(self, supergraph, steps, room);
        let root = match path.first() {
            Some(PathSegment::Field(key, ..)) => self.root_answers(sources, key),
            _ => self.root_view(),
        };
        walker.walk(&root, path);
        walker.out
    }

    /// The objects at `rest` below each of `starts` (objects an earlier walk found,
    /// their places spans of `start_steps`), as [`Data::targets`] gives them: what a
    /// walk from the root finds at a path that goes on from the earlier one's, as
    /// long as nothing was added to the data since the earlier walk.
    pub fn targets_from<'p>(
        &self,
        (starts, start_steps): (&[Target], &[PathStep<'p>]),
        rest: &'p [PathSegment],
        supergraph: &Supergraph,
        steps: &mut Vec<PathStep<'p>>,
        room: usize,
    ) -> SmallVec<[Target; 1]> {
        let mut walker = Walker::new(self, supergraph, steps, room);
        for start in starts {
            walker.at.clear();
            walker
                .at
                .extend_from_slice(&start_steps[start.path.clone()]);
            walker.walk_object(start.view.clone(), rest);
        }
        walker.out
    }
}

impl<'d, 'p, 's> Walker<'d, 'p, 's> {
    fn new(
        data: &'d Data,
        supergraph: &'d Supergraph,
        steps: &'s mut Vec<PathStep<'p>>,
        room: usize,
    ) -> Self {
        Walker {
            data,
            supergraph,
            steps,
            out: SmallVec::with_capacity(room),
            at: SmallVec::new(),
        }
    }

    /// The objects at `path` from `values`, the values at one place.
    fn walk(&mut self, values: &Nodes, path: &'p [PathSegment]) {
        let Some(first) = values.first() else {
            return;
        };
        match self.data.value(first).kind() {
            Kind::Array => {
                // A list: each item (a `@` step, or a step that goes through it).
                let rest = match path.first() {
                    Some(PathSegment::List) => &path[1..],
                    _ => path,
                };
                let data = self.data;
                for (i, item) in data.elements(values).enumerate() {
                    self.at.push(PathStep::Index(i));
                    self.walk(&item, rest);
                    self.at.pop();
                }
            }
            Kind::Object => {
                let view = self.data.view_of(values);
                self.walk_object(view, path);
            }
            _ => {}
        }
    }

    /// [`Walker::walk`] from an object's `view`: its type conditions read in a loop,
    /// so that it calls only [`Walker::walk`] and is inlined into it.
    #[inline(always)]
    fn walk_object(&mut self, view: Nodes, mut path: &'p [PathSegment]) {
        let data = self.data;
        loop {
            match path.first() {
                None => {
                    let start = self.steps.len();
                    self.steps.extend_from_slice(&self.at);
                    self.out.push(Target {
                        view,
                        path: start..self.steps.len(),
                    });
                }
                Some(PathSegment::Field(key, sources, hint)) => {
                    // An object or a list: merged from every answer that holds
                    // it, so a hint holds only where no other answer may.
                    let sources = (*sources, data.first_answered_by(&view));
                    let sole = !view.is_single();
                    let (child, _) =
                        data.member_by_hint(&view, key, sources, sole, hint, &mut None);
                    self.at.push(PathStep::Key(key));
                    self.walk(&child, &path[1..]);
                    self.at.pop();
                }
                Some(PathSegment::Types(types)) => {
                    let matches = match data.typename(&view, self.supergraph) {
                        Some(ty) => types.iter().any(|t| self.supergraph.satisfies(&ty, t)),
                        None => true,
                    };
                    if matches {
                        path = &path[1..];
                        continue;
                    }
                }
                Some(PathSegment::List) => {}
            }
            return;
        }
    }
}
