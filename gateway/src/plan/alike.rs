//! Entity fetches that share walks: two fetches of one plan whose groups reach the
//! same objects and write the same representations of them, and a fetch whose one
//! path goes on from an earlier fetch's.
//!
//! A planner often sends two subgraphs to the same objects at once: on the commerce
//! graph's deep query, the wishlists' products go to `products` for their names and
//! to `reviews` for their reviews, in one parallel step, both keyed by
//! `{__typename upc}`. Each fetch would walk the data to its 150 objects, write each
//! object's representation and set aside the repeats: the same work twice, about a
//! sixth of an entity fetch's cost on that query. What a walk finds depends only on
//! the data gathered so far and on the group's paths, representation fields and
//! input rewrites, so a fetch whose groups match an earlier fetch's in all of them
//! (and in the types their cache namespaces are for, in order) may take that fetch's
//! walk, as long as no answer came in between ([`crate::execute`] checks that).
//!
//! A fetch whose path only begins like an earlier fetch's walks on from it: in the
//! same query's last step, inventory is asked for the wishlists' products and accounts
//! for the authors of those products' reviews (`…wishlist.@.reviews.@.author`). The
//! second walk would go again through every product, review and author above the
//! wishlists, building the same merged views; it may instead start from the objects
//! the first fetch found, and walk only the rest of its path, under the same
//! condition (no answer in between). Only fetches of one group with one path walk on
//! or are walked on from; of the earlier fetches whose path begins the fetch's, the
//! one with the longest path is taken (the latest of those, which is likeliest to
//! have walked since the last answer came).
//!
//! The matches are made once per plan, here. Paths match by their response keys, the
//! fetches that may hold each ([`super::Sources`]) and their type conditions (not by
//! the walks' hints, which only say where a key was found last). Representation
//! fields match by their text, aliases and arguments included.

use super::{EntityGroup, Fetch, FetchId, FetchKind, PathSegment};

/// Per fetch of a plan: the earlier entity fetch it walks alike, if any, and whether
/// a later fetch walks like it; the earlier fetch it walks on from, if any, and
/// whether a later fetch walks on from it.
#[derive(Debug, Default)]
pub struct WalksAlike {
    like: Vec<Option<FetchId>>,
    lends: Vec<bool>,
    /// The earlier fetch, and how many segments of this fetch's path its path is.
    on: Vec<Option<(FetchId, usize)>>,
    keeps: Vec<bool>,
}

impl WalksAlike {
    /// The matches among `fetches`: each entity fetch is matched with the first
    /// earlier one that walks alike.
    pub(super) fn of(fetches: &[Fetch]) -> WalksAlike {
        let mut like = vec![None; fetches.len()];
        let mut lends = vec![false; fetches.len()];
        for (b, fetch) in fetches.iter().enumerate() {
            let FetchKind::Entities(groups) = &fetch.kind else {
                continue;
            };
            let earlier = fetches[..b].iter().position(|other| match &other.kind {
                FetchKind::Entities(others) => groups_alike(groups, others),
                FetchKind::Root(_) => false,
            });
            if let Some(a) = earlier {
                // A fetch alike to one that is itself alike to an earlier one matches
                // that earlier one first, so only first fetches lend.
                like[b] = Some(a as FetchId);
                lends[a] = true;
            }
        }
        let mut on = vec![None; fetches.len()];
        let mut keeps = vec![false; fetches.len()];
        for (b, fetch) in fetches.iter().enumerate() {
            let Some(path) = one_path(fetch) else {
                continue;
            };
            // The longest earlier path that begins this one; the latest of equals.
            let mut best: Option<(usize, usize)> = None;
            for (a, other) in fetches[..b].iter().enumerate() {
                // A fetch alike to an earlier one takes that one's walk: the earlier
                // one's objects are the ones to keep.
                if like[a].is_some() {
                    continue;
                }
                let Some(begins) = one_path(other) else {
                    continue;
                };
                // What is left of the path starts from an object: not with `@`,
                // which a walk from the root takes at a list the earlier walk
                // already went through (a path may go through a list without it).
                let rest_starts_at_an_object =
                    !matches!(path.get(begins.len()), Some(PathSegment::List));
                if begins.len() <= path.len()
                    && path_alike(begins, &path[..begins.len()])
                    && rest_starts_at_an_object
                    && best.is_none_or(|(_, len)| begins.len() >= len)
                {
                    best = Some((a, begins.len()));
                }
            }
            if let Some((a, len)) = best {
                on[b] = Some((a as FetchId, len));
                keeps[a] = true;
            }
        }
        WalksAlike {
            like,
            lends,
            on,
            keeps,
        }
    }

    /// The earlier fetch whose walk fetch `id` may take.
    pub fn like(&self, id: FetchId) -> Option<FetchId> {
        self.like.get(id as usize).copied().flatten()
    }

    /// Whether a later fetch may take fetch `id`'s walk (so it is worth keeping).
    pub fn lends(&self, id: FetchId) -> bool {
        self.lends.get(id as usize).copied().unwrap_or(false)
    }

    /// The earlier fetch whose objects fetch `id` may walk on from, and how many
    /// segments of `id`'s path lead to them.
    pub fn on(&self, id: FetchId) -> Option<(FetchId, usize)> {
        self.on.get(id as usize).copied().flatten()
    }

    /// Whether a later fetch may walk on from fetch `id`'s objects (so they are worth
    /// keeping).
    pub fn keeps(&self, id: FetchId) -> bool {
        self.keeps.get(id as usize).copied().unwrap_or(false)
    }

    pub(super) fn heap_size(&self) -> usize {
        self.like.len() * std::mem::size_of::<Option<FetchId>>()
            + self.lends.len()
            + self.on.len() * std::mem::size_of::<Option<(FetchId, usize)>>()
            + self.keeps.len()
    }
}

/// The one path of an entity fetch of one group with one path.
fn one_path(fetch: &Fetch) -> Option<&[PathSegment]> {
    match &fetch.kind {
        FetchKind::Entities(groups) => match groups.as_slice() {
            [group] => match group.paths.as_slice() {
                [path] => Some(path),
                _ => None,
            },
            _ => None,
        },
        FetchKind::Root(_) => None,
    }
}

fn groups_alike(a: &[EntityGroup], b: &[EntityGroup]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| group_alike(a, b))
}

fn group_alike(a: &EntityGroup, b: &EntityGroup) -> bool {
    let texts = |g: &EntityGroup| g.requires.iter().map(|r| r.to_string()).collect::<Vec<_>>();
    a.paths.len() == b.paths.len()
        && a.paths.iter().zip(&b.paths).all(|(a, b)| path_alike(a, b))
        && a.input_rewrites == b.input_rewrites
        && a.namespaces.len() == b.namespaces.len()
        && a.namespaces
            .iter()
            .zip(&b.namespaces)
            .all(|(a, b)| a.0 == b.0)
        && texts(a) == texts(b)
}

fn path_alike(a: &[PathSegment], b: &[PathSegment]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| match (a, b) {
            (PathSegment::Field(a, a_sources, _), PathSegment::Field(b, b_sources, _)) => {
                a == b && a_sources == b_sources
            }
            (PathSegment::List, PathSegment::List) => true,
            (PathSegment::Types(a), PathSegment::Types(b)) => a == b,
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use hive_router_query_planner::ast::selection_item::SelectionItem;
    use hive_router_query_planner::ast::selection_set::FieldSelection;

    use super::*;
    use crate::plan::{FetchRoom, MemberHint, Sources};

    fn field(name: &str, alias: Option<&str>) -> SelectionItem {
        SelectionItem::Field(FieldSelection {
            name: name.into(),
            alias: alias.map(Into::into),
            ..FieldSelection::new_typename()
        })
    }

    fn key(k: &str, sources: Sources) -> PathSegment {
        PathSegment::Field(k.into(), sources, MemberHint::default())
    }

    /// An entity fetch of `Product`s at `path`, represented by `requires`, asking
    /// for `selection`.
    fn products(path: Vec<PathSegment>, requires: Vec<SelectionItem>, selection: &str) -> Fetch {
        Fetch {
            subgraph: 0,
            mutation: false,
            query: Arc::from(selection),
            variables: Vec::new(),
            kind: FetchKind::Entities(vec![EntityGroup {
                alias: "_entities".into(),
                variable: "representations".into(),
                paths: vec![path],
                requires,
                input_rewrites: Vec::new(),
                output_rewrites: Vec::new(),
                namespaces: vec![("Product".into(), Arc::from(format!("Product.{selection}")))],
                selection: Arc::from(selection),
            }]),
            body: bytes::Bytes::new(),
            room: FetchRoom::default(),
        }
    }

    #[test]
    fn fetches_walk_alike_only_when_paths_and_representations_match() {
        let wishlist = || {
            vec![
                key("me", Sources::ALL),
                key("wishlist", Sources::ALL),
                PathSegment::List,
            ]
        };
        let upc = || vec![field("__typename", None), field("upc", None)];
        let fetches = vec![
            products(wishlist(), upc(), "name"),
            products(wishlist(), upc(), "reviews"),
            // Another path: walks elsewhere.
            products(
                vec![key("me", Sources::ALL), PathSegment::List],
                upc(),
                "stock",
            ),
            // The same path, other representation fields: another text.
            products(
                wishlist(),
                vec![field("__typename", None), field("sku", None)],
                "b",
            ),
            // The same fields under an alias: another text too.
            products(
                wishlist(),
                vec![field("__typename", None), field("upc", Some("u"))],
                "c",
            ),
            // The same path, read from other fetches' answers.
            products(
                vec![
                    key("me", Sources::of_fetch(0)),
                    key("wishlist", Sources::ALL),
                    PathSegment::List,
                ],
                upc(),
                "d",
            ),
            // A third alike fetch takes the first one's walk.
            products(wishlist(), upc(), "price"),
        ];
        let alike = WalksAlike::of(&fetches);
        let like: Vec<Option<FetchId>> = (0..fetches.len() as FetchId)
            .map(|id| alike.like(id))
            .collect();
        assert_eq!(like, [None, Some(0), None, None, None, None, Some(0)]);
        let lends: Vec<bool> = (0..fetches.len() as FetchId)
            .map(|id| alike.lends(id))
            .collect();
        assert_eq!(lends, [true, false, false, false, false, false, false]);
        // Out of range: neither.
        assert_eq!(alike.like(99), None);
        assert!(!alike.lends(99));
    }

    #[test]
    fn a_fetch_walks_on_from_the_latest_longest_path_that_begins_its_own() {
        let at = |keys: &[&str]| {
            let mut path = Vec::new();
            for k in keys {
                path.push(key(k, Sources::ALL));
                path.push(PathSegment::List);
            }
            path
        };
        let upc = || vec![field("__typename", None), field("upc", None)];
        let mut two_paths = products(at(&["a"]), upc(), "two");
        if let FetchKind::Entities(groups) = &mut two_paths.kind {
            groups[0].paths.push(at(&["b"]));
        }
        let fetches = vec![
            products(at(&["a"]), upc(), "0"),
            products(at(&["a", "b"]), upc(), "1"),
            // Alike to 1: walks on from nothing of its own, 1 is kept instead.
            products(at(&["a", "b"]), upc(), "2"),
            products(at(&["a", "b"]), vec![field("__typename", None)], "3"),
            // Begins like 1 and 3 (the latest of the longest: 3), and like 0.
            products(at(&["a", "b", "c"]), upc(), "4"),
            // Two paths: neither walks on nor is walked on from.
            two_paths,
            products(at(&["a", "b", "c", "d"]), upc(), "6"),
            // Nothing earlier begins it: `x` is a key no other path has.
            products(at(&["x", "b"]), upc(), "7"),
            // Equal to 0's path, with other types: another walk.
            products(
                vec![
                    key("a", Sources::ALL),
                    PathSegment::List,
                    PathSegment::Types(vec!["Product".into()]),
                ],
                upc(),
                "8",
            ),
            // Through the list `y` without `@`: its objects are the list's items.
            products(vec![key("y", Sources::ALL)], upc(), "9"),
            // Its rest would start with `@` at those items: not from 9.
            products(
                vec![
                    key("y", Sources::ALL),
                    PathSegment::List,
                    key("z", Sources::ALL),
                ],
                upc(),
                "10",
            ),
            // Its rest starts at 9's items: from 9.
            products(
                vec![key("y", Sources::ALL), key("z", Sources::ALL)],
                upc(),
                "11",
            ),
        ];
        let alike = WalksAlike::of(&fetches);
        let on: Vec<Option<(FetchId, usize)>> = (0..fetches.len() as FetchId)
            .map(|id| alike.on(id))
            .collect();
        assert_eq!(
            on,
            [
                None,
                Some((0, 2)),
                Some((1, 4)),
                Some((1, 4)),
                Some((3, 4)),
                None,
                Some((4, 6)),
                None,
                Some((0, 2)),
                None,
                None,
                Some((9, 1)),
            ]
        );
        let keeps: Vec<usize> = (0..fetches.len())
            .filter(|&id| alike.keeps(id as FetchId))
            .collect();
        assert_eq!(keeps, [0, 1, 3, 4, 9]);
        assert_eq!(alike.on(99), None);
        assert!(!alike.keeps(99));
    }
}
