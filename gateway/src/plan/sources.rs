//! Which fetches' answers may hold a response key: what lets a read of a merged
//! object skip the answers that cannot hold the field it looks for.
//!
//! An object of the response is a view of several answers (its root answer, then an
//! entity answer per fetch that adds to it: [`crate::execute::data`]). Looking a
//! field up in every one of them was the largest single cost of a deep request
//! without a cache. But an answer holds only the keys its request asked for, and
//! the plan has every request's text: a key that a fetch's document never names
//! (as a field's response key, or as what an output rewrite renames a key to)
//! cannot be in that fetch's answers. So each response key of the plan's paths and
//! of its shape carries the set of fetches that name it ([`Sources`]), each answer
//! kept for a request carries the fetch it came from, and a read skips an answer
//! whose fetch is not in the set.
//!
//! An answer whose fetch is not known for sure (one the cache served: another
//! operation's fetch may have stored it) carries every bit, so it is always read.
//! So does an answer of a fetch past the 63rd, and a key no fetch names still
//! reads those answers (the bit they all share).

use std::collections::HashMap;

use async_graphql_parser::types::{DocumentOperations, SelectionSet};
use hive_router_query_planner::planner::plan_nodes::FetchRewrite;

use super::{FetchId, FetchKind, FieldKind, PathSegment, Plan, Selection};

/// A set of a plan's fetches: fetch `i` is bit `i` (for `i` below 63); bit 63
/// stands for the answers whose fetch is not known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sources(u64);

impl Sources {
    /// Every fetch: an answer whose fetch is not known, or a key read in every answer.
    pub const ALL: Sources = Sources(u64::MAX);
    /// A key no fetch names: only answers of unknown fetches are read for it.
    const NONE_KNOWN: Sources = Sources(1 << 63);

    /// What the answers of fetch `id` carry: its own bit, or every bit past the
    /// 63rd fetch.
    pub fn of_fetch(id: FetchId) -> Sources {
        match id {
            0..63 => Sources(1 << id),
            _ => Sources::ALL,
        }
    }

    /// Whether an answer carrying `answer` may hold a key whose sources are `self`.
    #[inline(always)]
    pub fn may_hold(self, answer: Sources) -> bool {
        self.0 & answer.0 != 0
    }

    /// Both sets.
    pub fn union(self, other: Sources) -> Sources {
        Sources(self.0 | other.0)
    }
}

impl Default for Sources {
    fn default() -> Sources {
        Sources::ALL
    }
}

/// Give every response key of `plan`'s shape and entity paths the fetches whose
/// documents name it.
pub(super) fn assign(plan: &mut Plan) {
    let mut named: HashMap<String, Sources> = HashMap::new();
    for (id, fetch) in plan.fetches.iter().enumerate() {
        let bit = Sources::of_fetch(id as FetchId);
        if bit == Sources::ALL {
            // Its answers carry every bit: they are read for any key anyway.
            continue;
        }
        let mut keys = Vec::new();
        if !document_keys(&fetch.query, &mut keys) {
            // Cannot happen (the gateway wrote the text); were it to, the plan falls
            // back to reading every answer for every key.
            return;
        }
        match &fetch.kind {
            FetchKind::Root(root) => renamed_keys(&root.output_rewrites, &mut keys),
            FetchKind::Entities(groups) => {
                for group in groups {
                    renamed_keys(&group.output_rewrites, &mut keys);
                }
            }
        }
        for key in keys {
            let entry = named.entry(key).or_insert(Sources::NONE_KNOWN);
            *entry = entry.union(bit);
        }
    }
    let of = |key: &str| named.get(key).copied().unwrap_or(Sources::NONE_KNOWN);
    assign_selection(&mut plan.root, &of);
    for fetch in &mut plan.fetches {
        let paths: Vec<&mut Vec<PathSegment>> = match &mut fetch.kind {
            FetchKind::Root(root) => root.at.iter_mut().collect(),
            FetchKind::Entities(groups) => groups.iter_mut().flat_map(|g| &mut g.paths).collect(),
        };
        for path in paths {
            for segment in path {
                if let PathSegment::Field(key, sources, _) = segment {
                    *sources = of(key);
                }
            }
        }
    }
}

fn assign_selection(selection: &mut Selection, of: &impl Fn(&str) -> Sources) {
    for variant in selection
        .variants
        .iter_mut()
        .chain(selection.common.as_mut())
    {
        for field in &mut variant.fields {
            field.sources = of(&field.key);
            if let FieldKind::Object(inner) = &mut field.kind {
                assign_selection(inner, of);
            }
        }
    }
}

/// Append every response key (alias or name) of the document `text`'s fields, in
/// its operations and its fragments; false when it does not parse.
fn document_keys(text: &str, keys: &mut Vec<String>) -> bool {
    let Ok(doc) = async_graphql_parser::parse_query(text) else {
        return false;
    };
    let sets: Vec<&SelectionSet> = match &doc.operations {
        DocumentOperations::Single(op) => vec![&op.node.selection_set.node],
        DocumentOperations::Multiple(ops) => {
            ops.values().map(|op| &op.node.selection_set.node).collect()
        }
    };
    for set in sets {
        selection_keys(set, keys);
    }
    for fragment in doc.fragments.values() {
        selection_keys(&fragment.node.selection_set.node, keys);
    }
    true
}

fn selection_keys(set: &SelectionSet, keys: &mut Vec<String>) {
    use async_graphql_parser::types::Selection as Item;
    for item in &set.items {
        match &item.node {
            Item::Field(f) => {
                keys.push(f.node.response_key().node.to_string());
                selection_keys(&f.node.selection_set.node, keys);
            }
            Item::InlineFragment(f) => selection_keys(&f.node.selection_set.node, keys),
            Item::FragmentSpread(_) => {}
        }
    }
}

/// The keys the planner's output rewrites give an answer's members.
fn renamed_keys(rewrites: &[FetchRewrite], keys: &mut Vec<String>) {
    for rewrite in rewrites {
        if let FetchRewrite::KeyRenamer(r) = rewrite {
            keys.push(r.rename_key_to.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_read_for_the_keys_its_fetch_names_and_unknown_answers_for_all() {
        let a = Sources::of_fetch(0);
        let b = Sources::of_fetch(5);
        let named_by_a = Sources::NONE_KNOWN.union(a);
        assert!(named_by_a.may_hold(a));
        assert!(!named_by_a.may_hold(b));
        // An answer the cache served, and one of a fetch past the 63rd.
        assert!(named_by_a.may_hold(Sources::ALL));
        assert_eq!(Sources::of_fetch(63), Sources::ALL);
        // A key no fetch names is still read in unknown answers, in no known one.
        assert!(Sources::NONE_KNOWN.may_hold(Sources::ALL));
        assert!(!Sources::NONE_KNOWN.may_hold(a));
        // A read that does not narrow.
        assert!(Sources::ALL.may_hold(a) && Sources::ALL.may_hold(b));
    }

    #[test]
    fn a_document_names_its_response_keys_in_operations_and_fragments() {
        let mut keys = Vec::new();
        let text = "query($r:[_Any!]!){_entities(representations:$r){__typename ...on User{id n:name ...F}}} fragment F on User{reviews{body}}";
        assert!(document_keys(text, &mut keys));
        keys.sort();
        assert_eq!(
            keys,
            ["__typename", "_entities", "body", "id", "n", "reviews"]
        );
        assert!(!document_keys("{ unclosed", &mut keys));
    }
}
