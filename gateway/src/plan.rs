//! Planning: which part of a client's selection each subgraph is asked for.
//!
//! The planner works on the client's parsed document (fragments flattened, `@skip` and
//! `@include` applied, variables inlined as literals). For a field that subgraph `S`
//! resolves, it renders the whole sub-selection `S` can answer in the same request.
//! Where the selection needs a field that `S` cannot resolve, it stops there and asks
//! `S` only for the entity's key fields, under reserved aliases; the missing fields are
//! fetched later from their owner through `_entities`, batched per level
//! ([`crate::batch`]). A selection that needs nothing `S` lacks costs no extra trip:
//! `author { id }` is answered from the key that `S` already returned.
//!
//! [`ObjectPlan`] is the per-object half: for an object of type `T` that came from
//! subgraph `S` with a given selection set, which `_entities` fetches (subgraph and
//! selection text) cover what `S` did not return. One plan is shared by every item of
//! a list.

use std::fmt::Write;
use std::sync::Arc;

use std::collections::HashMap;

use async_graphql::context::QueryEnv;
use async_graphql::Variables;
use async_graphql_parser::types::{
    Directive, Field, FragmentDefinition, OperationDefinition, Selection, SelectionSet,
};
use async_graphql_parser::Positioned;
use async_graphql_value::{ConstValue, Name, Value};

use crate::supergraph::{base_name, SubgraphId, Supergraph, KEY_ALIAS_PREFIX};

/// What is still to be fetched for objects of one type, from one source, with one selection.
#[derive(Debug)]
pub struct ObjectPlan {
    pub type_name: String,
    /// The subgraph whose response holds the object's data.
    pub source: SubgraphId,
    pub fetches: Vec<EntityFetch>,
}

/// One `_entities` fetch: the owner to ask, the key it accepts and the selection to send.
#[derive(Debug)]
pub struct EntityFetch {
    /// `Type.field` (or `Type.a+b` when one fetch covers several fields): the cache namespace.
    pub namespace: Arc<str>,
    pub subgraph: SubgraphId,
    pub key: Vec<String>,
    /// `... on T { … }`, the selection inside `_entities(representations: $r)`.
    pub selection: Arc<str>,
}

impl ObjectPlan {
    pub fn fetch_for(&self, subgraph: SubgraphId) -> Option<&EntityFetch> {
        self.fetches.iter().find(|f| f.subgraph == subgraph)
    }
}

/// The parts of a client document that decide which fields are selected: its
/// fragments, and the variables `@skip`/`@include` and arguments refer to.
#[derive(Clone, Copy)]
pub struct DocumentView<'a> {
    pub fragments: &'a HashMap<Name, Positioned<FragmentDefinition>>,
    pub variables: &'a Variables,
    pub operation: &'a OperationDefinition,
}

impl<'a> DocumentView<'a> {
    pub fn from_env(env: &'a QueryEnv) -> Self {
        DocumentView {
            fragments: &env.fragments,
            variables: &env.variables,
            operation: &env.operation.node,
        }
    }

    /// The value of a variable: as sent, else the operation's default, else null.
    fn variable(&self, name: &Name) -> ConstValue {
        if let Some(v) = self.variables.get(name) {
            return v.clone();
        }
        self.operation
            .variable_definitions
            .iter()
            .find(|d| &d.node.name.node == name)
            .and_then(|d| d.node.default_value().cloned())
            .unwrap_or(ConstValue::Null)
    }

    pub fn constant(&self, value: &Value) -> ConstValue {
        value
            .clone()
            .into_const_with(|name| Ok::<_, std::convert::Infallible>(self.variable(&name)))
            .unwrap_or(ConstValue::Null)
    }

    fn skipped(&self, directives: &[Positioned<Directive>]) -> bool {
        directives.iter().any(|d| {
            let condition = || d.node.get_argument("if").map(|v| self.constant(&v.node));
            match d.node.name.node.as_str() {
                "skip" => matches!(condition(), Some(ConstValue::Boolean(true))),
                "include" => matches!(condition(), Some(ConstValue::Boolean(false))),
                _ => false,
            }
        })
    }

    /// The fields of `set` that apply to an object of type `ty` (any type when
    /// `None`), fragments flattened and `@skip`/`@include` applied. Validation has
    /// already rejected fragment cycles, so the recursion ends.
    pub fn collect_fields<'d>(
        &self,
        ty: Option<&str>,
        set: &'d SelectionSet,
        out: &mut Vec<&'d Field>,
    ) where
        'a: 'd,
    {
        let applies = |on: &Name| ty.is_none_or(|t| on == t);
        for selection in &set.items {
            match &selection.node {
                Selection::Field(f) => {
                    if !self.skipped(&f.node.directives) {
                        out.push(&f.node);
                    }
                }
                Selection::FragmentSpread(spread) => {
                    if self.skipped(&spread.node.directives) {
                        continue;
                    }
                    if let Some(fragment) = self.fragments.get(&spread.node.fragment_name.node) {
                        if applies(&fragment.node.type_condition.node.on.node) {
                            self.collect_fields(ty, &fragment.node.selection_set.node, out);
                        }
                    }
                }
                Selection::InlineFragment(inline) => {
                    if self.skipped(&inline.node.directives) {
                        continue;
                    }
                    if inline
                        .node
                        .type_condition
                        .as_ref()
                        .is_none_or(|c| applies(&c.node.on.node))
                    {
                        self.collect_fields(ty, &inline.node.selection_set.node, out);
                    }
                }
            }
        }
    }
}

/// Renders subgraph selections for one client request.
pub struct Planner<'a> {
    pub supergraph: &'a Supergraph,
    doc: DocumentView<'a>,
}

impl<'a> Planner<'a> {
    pub fn new(supergraph: &'a Supergraph, env: &'a QueryEnv) -> Self {
        Planner {
            supergraph,
            doc: DocumentView::from_env(env),
        }
    }

    fn collect_fields<'d>(&self, ty: &str, set: &'d SelectionSet, out: &mut Vec<&'d Field>)
    where
        'a: 'd,
    {
        self.doc.collect_fields(Some(ty), set, out)
    }

    /// Append `alias: name(args) { … }` for subgraph `s`, where `field` belongs to
    /// `parent_ty`. Returns where the sub-selection (`{ … }`) starts in `out`.
    pub fn render_field(
        &self,
        out: &mut String,
        s: SubgraphId,
        parent_ty: &str,
        field: &Field,
    ) -> usize {
        let name = field.name.node.as_str();
        if let Some(alias) = &field.alias {
            if alias.node != field.name.node {
                let _ = write!(out, "{}:", alias.node);
            }
        }
        out.push_str(name);
        if !field.arguments.is_empty() {
            out.push('(');
            for (i, (arg, value)) in field.arguments.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{}:{}", arg.node, self.doc.constant(&value.node));
            }
            out.push(')');
        }
        let selection_start = out.len();
        let Some(def) = self.supergraph.field(parent_ty, name) else {
            return selection_start;
        };
        let ty = base_name(&def.ty);
        if self.supergraph.is_composite(ty) {
            out.push('{');
            self.render_selection(out, s, ty, &field.selection_set.node);
            out.push('}');
        }
        selection_start
    }

    /// Append what subgraph `s` can answer of `set` on type `ty`, plus the keys that
    /// other subgraphs need to resolve the rest.
    fn render_selection(&self, out: &mut String, s: SubgraphId, ty: &str, set: &SelectionSet) {
        let Some(object) = self.supergraph.object(ty) else {
            return;
        };
        let mut fields = Vec::new();
        self.collect_fields(ty, set, &mut fields);
        let start = out.len();
        let mut key_owners: Vec<SubgraphId> = Vec::new();
        for field in fields {
            let name = field.name.node.as_str();
            let Some(def) = object.fields.get(name) else {
                continue;
            };
            if def.is_owned_by(s) {
                if out.len() > start {
                    out.push(' ');
                }
                self.render_field(out, s, ty, field);
            } else {
                let owner = def.owner_for(s);
                if !key_owners.contains(&owner) {
                    key_owners.push(owner);
                }
            }
        }
        // The keys other subgraphs need for the rest, and this object's own identity
        // (its `__typename` and `s`'s key), from which cache entries take references.
        if object.key_for(s).is_some() {
            key_owners.push(s);
        }
        render_keys(out, object, &key_owners);
        if out.len() == start {
            // Only `__typename` (answered by the gateway) was asked for: a selection
            // may not be empty, so ask for something free.
            out.push_str("__typename");
        }
    }

    /// The plan for objects of type `ty` that subgraph `source` returned for `set`.
    pub fn object_plan(&self, ty: &str, source: SubgraphId, set: &SelectionSet) -> Arc<ObjectPlan> {
        let mut plan = ObjectPlan {
            type_name: ty.to_string(),
            source,
            fetches: Vec::new(),
        };
        let Some(object) = self.supergraph.object(ty) else {
            return Arc::new(plan);
        };
        let mut fields = Vec::new();
        self.collect_fields(ty, set, &mut fields);
        let mut by_owner: Vec<(SubgraphId, Vec<&Field>)> = Vec::new();
        for field in fields {
            let Some(def) = object.fields.get(field.name.node.as_str()) else {
                continue;
            };
            if def.is_owned_by(source) {
                continue;
            }
            let owner = def.owner_for(source);
            match by_owner.iter_mut().find(|(o, _)| *o == owner) {
                Some((_, list)) => list.push(field),
                None => by_owner.push((owner, vec![field])),
            }
        }
        for (owner, fields) in by_owner {
            let mut selection = format!("...on {ty}{{");
            let mut namespace = format!("{ty}.");
            for (i, field) in fields.iter().enumerate() {
                if i > 0 {
                    namespace.push('+');
                }
                namespace.push_str(field.name.node.as_str());
            }
            for (i, field) in fields.into_iter().enumerate() {
                if i > 0 {
                    selection.push(' ');
                }
                self.render_field(&mut selection, owner, ty, field);
            }
            render_keys(&mut selection, object, &[owner]);
            selection.push('}');
            let key = object.key_for(owner).unwrap_or_default().to_vec();
            plan.fetches.push(EntityFetch {
                namespace: namespace.into(),
                subgraph: owner,
                key,
                selection: selection.into(),
            });
        }
        Arc::new(plan)
    }
}

/// Append ` __typename` and, under reserved aliases, the key fields that `owners`
/// accept for `object` (each once).
fn render_keys(out: &mut String, object: &crate::supergraph::ObjectDef, owners: &[SubgraphId]) {
    if owners.is_empty() {
        return;
    }
    out.push_str(" __typename");
    let mut written: Vec<&str> = Vec::new();
    for &owner in owners {
        for key in object.key_for(owner).unwrap_or_default() {
            if !written.contains(&key.as_str()) {
                written.push(key);
                let _ = write!(out, " {KEY_ALIAS_PREFIX}{key}:{key}");
            }
        }
    }
}
