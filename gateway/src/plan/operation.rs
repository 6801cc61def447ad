//! Subgraph request texts: the planner's fetch documents, adjusted for the
//! gateway, and written out.
//!
//! Three adjustments, all on the planner's own syntax tree before it is printed:
//!
//! - **one root field per request** ([`split_roots`]): the planner asks a subgraph
//!   for all the root fields it owns in one request; the gateway caches and fails
//!   per root field (`Query.me`), so each becomes a document of its own, with just
//!   the variables and fragments it uses (a GraphQL document may declare no unused
//!   variable or fragment);
//! - **no fragments** ([`without_fragments`]): the planner writes a selection it
//!   asks in several places once, as a named fragment; every spread is replaced by
//!   the fragment's selection, and a fragment whose type condition is its position's
//!   own type is spliced into it. The request says the same, and subgraphs whose
//!   executors skip a fragment on a union or an interface (async-graphql's dynamic
//!   schemas do) answer it right;
//! - **references** (in [`super::references`], beside this file): with a cache,
//!   every object of an entity type in an answer is asked for its `__typename` and
//!   its key fields under reserved `_gw_k_*` aliases, so that each cache entry can
//!   name the entities it holds (`User:u1`) and a mutation's answer the entities it
//!   touched ([`crate::caching`]). That includes the entity an `_entities` answer is
//!   for, so that an entity's entry names its own entity (`Product:<upc>`), not
//!   only those beneath it. Under an interface or union the aliases are asked per
//!   concrete type, `_gw_k_<Type>__<field>`, since two types' key fields of one
//!   name may differ in type, and one alias must have one type.
//!
//! And one to the client's operation before it is planned
//! ([`plain_typenames`]): an interface or union selection that asks its
//! `__typename` under an alias only (`{ search { kind: __typename } }`) also asks it
//! unaliased, since the response writer tells the concrete type by `__typename`;
//! and a selection whose every item is under `@skip`/`@include` asks it too, so
//! that the object is fetched however the variables fall.

use std::collections::BTreeSet;

use hive_router_query_planner::ast::document::Document;
use hive_router_query_planner::ast::selection_item::SelectionItem;
use hive_router_query_planner::ast::selection_set::{
    FieldSelection, InlineFragmentSelection, SelectionSet,
};
use hive_router_query_planner::state::supergraph_state::SupergraphState;

/// The documents of `doc`'s root fields, one each; `None` when its root selection
/// holds anything but fields (then it is sent whole).
pub fn split_roots(doc: &Document) -> Option<Vec<Document>> {
    let items = &doc.operation.selection_set.items;
    if items.len() < 2 || !items.iter().all(SelectionItem::is_field) {
        return None;
    }
    Some(
        items
            .iter()
            .map(|item| {
                let mut part = doc.clone();
                part.operation.selection_set.items = vec![item.clone()];
                keep_used(&mut part);
                part
            })
            .collect(),
    )
}

/// Drop the fragments and variable declarations `doc` no longer uses.
fn keep_used(doc: &mut Document) {
    let mut fragments = BTreeSet::new();
    spreads(&doc.operation.selection_set, &mut fragments);
    // Fragments may spread fragments: close over them.
    loop {
        let before = fragments.len();
        for f in &doc.fragments {
            if fragments.contains(&f.name) {
                let mut more = BTreeSet::new();
                spreads(&f.selection_set, &mut more);
                fragments.extend(more);
            }
        }
        if fragments.len() == before {
            break;
        }
    }
    doc.fragments.retain(|f| fragments.contains(&f.name));
    let mut used = doc.operation.selection_set.variable_usages();
    for f in &doc.fragments {
        used.extend(f.selection_set.variable_usages());
    }
    if let Some(defs) = &mut doc.operation.variable_definitions {
        defs.retain(|d| used.contains(&d.name));
    }
}

fn spreads(set: &SelectionSet, out: &mut BTreeSet<String>) {
    for item in &set.items {
        match item {
            SelectionItem::Field(f) => spreads(&f.selections, out),
            SelectionItem::InlineFragment(i) => spreads(&i.selections, out),
            SelectionItem::FragmentSpread(name) => {
                out.insert(name.clone());
            }
        }
    }
}

/// Replace every fragment spread of `doc` (whose root is of type `root_type`) by the
/// fragment's selection, and splice every inline fragment whose type condition is
/// its position's type (without `@skip`/`@include`) into its position; `doc` keeps
/// no fragment definition.
pub fn without_fragments(doc: &mut Document, root_type: &str, state: &SupergraphState) {
    let fragments = std::mem::take(&mut doc.fragments);
    inline_spreads(&mut doc.operation.selection_set, &fragments, 0);
    splice(&mut doc.operation.selection_set, root_type, state);
}

fn inline_spreads(
    set: &mut SelectionSet,
    fragments: &[hive_router_query_planner::ast::fragment::FragmentDefinition],
    depth: usize,
) {
    for item in &mut set.items {
        match item {
            SelectionItem::Field(f) => inline_spreads(&mut f.selections, fragments, depth),
            SelectionItem::InlineFragment(i) => inline_spreads(&mut i.selections, fragments, depth),
            SelectionItem::FragmentSpread(name) => {
                let Some(fragment) = fragments.iter().find(|f| &f.name == name) else {
                    continue;
                };
                let mut selections = fragment.selection_set.clone();
                // The planner's fragments do not recurse; the bound only guards.
                if depth < 32 {
                    inline_spreads(&mut selections, fragments, depth + 1);
                }
                *item = SelectionItem::InlineFragment(InlineFragmentSelection {
                    type_condition: fragment.type_condition.clone(),
                    selections,
                    skip_if: None,
                    include_if: None,
                });
            }
        }
    }
}

fn splice(set: &mut SelectionSet, ty: &str, state: &SupergraphState) {
    let mut items = Vec::with_capacity(set.items.len());
    for item in std::mem::take(&mut set.items) {
        match item {
            SelectionItem::InlineFragment(i)
                if i.type_condition == ty && i.skip_if.is_none() && i.include_if.is_none() =>
            {
                let mut inner = i.selections;
                splice(&mut inner, ty, state);
                items.extend(inner.items);
            }
            SelectionItem::InlineFragment(mut i) => {
                let on = i.type_condition.clone();
                splice(&mut i.selections, &on, state);
                items.push(SelectionItem::InlineFragment(i));
            }
            SelectionItem::Field(mut f) => {
                if !f.selections.items.is_empty() {
                    let child = if f.name == "_entities" {
                        Some("_Entity".to_string())
                    } else {
                        state
                            .field_return_type_name(ty, &f.name)
                            .map(str::to_string)
                    };
                    if let Some(child) = child {
                        splice(&mut f.selections, &child, state);
                    }
                }
                items.push(SelectionItem::Field(f));
            }
            spread => items.push(spread),
        }
    }
    set.items = items;
}

/// Add a plain `__typename` to every selection of `set` (of objects of type `ty`)
/// that needs one for its answer to be read:
/// - an interface or union selection that asks `__typename` only under an alias: the
///   planner takes an aliased `__typename` for the one it would add, so without this
///   a subgraph's answer would name no concrete type the response writer can read;
/// - a selection that asks no field whatever the variables (every item is under
///   `@skip`/`@include`, or a fragment of such, or emptied by `@skip(if: true)`):
///   when they are all skipped, the answer is still `{}` or `null` as the subgraph
///   says, so the object must be fetched, and the planner would otherwise put the
///   whole fetch under the condition (or fail to plan it at all).
///
/// `set` is the operation's root selection: the gateway answers an empty root itself
/// (`{}`), so the root never gets a `__typename` it would send a subgraph for nothing.
pub fn plain_typenames(set: &mut SelectionSet, ty: &str, state: &SupergraphState) {
    plain_typenames_at(set, ty, state, true)
}

fn plain_typenames_at(set: &mut SelectionSet, ty: &str, state: &SupergraphState, root: bool) {
    use hive_router_query_planner::state::supergraph_state::SupergraphDefinition as D;
    let is_abstract = matches!(
        state.definitions.get(ty),
        Some(D::Interface(_) | D::Union(_))
    );
    let aliased = set.items.iter().any(
        |i| matches!(i, SelectionItem::Field(f) if f.name == "__typename" && f.alias.is_some()),
    );
    if (is_abstract && aliased) || (!root && !asks_a_field_always(set)) {
        typename(set);
    }
    for item in &mut set.items {
        match item {
            SelectionItem::Field(f) if !f.selections.items.is_empty() => {
                if let Some(child) = state.field_return_type_name(ty, &f.name) {
                    let child = child.to_string();
                    plain_typenames_at(&mut f.selections, &child, state, false);
                }
            }
            SelectionItem::InlineFragment(i) => {
                let on = i.type_condition.clone();
                plain_typenames_at(&mut i.selections, &on, state, root);
            }
            _ => {}
        }
    }
}

/// Whether `set` asks some field whatever the variables: one without `@skip` or
/// `@include`, at its level or in a fragment without them. (A fragment's type
/// condition may not hold, but an abstract selection gets its `__typename` from the
/// planner anyway.)
fn asks_a_field_always(set: &SelectionSet) -> bool {
    set.items.iter().any(|i| match i {
        SelectionItem::Field(f) => f.skip_if.is_none() && f.include_if.is_none(),
        SelectionItem::InlineFragment(f) => {
            f.skip_if.is_none() && f.include_if.is_none() && asks_a_field_always(&f.selections)
        }
        _ => false,
    })
}

/// Add `__typename` to `set` unless it is there.
pub(super) fn typename(set: &mut SelectionSet) {
    let present = set.items.iter().any(
        |i| matches!(i, SelectionItem::Field(f) if f.name == "__typename" && f.alias.is_none()),
    );
    if !present {
        set.items
            .insert(0, SelectionItem::Field(FieldSelection::new_typename()));
    }
}
