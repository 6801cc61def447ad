//! An entity fetch's walk: the distinct representations of the objects at its
//! paths, the objects each is for, and their places in the response; and how walks
//! are shared within one request: lent to the fetches that walk alike, and kept for
//! those that walk on from a fetch's objects ([`crate::plan::WalksAlike`]).

use std::hash::BuildHasher;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use super::data::{Node, PathStep, Target};
use super::rewrites;
use super::subgraph_request::Item;
use super::Run;
use crate::fast_map::{FastHasher, FastMap};
use crate::plan::{EntityGroup, Fetch, FetchId};

/// The objects an entity fetch's walk found at its one path, kept for a later fetch
/// whose path goes on from there ([`crate::plan::WalksAlike::on`]).
pub(super) struct Kept<'a> {
    targets: SmallVec<[Target; 1]>,
    /// Their places ([`Target::path`] is a span of these).
    steps: Arc<Vec<PathStep<'a>>>,
    /// The data's count of changes they were found at
    /// ([`Data::changes`](super::data::Data::changes)).
    changes: u64,
}

/// What an entity fetch's walk found: its distinct representations with the objects
/// each is for, the places of those objects, and the representations' text.
pub(super) struct Walk<'a> {
    pub(super) entities: Held<Entity>,
    pub(super) steps: Held<PathStep<'a>>,
    pub(super) representations: Bytes,
    /// The data's count of changes it was made at
    /// ([`Data::changes`](super::data::Data::changes)).
    changes: u64,
}

impl<'a> Walk<'a> {
    /// This walk, its parts shared from now on with the copy lent to fetches that
    /// walk alike.
    pub(super) fn lend(self) -> (Walk<'a>, Lent<'a>) {
        let lent = Lent {
            entities: self.entities.into_shared(),
            steps: self.steps.into_shared(),
            representations: self.representations,
            changes: self.changes,
        };
        (lent.walk(), lent)
    }
}

/// A walk kept for the fetches that walk alike.
pub(super) struct Lent<'a> {
    entities: Arc<Vec<Entity>>,
    steps: Arc<Vec<PathStep<'a>>>,
    representations: Bytes,
    changes: u64,
}

impl<'a> Lent<'a> {
    fn walk(&self) -> Walk<'a> {
        Walk {
            entities: Held::Shared(self.entities.clone()),
            steps: Held::Shared(self.steps.clone()),
            representations: self.representations.clone(),
            changes: self.changes,
        }
    }
}

/// A part of a walk: its fetch's own (as most are: no allocation for sharing), or
/// shared with fetches that walk alike.
pub(super) enum Held<T> {
    Own(Vec<T>),
    Shared(Arc<Vec<T>>),
}

impl<T> Held<T> {
    fn into_shared(self) -> Arc<Vec<T>> {
        match self {
            Held::Own(parts) => Arc::new(parts),
            Held::Shared(parts) => parts,
        }
    }
}

impl<T> std::ops::Deref for Held<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self {
            Held::Own(parts) => parts,
            Held::Shared(parts) => parts,
        }
    }
}

/// One distinct representation of an entity fetch, and the objects it is for.
pub(super) struct Entity {
    pub(super) item: Item,
    /// Its cache namespace (by its type): an index in its group's namespaces (alike
    /// fetches' groups have the same types in the same order).
    pub(super) namespace: usize,
    /// The objects it is for (most entities are for one: held inline), each with its
    /// place in the response as a span of the fetch's steps
    /// ([`Data::targets`](super::data::Data::targets)).
    pub(super) targets: SmallVec<[(Node, Range<usize>); 1]>,
}

impl<'a> Run<'a> {
    /// The walk of an earlier fetch that fetch `id` walks alike
    /// ([`crate::plan::WalksAlike`]), when nothing was added to the data since it was
    /// made: a walk of its own would find the same.
    pub(super) fn alike_walk(&self, id: FetchId) -> Option<Walk<'a>> {
        let like = self.plan.walks_alike.like(id)?;
        let walks = self.walks.lock();
        let (_, walk) = walks.iter().find(|(fetch, _)| *fetch == like)?;
        (walk.changes == self.found.lock().data.changes()).then(|| walk.walk())
    }

    /// Walk the data gathered so far to the objects of `groups`' paths, and write
    /// each one's representation: the distinct ones, each with the objects it is
    /// for.
    ///
    /// The fetch's representations are written one after another into one buffer
    /// (an item is a span of it), and its targets' places into one list of steps: a
    /// fetch of hundreds of entities allocates for neither per entity. Both start
    /// with the room the fetch's last request used ([`crate::plan::FetchRoom`]), and
    /// so does each path's list of targets.
    ///
    /// A fetch whose one path goes on from an earlier fetch's walks on from the
    /// objects that fetch found, when nothing was added to the data since
    /// ([`crate::plan::WalksAlike::on`]); a fetch that a later one walks on from keeps
    /// its objects for it.
    pub(super) fn walk(
        &self,
        id: FetchId,
        fetch: &'a Fetch,
        groups: &'a [EntityGroup],
    ) -> Walk<'a> {
        let supergraph = &*self.executor.supergraph;
        let mut entities: Vec<Entity> = Vec::with_capacity(4);
        let mut steps: Vec<PathStep<'a>> = Vec::with_capacity(fetch.room.steps.get());
        let mut text: Vec<u8> = Vec::with_capacity(fetch.room.text.get());
        let mut most_targets = 0;
        let changes;
        let mut keep = None;
        {
            let found = self.found.lock();
            changes = found.data.changes();
            // Locked only by a fetch that may walk on (most walk from the root).
            let on = self.plan.walks_alike.on(id);
            let kept = on.map(|_| self.kept.lock());
            let on = on.zip(kept.as_deref()).and_then(|((from, len), kept)| {
                let (_, kept) = kept
                    .iter()
                    .find(|(fetch, k)| *fetch == from && k.changes == changes)?;
                Some((kept, len))
            });
            // Distinct representations per group, by a digest of their text: most
            // fetches have one object, so the index is built only once a second
            // one comes. A digest names a candidate, compared in full.
            let digest = |bytes: &[u8]| FastHasher::default().hash_one(bytes);
            let mut index: Option<FastMap<(u32, u64), usize>> = None;
            for (g, group) in groups.iter().enumerate() {
                let g = g as u32;
                for path in &group.paths {
                    let room = fetch.room.targets.get();
                    let targets = match on {
                        // The fetch's one path: from the earlier fetch's objects.
                        Some((kept, len)) => found.data.targets_from(
                            (&kept.targets, &kept.steps),
                            &path[len..],
                            supergraph,
                            &mut steps,
                            room,
                        ),
                        None => found.data.targets(
                            path,
                            &self.plan.root_sources,
                            supergraph,
                            &mut steps,
                            room,
                        ),
                    };
                    most_targets = most_targets.max(targets.len());
                    entities.reserve(targets.len());
                    // Room for a typical representation (`__typename` and a key) each,
                    // when the last request left no measure of it: reserving past
                    // that measure (targets share representations) made the
                    // allocator copy the whole buffer to a larger one every time.
                    if text.capacity() == 0 {
                        text.reserve(targets.len() * 48);
                    }
                    for target in &targets {
                        let Some(primary) = target.view.first() else {
                            continue;
                        };
                        let start = text.len();
                        let Some(typename) = found.data.representation(
                            &target.view,
                            &group.requires,
                            supergraph,
                            &mut text,
                        ) else {
                            continue;
                        };
                        if !group.input_rewrites.is_empty() {
                            let rewritten = rewrites::apply_to_text(
                                &group.input_rewrites,
                                &text[start..],
                                supergraph,
                            );
                            text.truncate(start);
                            text.extend_from_slice(&rewritten);
                        }
                        let written = &text[start..];
                        let same = |e: &Entity| {
                            e.item.group == g && e.item.representation(&text) == written
                        };
                        // Worked out once, for the look-up and the entry.
                        let key = index.as_ref().map(|_| (g, digest(written)));
                        let known = match (&index, key) {
                            (Some(index), Some(key)) => match index.get(&key) {
                                Some(&at) if same(&entities[at]) => Some(at),
                                // Another representation with the same digest: look
                                // through them all.
                                Some(_) => entities.iter().position(same),
                                None => None,
                            },
                            _ => entities.iter().position(same),
                        };
                        let at = match known {
                            Some(at) => {
                                text.truncate(start);
                                at
                            }
                            None => {
                                let item = Item {
                                    group: g,
                                    span: start as u32..text.len() as u32,
                                };
                                if let (Some(index), Some(key)) = (&mut index, key) {
                                    index.entry(key).or_insert(entities.len());
                                } else if entities.len() >= 8 {
                                    // Room for every target of this path at once.
                                    let mut built = FastMap::with_capacity_and_hasher(
                                        entities.capacity(),
                                        Default::default(),
                                    );
                                    for (i, e) in entities.iter().enumerate() {
                                        let key =
                                            (e.item.group, digest(e.item.representation(&text)));
                                        built.entry(key).or_insert(i);
                                    }
                                    built.entry((g, digest(written))).or_insert(entities.len());
                                    index = Some(built);
                                }
                                let namespace =
                                    group.namespace_index(typename.as_deref().unwrap_or(""));
                                entities.push(Entity {
                                    item,
                                    namespace,
                                    targets: SmallVec::new(),
                                });
                                entities.len() - 1
                            }
                        };
                        entities[at].targets.push((primary, target.path.clone()));
                    }
                    // The fetch's one path (no other fetch is walked on from).
                    if self.plan.walks_alike.keeps(id) {
                        keep = Some(targets);
                    }
                }
            }
        }
        fetch.room.steps.note(steps.len());
        fetch.room.text.note(text.len());
        fetch.room.targets.note(most_targets);
        let steps = match keep {
            Some(targets) => {
                let steps = Arc::new(steps);
                let kept = Kept {
                    targets,
                    steps: steps.clone(),
                    changes,
                };
                self.kept.lock().push((id, kept));
                Held::Shared(steps)
            }
            None => Held::Own(steps),
        };
        Walk {
            entities: Held::Own(entities),
            steps,
            representations: Bytes::from(text),
            changes,
        }
    }
}
