//! References in answers: with a cache, every object of an entity type in a
//! subgraph answer is asked for its `__typename` and its key fields under reserved
//! `_gw_k_*` aliases ([`add_reference_keys`]), so that each cache entry can name the
//! entities it holds (`User:u1`) and a mutation's answer the entities it touched.
//! [`ReferenceKeys`] says which key to ask of which subgraph, parsed once per type
//! and subgraph; under an interface or union the aliases are asked per concrete type.

use std::collections::HashMap;

use hive_router_query_planner::ast::document::Document;
use hive_router_query_planner::ast::selection_item::SelectionItem;
use hive_router_query_planner::ast::selection_set::{
    FieldSelection, InlineFragmentSelection, SelectionSet,
};
use hive_router_query_planner::state::supergraph_state::SupergraphState;

use super::operation::typename;
use crate::supergraph::{SubgraphId, Supergraph, KEY_ALIAS_PREFIX};

/// The key fields to ask of subgraph objects, per (type, subgraph), parsed once.
///
/// One key per entity type names its references everywhere: the first key the
/// supergraph declares for the type (its *canonical* key), so that an entry one
/// subgraph's answer filled and a mutation another subgraph answered name the entity
/// alike. A subgraph is asked for it only where it resolves every one of its fields
/// itself (not `@external` there): an answer of a subgraph that cannot gives its
/// objects no reference, which costs freshness until the entry's TTL, never an error.
pub struct ReferenceKeys<'a> {
    supergraph: &'a Supergraph,
    state: &'a SupergraphState,
    /// Per subgraph, its id in the supergraph's `join__Graph`.
    graphs: Vec<Option<String>>,
    parsed: HashMap<(String, SubgraphId), Option<SelectionSet>>,
}

impl<'a> ReferenceKeys<'a> {
    pub fn new(supergraph: &'a Supergraph, state: &'a SupergraphState) -> ReferenceKeys<'a> {
        let graphs = supergraph
            .subgraphs
            .iter()
            .map(|sg| {
                state
                    .known_subgraphs
                    .iter()
                    .find_map(|(id, name)| (*name == sg.name).then(|| id.clone()))
            })
            .collect();
        ReferenceKeys {
            supergraph,
            state,
            graphs,
            parsed: HashMap::new(),
        }
    }

    /// The canonical key of `ty`, when `subgraph` resolves all its fields.
    fn key(&mut self, ty: &str, subgraph: SubgraphId) -> Option<SelectionSet> {
        if let Some(known) = self.parsed.get(&(ty.to_string(), subgraph)) {
            return known.clone();
        }
        let key = self
            .canonical(ty)
            .filter(|key| self.resolves_all(ty, key, subgraph));
        self.parsed.insert((ty.to_string(), subgraph), key.clone());
        key
    }

    /// The first key the supergraph declares for `ty`, parsed.
    fn canonical(&self, ty: &str) -> Option<SelectionSet> {
        use hive_router_query_planner::state::supergraph_state::SupergraphDefinition as D;
        let join_types = match self.state.definitions.get(ty)? {
            D::Object(o) => &o.join_type,
            D::Interface(i) => &i.join_type,
            _ => return None,
        };
        let fields = join_types.iter().find_map(|jt| jt.key.as_deref())?;
        let doc = graphql_tools::parser::parse_query::<String>(&format!("{{{fields}}}"))
            .ok()?
            .into_static();
        doc.definitions.into_iter().find_map(|d| match d {
            graphql_tools::parser::query::Definition::Operation(
                graphql_tools::parser::query::OperationDefinition::SelectionSet(set),
            ) => Some(SelectionSet::from(set)),
            _ => None,
        })
    }

    /// The field `field` of `ty` as `subgraph` has it.
    fn in_subgraph(&self, ty: &str, field: &str, subgraph: SubgraphId) -> InSubgraph {
        let Some(graph) = self.graphs.get(subgraph).and_then(Option::as_deref) else {
            return InSubgraph::Absent;
        };
        let Some(def) = self.state.definitions.get(ty) else {
            return InSubgraph::Absent;
        };
        let Some(f) = def.fields().get(field) else {
            return InSubgraph::Absent;
        };
        if f.join_field.is_empty() {
            // No join directive: every subgraph of the type resolves it.
            return if def.is_defined_in_subgraph(graph) {
                InSubgraph::Resolved { own_type: None }
            } else {
                InSubgraph::Absent
            };
        }
        match f
            .join_field
            .iter()
            .find(|jf| jf.graph_id.as_deref() == Some(graph))
        {
            Some(jf) if jf.external => InSubgraph::External,
            Some(jf) => InSubgraph::Resolved {
                own_type: jf
                    .type_in_graph
                    .as_ref()
                    .map(|t| t.inner_type().to_string()),
            },
            None => InSubgraph::Absent,
        }
    }

    /// Whether `subgraph` resolves every field of `set` (on objects of type `ty`),
    /// nested ones included.
    fn resolves_all(&self, ty: &str, set: &SelectionSet, subgraph: SubgraphId) -> bool {
        set.items.iter().all(|item| match item {
            SelectionItem::Field(f) => {
                self.resolves(ty, &f.name, subgraph)
                    && (f.selections.items.is_empty()
                        || self.field_type(ty, &f.name, subgraph).is_some_and(|child| {
                            self.resolves_all(&child, &f.selections, subgraph)
                        }))
            }
            _ => false,
        })
    }

    /// Whether `subgraph` resolves field `field` of `ty` itself.
    fn resolves(&self, ty: &str, field: &str, subgraph: SubgraphId) -> bool {
        matches!(
            self.in_subgraph(ty, field, subgraph),
            InSubgraph::Resolved { .. }
        )
    }

    /// The type of field `field` of `ty` in `subgraph`'s own schema (a subgraph may
    /// declare a field with a narrower type than the supergraph's).
    fn field_type(&self, ty: &str, field: &str, subgraph: SubgraphId) -> Option<String> {
        if let InSubgraph::Resolved {
            own_type: Some(own),
        } = self.in_subgraph(ty, field, subgraph)
        {
            return Some(own);
        }
        self.state
            .field_return_type_name(ty, field)
            .map(str::to_string)
    }

    fn is_abstract(&self, ty: &str) -> bool {
        use hive_router_query_planner::state::supergraph_state::SupergraphDefinition as D;
        matches!(
            self.state.definitions.get(ty),
            Some(D::Interface(_) | D::Union(_))
        )
    }

    /// Object types a value of abstract `ty` may be in `subgraph`'s own schema (a
    /// subgraph may declare a union with fewer members, or an interface with fewer
    /// implementations, than the supergraph: a fragment on another type would not
    /// validate there).
    fn possible(&self, ty: &str, subgraph: SubgraphId) -> Vec<String> {
        use hive_router_query_planner::state::supergraph_state::SupergraphDefinition as D;
        let Some(graph) = self.graphs.get(subgraph).and_then(Option::as_deref) else {
            return Vec::new();
        };
        match self.state.definitions.get(ty) {
            Some(D::Union(u)) => {
                let mut members: Vec<String> =
                    u.relevant_types(graph).into_iter().cloned().collect();
                members.sort();
                members
            }
            Some(D::Interface(_)) => self
                .supergraph
                .possible_types(ty)
                .iter()
                .filter(|t| match self.state.definitions.get(t.as_str()) {
                    Some(D::Object(o)) => o
                        .join_implements
                        .iter()
                        .any(|j| j.graph_id == graph && j.interface == ty),
                    _ => false,
                })
                .cloned()
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// How a subgraph has a field.
enum InSubgraph {
    /// It resolves it, with this named type when its own differs from the
    /// supergraph's.
    Resolved { own_type: Option<String> },
    /// It names it `@external`: another subgraph resolves it.
    External,
    /// It has no such field.
    Absent,
}

/// Ask every entity in `doc`'s answer (sent to `subgraph`, its root of type
/// `root_type`) for its `__typename` and key fields under reserved aliases.
pub fn add_reference_keys(
    doc: &mut Document,
    root_type: &str,
    subgraph: SubgraphId,
    keys: &mut ReferenceKeys<'_>,
) {
    for item in &mut doc.operation.selection_set.items {
        if let SelectionItem::Field(f) = item {
            if f.name == "_entities" {
                // Each `...on T` is a position of type T: the entity itself is asked
                // for its keys too, so that its entry names it (`Product:<upc>`) and
                // a mutation of it drops the entry, whichever way it was reached.
                for item in &mut f.selections.items {
                    if let SelectionItem::InlineFragment(i) = item {
                        let ty = i.type_condition.clone();
                        if let Some(key) = keys.key(&ty, subgraph) {
                            add_keys(&mut i.selections, &key, None);
                        }
                        beneath(&mut i.selections, &ty, subgraph, keys);
                    }
                }
                continue;
            }
            if let Some(ty) = keys.field_type(root_type, &f.name, subgraph) {
                position(&mut f.selections, &ty, subgraph, keys);
            }
        }
    }
    for fragment in &mut doc.fragments {
        let ty = fragment.type_condition.clone();
        beneath(&mut fragment.selection_set, &ty, subgraph, keys);
    }
}

/// A position of type `ty`: its own keys, then those of the objects beneath it.
fn position(set: &mut SelectionSet, ty: &str, subgraph: SubgraphId, keys: &mut ReferenceKeys<'_>) {
    if set.items.is_empty() {
        return; // a leaf
    }
    if let Some(key) = keys.key(ty, subgraph) {
        add_keys(set, &key, None);
    } else if keys.is_abstract(ty) {
        let mut fragments = Vec::new();
        for concrete in keys.possible(ty, subgraph) {
            if let Some(key) = keys.key(&concrete, subgraph) {
                let mut inner = SelectionSet { items: Vec::new() };
                add_keys(&mut inner, &key, Some(&concrete));
                fragments.push(SelectionItem::InlineFragment(InlineFragmentSelection {
                    type_condition: concrete,
                    selections: inner,
                    skip_if: None,
                    include_if: None,
                }));
            }
        }
        if !fragments.is_empty() {
            typename(set);
            set.items.extend(fragments);
        }
    }
    beneath(set, ty, subgraph, keys);
}

/// The positions beneath the fields of `set` (whose objects are of type `ty`).
fn beneath(set: &mut SelectionSet, ty: &str, subgraph: SubgraphId, keys: &mut ReferenceKeys<'_>) {
    for item in &mut set.items {
        match item {
            SelectionItem::Field(f) if !f.selections.items.is_empty() => {
                if let Some(child) = keys.field_type(ty, &f.name, subgraph) {
                    position(&mut f.selections, &child, subgraph, keys);
                }
            }
            SelectionItem::InlineFragment(i) => {
                let on = i.type_condition.clone();
                beneath(&mut i.selections, &on, subgraph, keys);
            }
            _ => {}
        }
    }
}

/// Add `__typename` and `key`'s fields under reserved aliases (per concrete type
/// when `concrete` names one).
fn add_keys(set: &mut SelectionSet, key: &SelectionSet, concrete: Option<&str>) {
    typename(set);
    for item in &key.items {
        if let SelectionItem::Field(k) = item {
            let alias = match concrete {
                Some(t) => format!("{KEY_ALIAS_PREFIX}{t}__{}", k.name),
                None => format!("{KEY_ALIAS_PREFIX}{}", k.name),
            };
            let present = set.items.iter().any(
                |i| matches!(i, SelectionItem::Field(f) if f.alias.as_deref() == Some(&alias)),
            );
            if !present {
                set.items.push(SelectionItem::Field(FieldSelection {
                    name: k.name.clone(),
                    alias: Some(alias),
                    selections: k.selections.clone(),
                    ..Default::default()
                }));
            }
        }
    }
}
