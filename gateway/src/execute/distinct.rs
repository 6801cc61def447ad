//! One entity fetch's distinct representations, gathered in one buffer.
//!
//! An entity fetch asks its subgraph for each distinct representation once, for
//! every object that has it. The walk over the objects writes each representation
//! straight to the end of one buffer; one that is already there (the same group and
//! the same bytes) is found, by a linear scan while there are few and by hash once
//! there are [`INDEX_FROM`], and the new copy is cut off again. When the walk is done
//! the buffer becomes one [`Bytes`], and each item's representation a slice of it.
//!
//! That is one allocation for all of a fetch's representations, where a `Vec` each
//! cost two (its own, and the shared header [`Bytes`] gives a `Vec` at its first
//! clone) and a reference count per clone into a dedupe index: on the deep query's
//! 690 entities a request, allocating and freeing them was a tenth of the gateway's
//! CPU without a cache.

use std::hash::BuildHasher;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use super::data::{Node, PathStep};
use super::subgraph_request::Item;
use crate::fast_map::FastMap;

/// How many distinct representations a fetch gathers before they are indexed by
/// hash; most fetches have one, and a scan of a few is cheaper than hashing.
const INDEX_FROM: usize = 8;

/// One distinct representation of an entity fetch, and the objects it is for.
pub struct Entity<'p> {
    pub item: Item,
    /// Its cache namespace (by its type).
    pub namespace: &'p Arc<str>,
    /// The objects it is for (most entities are for one: held inline).
    pub targets: SmallVec<[(Node, Vec<PathStep<'p>>); 1]>,
}

/// A representation gathered so far.
struct Gathered<'p> {
    group: u32,
    /// Where it is in the buffer.
    at: Range<usize>,
    namespace: &'p Arc<str>,
    targets: SmallVec<[(Node, Vec<PathStep<'p>>); 1]>,
    /// The one gathered before it with the same hash (once indexed).
    same_hash: Option<u32>,
}

/// The distinct representations of one entity fetch, as the walk finds them.
#[derive(Default)]
pub struct Distinct<'p> {
    buffer: Vec<u8>,
    gathered: Vec<Gathered<'p>>,
    /// By hash of (group, bytes): the last gathered with it (none until there are
    /// [`INDEX_FROM`]).
    index: Option<FastMap<u64, u32>>,
}

impl<'p> Distinct<'p> {
    /// Room for `more` objects' representations (of about `bytes` each).
    pub fn reserve(&mut self, more: usize, bytes: usize) {
        self.gathered.reserve(more);
        self.buffer.reserve(more.saturating_mul(bytes));
    }

    /// Where the next representation is written: append it, then [`Distinct::keep`]
    /// it from the length the buffer had before (or cut it off there).
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buffer
    }

    /// Keep what was written to the buffer from `start` as a representation of
    /// `group`, for `target`: a new one (in `namespace`), or, when it is already
    /// there, the new copy cut off and `target` added to the one there.
    pub fn keep(
        &mut self,
        start: usize,
        group: u32,
        namespace: impl FnOnce() -> &'p Arc<str>,
        target: (Node, Vec<PathStep<'p>>),
    ) {
        let written = start..self.buffer.len();
        let hash = self
            .index
            .as_ref()
            .map(|index| hash_of(index, group, &self.buffer[written.clone()]));
        let at = match self.find(group, written.clone(), hash) {
            Some(at) => {
                self.buffer.truncate(start);
                at
            }
            None => self.add(group, written, namespace(), hash),
        };
        self.gathered[at].targets.push(target);
    }

    /// The representations gathered, in the order they were first found.
    pub fn into_entities(self) -> Vec<Entity<'p>> {
        let all = Bytes::from(self.buffer);
        self.gathered
            .into_iter()
            .map(|g| Entity {
                item: Item {
                    group: g.group,
                    representation: all.slice(g.at),
                },
                namespace: g.namespace,
                targets: g.targets,
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.gathered.is_empty()
    }

    fn same(&self, gathered: &Gathered<'_>, group: u32, written: &Range<usize>) -> bool {
        gathered.group == group && self.buffer[gathered.at.clone()] == self.buffer[written.clone()]
    }

    /// The one gathered with the bytes at `written` in `group`, if any (`hash`: theirs,
    /// once indexed).
    fn find(&self, group: u32, written: Range<usize>, hash: Option<u64>) -> Option<usize> {
        let (Some(index), Some(hash)) = (&self.index, hash) else {
            return self
                .gathered
                .iter()
                .position(|g| self.same(g, group, &written));
        };
        let mut next = index.get(&hash).copied();
        while let Some(at) = next {
            let gathered = &self.gathered[at as usize];
            if self.same(gathered, group, &written) {
                return Some(at as usize);
            }
            next = gathered.same_hash;
        }
        None
    }

    fn add(
        &mut self,
        group: u32,
        at: Range<usize>,
        namespace: &'p Arc<str>,
        hash: Option<u64>,
    ) -> usize {
        let position = self.gathered.len();
        self.gathered.push(Gathered {
            group,
            at,
            namespace,
            targets: SmallVec::new(),
            same_hash: None,
        });
        match (&mut self.index, hash) {
            (Some(index), Some(hash)) => {
                self.gathered[position].same_hash = index.insert(hash, position as u32);
            }
            _ if self.gathered.len() >= INDEX_FROM => self.build_index(),
            _ => {}
        }
        position
    }

    /// Index every representation gathered so far by hash.
    fn build_index(&mut self) {
        let mut index = FastMap::with_capacity_and_hasher(
            self.gathered.capacity().max(2 * INDEX_FROM),
            Default::default(),
        );
        for (position, gathered) in self.gathered.iter_mut().enumerate() {
            let hash = hash_of(&index, gathered.group, &self.buffer[gathered.at.clone()]);
            gathered.same_hash = index.insert(hash, position as u32);
        }
        self.index = Some(index);
    }
}

/// The hash of a representation of `group`, by the index's hasher.
fn hash_of(index: &FastMap<u64, u32>, group: u32, bytes: &[u8]) -> u64 {
    index.hasher().hash_one((group, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(index: u32) -> Node {
        Node { tape: 0, index }
    }

    /// Gather `reps` (group, bytes) in order, each for its own target.
    fn gather<'p>(namespace: &'p Arc<str>, reps: &[(u32, &str)]) -> Vec<Entity<'p>> {
        let mut distinct = Distinct::default();
        for (i, (group, rep)) in reps.iter().enumerate() {
            let start = distinct.buffer().len();
            distinct.buffer().extend_from_slice(rep.as_bytes());
            distinct.keep(start, *group, || namespace, (node(i as u32), Vec::new()));
        }
        distinct.into_entities()
    }

    fn summary(entities: &[Entity<'_>]) -> Vec<(u32, String, Vec<u32>)> {
        entities
            .iter()
            .map(|e| {
                (
                    e.item.group,
                    String::from_utf8(e.item.representation.to_vec()).unwrap(),
                    e.targets.iter().map(|(n, _)| n.index).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn the_same_bytes_in_the_same_group_are_one_entity_with_every_target() {
        let ns: Arc<str> = Arc::from("Product");
        let got = gather(
            &ns,
            &[
                (0, "{\"a\":1}"),
                (0, "{\"a\":2}"),
                (0, "{\"a\":1}"),
                (1, "{\"a\":1}"),
            ],
        );
        assert_eq!(
            summary(&got),
            vec![
                (0, "{\"a\":1}".into(), vec![0, 2]),
                (0, "{\"a\":2}".into(), vec![1]),
                (1, "{\"a\":1}".into(), vec![3]),
            ]
        );
    }

    #[test]
    fn past_the_index_threshold_lookups_find_what_a_scan_would() {
        // 200 objects over 37 distinct representations in two groups, some of which
        // are prefixes of others: the same entities, in the same order, as a plain
        // scan gives, before and after the index is built.
        let ns: Arc<str> = Arc::from("User");
        let reps: Vec<(u32, String)> = (0..200u32)
            .map(|i| ((i % 2), format!("{{\"id\":\"{}\"}}", (i * 7) % 37)))
            .collect();
        let borrowed: Vec<(u32, &str)> = reps.iter().map(|(g, r)| (*g, r.as_str())).collect();
        let got = summary(&gather(&ns, &borrowed));
        let mut want: Vec<(u32, String, Vec<u32>)> = Vec::new();
        for (i, (g, r)) in reps.iter().enumerate() {
            match want.iter_mut().find(|(wg, wr, _)| wg == g && wr == r) {
                Some((_, _, targets)) => targets.push(i as u32),
                None => want.push((*g, r.clone(), vec![i as u32])),
            }
        }
        assert!(want.len() > INDEX_FROM);
        assert_eq!(got, want);
    }
}
