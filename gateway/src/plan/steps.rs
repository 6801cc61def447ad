//! The planner's plan nodes as the gateway's [`Step`]s and [`Fetch`]es.
//!
//! [`Builder::node`] maps each node of a Hive/Apollo query plan onto a step
//! (sequence, parallel group, condition, fetch) and each fetch onto a [`Fetch`]: the
//! request text printed once (with the reference keys the resolver cache needs), the
//! cache's key parts (namespace, arguments, selection), and where the answer goes
//! (the root, or an entity fetch's groups and their paths). A mutation's root fields
//! run one after another, each with all it selects.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use async_graphql_value::{Name, Number, Value};
use hive_router_query_planner::ast::document::Document;
use hive_router_query_planner::ast::selection_item::SelectionItem;
use hive_router_query_planner::ast::selection_set::{FieldSelection, SelectionSet};
use hive_router_query_planner::ast::value::Value as HiveValue;
use hive_router_query_planner::planner::plan_nodes::{FetchNode, FlattenNodePathSegment, PlanNode};

use super::operation::{split_roots, without_fragments};
use super::references::{add_reference_keys, ReferenceKeys};
use super::{EntityGroup, Fetch, FetchId, FetchKind, PathSegment, PlanError, RootFetch, Step};
use crate::supergraph::{SubgraphId, Supergraph};

/// What [`Builder::node`] needs while it maps a plan: the graph, the planner's view of
/// it, the reference keys to add (when answers must carry them), and the fetches so
/// far (a step names its fetch by index).
pub(super) struct Builder<'a> {
    supergraph: &'a Supergraph,
    /// The planner's view of the supergraph (every type, `@inaccessible` ones too).
    state: &'a hive_router_query_planner::state::supergraph_state::SupergraphState,
    references: Option<ReferenceKeys<'a>>,
    pub(super) fetches: Vec<Fetch>,
}

impl<'a> Builder<'a> {
    pub(super) fn new(
        supergraph: &'a Supergraph,
        state: &'a hive_router_query_planner::state::supergraph_state::SupergraphState,
        references: Option<ReferenceKeys<'a>>,
    ) -> Builder<'a> {
        Builder {
            supergraph,
            state,
            references,
            fetches: Vec::new(),
        }
    }

    /// The step for `node` and everything under it; its fetches go to `fetches`.
    pub(super) fn node(&mut self, node: &PlanNode) -> Result<Step, PlanError> {
        Ok(match node {
            PlanNode::Sequence(s) => group(
                s.nodes
                    .iter()
                    .map(|n| self.node(n))
                    .collect::<Result<_, _>>()?,
                Step::Sequence,
            ),
            PlanNode::Parallel(p) => {
                let steps = p
                    .nodes
                    .iter()
                    .map(|n| self.node(n))
                    .collect::<Result<_, _>>()?;
                self.mutations_last(steps)
            }
            PlanNode::Condition(c) => Step::Condition {
                variable: Name::new(&c.condition),
                then: match &c.if_clause {
                    Some(n) => Some(Box::new(self.node(n)?)),
                    None => None,
                },
                otherwise: match &c.else_clause {
                    Some(n) => Some(Box::new(self.node(n)?)),
                    None => None,
                },
            },
            PlanNode::Fetch(f) => self.root_fetches(f, None)?,
            PlanNode::Flatten(flatten) => {
                let PlanNode::Fetch(f) = flatten.node.as_ref() else {
                    return Err(PlanError("a flatten node that holds no fetch".into()));
                };
                let path = path(flatten.path.as_slice());
                match &f.requires {
                    Some(requires) => self.entity_fetch(
                        &f.service_name,
                        &f.operation.document,
                        vec![Group {
                            alias: None,
                            variable: None,
                            paths: vec![path],
                            requires: requires.items.clone(),
                            input_rewrites: f.input_rewrites.clone().unwrap_or_default(),
                            output_rewrites: f.output_rewrites.clone().unwrap_or_default(),
                        }],
                    )?,
                    None => self.root_fetches(f, Some(path))?,
                }
            }
            PlanNode::BatchFetch(b) => {
                let groups = b
                    .entity_batch
                    .aliases
                    .iter()
                    .map(|a| Group {
                        alias: Some(a.alias.clone()),
                        variable: Some(a.representations_variable_name.clone()),
                        paths: a.merge_paths.iter().map(|p| path(p.as_slice())).collect(),
                        requires: a.requires.items.clone(),
                        input_rewrites: a.input_rewrites.clone().unwrap_or_default(),
                        output_rewrites: a.output_rewrites.clone().unwrap_or_default(),
                    })
                    .collect();
                self.entity_fetch(&b.service_name, &b.operation.document, groups)?
            }
            PlanNode::Subscription(_) => {
                return Err(PlanError("subscriptions are not supported".into()))
            }
            PlanNode::Defer(_) => return Err(PlanError("@defer is not supported".into())),
        })
    }

    /// A parallel group, unless one of its steps runs a mutation's root field: the
    /// planner may put the next root field of a mutation beside the entity fetches of
    /// the one before (`Parallel { Fetch(second), Flatten(first.history) }`), and a
    /// mutation's root fields run one after another, each with all it selects. Then
    /// the rest run first (in parallel), and the mutating steps after, in order.
    fn mutations_last(&self, steps: Vec<Step>) -> Step {
        let (mutating, rest): (Vec<Step>, Vec<Step>) =
            steps.into_iter().partition(|s| self.mutates(s));
        if mutating.is_empty() {
            return group(rest, Step::Parallel);
        }
        let mut ordered = Vec::with_capacity(mutating.len() + 1);
        if !rest.is_empty() {
            ordered.push(group(rest, Step::Parallel));
        }
        ordered.extend(mutating);
        group(ordered, Step::Sequence)
    }

    /// Whether `step` sends a mutation.
    fn mutates(&self, step: &Step) -> bool {
        match step {
            Step::Fetch(id) => self.fetches[*id as usize].mutation,
            Step::Sequence(steps) | Step::Parallel(steps) => steps.iter().any(|s| self.mutates(s)),
            Step::Condition {
                then, otherwise, ..
            } => [then, otherwise]
                .into_iter()
                .flatten()
                .any(|s| self.mutates(s)),
        }
    }

    fn subgraph(&self, name: &str) -> Result<SubgraphId, PlanError> {
        self.supergraph
            .subgraph_id(name)
            .ok_or_else(|| PlanError(format!("the plan names an unknown subgraph {name}")))
    }

    fn push(&mut self, fetch: Fetch) -> Step {
        self.fetches.push(fetch);
        Step::Fetch((self.fetches.len() - 1) as FetchId)
    }

    /// A root fetch: one request per root field (in order for a mutation), merged
    /// at the root or, with `at`, into every object there.
    fn root_fetches(
        &mut self,
        f: &FetchNode,
        at: Option<Vec<PathSegment>>,
    ) -> Result<Step, PlanError> {
        let subgraph = self.subgraph(&f.service_name)?;
        let mutation = f.operation_kind.as_ref().is_some_and(|k| k.is_mutation());
        let root_type = if mutation {
            self.supergraph.mutation_type.clone().unwrap_or_default()
        } else {
            self.supergraph.query_type.clone()
        };
        let mut doc = f.operation.document.clone();
        without_fragments(&mut doc, &root_type, self.state);
        let parts = match at {
            Some(_) => vec![doc],
            None => split_roots(&doc).unwrap_or_else(|| vec![doc.clone()]),
        };
        let mut steps = Vec::with_capacity(parts.len());
        for mut part in parts {
            if let Some(keys) = &mut self.references {
                add_reference_keys(&mut part, &root_type, subgraph, keys);
            }
            let fields: Vec<&FieldSelection> = part
                .operation
                .selection_set
                .items
                .iter()
                .filter_map(|i| match i {
                    SelectionItem::Field(f) => Some(f),
                    _ => None,
                })
                .collect();
            let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
            let namespace: Arc<str> = format!("{root_type}.{}", names.join("+")).into();
            let keys = fields
                .iter()
                .map(|f| f.selection_identifier().into())
                .collect();
            let (selection, args) = match fields.as_slice() {
                // The field as sent, alias included: the piece is the answer's `data`,
                // where the field stands under its response key.
                [one] => (
                    with_fragments(&one.to_string(), &part),
                    one.arguments()
                        .map(|a| {
                            a.into_iter()
                                .map(|(k, v)| (Name::new(k), value(v)))
                                .collect()
                        })
                        .unwrap_or_default(),
                ),
                _ => (
                    with_fragments(&part.operation.selection_set.to_string(), &part),
                    Vec::new(),
                ),
            };
            let fetch = self.fetch(
                subgraph,
                mutation,
                &part,
                &[],
                FetchKind::Root(RootFetch {
                    namespace,
                    keys,
                    selection: selection.into(),
                    args,
                    at: at.clone(),
                    output_rewrites: f.output_rewrites.clone().unwrap_or_default(),
                    constant_key: OnceLock::new(),
                }),
            );
            steps.push(self.push(fetch));
        }
        Ok(group(
            steps,
            if mutation {
                Step::Sequence
            } else {
                Step::Parallel
            },
        ))
    }

    /// An entity fetch: one aliased `_entities` field per group.
    fn entity_fetch(
        &mut self,
        service: &str,
        doc: &Document,
        groups: Vec<Group>,
    ) -> Result<Step, PlanError> {
        let subgraph = self.subgraph(service)?;
        let mut doc = doc.clone();
        let query_type = self.supergraph.query_type.clone();
        without_fragments(&mut doc, &query_type, self.state);
        if let Some(keys) = &mut self.references {
            let query_type = self.supergraph.query_type.clone();
            add_reference_keys(&mut doc, &query_type, subgraph, keys);
        }
        let mut out = Vec::with_capacity(groups.len());
        let mut representation_variables = Vec::with_capacity(groups.len());
        for g in groups {
            let field = doc
                .operation
                .selection_set
                .items
                .iter()
                .find_map(|i| match i {
                    SelectionItem::Field(f)
                        if f.name == "_entities"
                            && g.alias
                                .as_deref()
                                .is_none_or(|a| f.selection_identifier() == a) =>
                    {
                        Some(f)
                    }
                    _ => None,
                })
                .ok_or_else(|| PlanError("an entity fetch without its _entities field".into()))?;
            let variable = match g.variable {
                Some(v) => v,
                None => field
                    .representations_variable_name()
                    .unwrap_or("representations")
                    .to_string(),
            };
            representation_variables.push(variable.clone());
            out.push(EntityGroup {
                alias: field.selection_identifier().into(),
                variable: variable.into(),
                paths: g.paths,
                requires: g.requires,
                input_rewrites: g.input_rewrites,
                output_rewrites: g.output_rewrites,
                namespaces: namespaces(&field.selections, &doc),
                selection: with_fragments(&field.selections.to_string(), &doc).into(),
            });
        }
        if out.iter().any(|g| g.namespaces.is_empty()) {
            return Err(PlanError(
                "an entity fetch that asks for no type's fields".into(),
            ));
        }
        let fetch = self.fetch(
            subgraph,
            false,
            &doc,
            &representation_variables,
            FetchKind::Entities(out),
        );
        Ok(self.push(fetch))
    }

    /// The request of `doc` to `subgraph`; its client variables are those it
    /// declares, less the representations'.
    fn fetch(
        &self,
        subgraph: SubgraphId,
        mutation: bool,
        doc: &Document,
        representations: &[String],
        kind: FetchKind,
    ) -> Fetch {
        let query: Arc<str> = doc.to_string().into();
        let variables: Vec<Name> = doc
            .operation
            .variable_definitions
            .iter()
            .flatten()
            .filter(|d| !representations.contains(&d.name))
            .map(|d| Name::new(&d.name))
            .collect();
        let body = if variables.is_empty() && representations.is_empty() {
            crate::upstream::request_body(&query, 0, None)
        } else {
            bytes::Bytes::new()
        };
        Fetch {
            subgraph,
            mutation,
            query,
            variables,
            kind,
            body,
            room: Default::default(),
        }
    }
}

/// A group of the planner's, before its `_entities` field is found.
struct Group {
    alias: Option<String>,
    variable: Option<String>,
    paths: Vec<Vec<PathSegment>>,
    requires: Vec<SelectionItem>,
    input_rewrites: Vec<hive_router_query_planner::planner::plan_nodes::FetchRewrite>,
    output_rewrites: Vec<hive_router_query_planner::planner::plan_nodes::FetchRewrite>,
}

/// One step for `steps`: the step itself when there is one.
fn group(mut steps: Vec<Step>, wrap: fn(Vec<Step>) -> Step) -> Step {
    if steps.len() == 1 {
        steps.pop().expect("one step")
    } else {
        wrap(steps)
    }
}

fn path(segments: &[FlattenNodePathSegment]) -> Vec<PathSegment> {
    segments
        .iter()
        .map(|s| match s {
            FlattenNodePathSegment::Field(f) => {
                PathSegment::Field(f.as_str().into(), super::Sources::ALL, Default::default())
            }
            FlattenNodePathSegment::List => PathSegment::List,
            FlattenNodePathSegment::TypeCondition(types) => {
                PathSegment::Types(types.iter().cloned().collect())
            }
        })
        .collect()
}

/// The cache namespaces of an `_entities` selection: `Type.a+b` per `...on Type`.
fn namespaces(set: &SelectionSet, doc: &Document) -> Vec<(Box<str>, Arc<str>)> {
    let mut out: Vec<(Box<str>, Arc<str>)> = Vec::new();
    for item in &set.items {
        if let SelectionItem::InlineFragment(i) = item {
            let mut names = BTreeSet::new();
            let mut ordered = Vec::new();
            field_names(&i.selections, doc, &mut names, &mut ordered, 0);
            if ordered.is_empty() {
                ordered.push("__typename".to_string());
            }
            if !out.iter().any(|(t, _)| **t == *i.type_condition) {
                out.push((
                    i.type_condition.as_str().into(),
                    format!("{}.{}", i.type_condition, ordered.join("+")).into(),
                ));
            }
        }
    }
    out
}

fn field_names(
    set: &SelectionSet,
    doc: &Document,
    seen: &mut BTreeSet<String>,
    out: &mut Vec<String>,
    depth: usize,
) {
    for item in &set.items {
        match item {
            SelectionItem::Field(f) => {
                let own = f.name == "__typename"
                    || f.alias
                        .as_deref()
                        .is_some_and(|a| a.starts_with(crate::supergraph::KEY_ALIAS_PREFIX));
                if !own && seen.insert(f.name.clone()) {
                    out.push(f.name.clone());
                }
            }
            SelectionItem::InlineFragment(i) => field_names(&i.selections, doc, seen, out, depth),
            SelectionItem::FragmentSpread(name) if depth < 16 => {
                if let Some(fragment) = doc.fragments.iter().find(|f| &f.name == name) {
                    field_names(&fragment.selection_set, doc, seen, out, depth + 1);
                }
            }
            SelectionItem::FragmentSpread(_) => {}
        }
    }
}

/// A selection's text followed by the fragments of `doc` (a cache key must see
/// what the spreads stand for).
fn with_fragments(selection: &str, doc: &Document) -> String {
    let mut text = selection.to_string();
    for f in &doc.fragments {
        text.push(' ');
        text.push_str(&f.to_string());
    }
    text
}

/// A planner value as async-graphql's.
fn value(v: &HiveValue) -> Value {
    match v {
        HiveValue::Variable(n) => Value::Variable(Name::new(n)),
        HiveValue::Int(i) => Value::Number((*i).into()),
        HiveValue::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        HiveValue::String(s) => Value::String(s.clone()),
        HiveValue::Boolean(b) => Value::Boolean(*b),
        HiveValue::Null => Value::Null,
        HiveValue::Enum(e) => Value::Enum(Name::new(e)),
        HiveValue::List(items) => Value::List(items.iter().map(value).collect()),
        HiveValue::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (Name::new(k), value(v))).collect())
        }
    }
}
