//! Composition: the subgraphs' own SDL in, a supergraph SDL out.
//!
//! Each subgraph answers `_service { sdl }` with its own view of the graph.
//! Composition merges those views type by type, records for every field which
//! subgraphs can resolve it (its *owners*) and for every entity type which `@key`
//! each subgraph accepts in `_entities`, and writes the result as a supergraph in
//! the join spec (v0.3, with link v1.0): the same kind of file a standard composer
//! writes, so that `--subgraph NAME=URL` and `--supergraph FILE` reach the one
//! planner by the one reader ([`super::join`]). Both Federation 1 SDL (`extend
//! type`, `@extends`, `@external`) and Federation 2 SDL (plain `type … @key`) are
//! read.
//!
//! This is the lab's zero-configuration path for graphs of object, enum, input and
//! scalar types with one key per type and subgraph (its own graph among them);
//! graphs with interfaces, unions, `@requires` or `@provides` are composed by a
//! standard composer and given as a file. Composition fails, with every problem
//! listed, when the planner could not answer some query the public schema allows:
//! a field nobody resolves, a root field owned twice, conflicting field types, an
//! entity field that cannot be reached from a subgraph that returns the entity
//! because the two share no usable key, or a feature it does not compose. Those
//! checks are `checks`; reading and merging the subgraphs' SDL is here.

use std::collections::BTreeSet;
use std::fmt;

use async_graphql_parser::types::{
    ConstDirective, FieldDefinition, ServiceDocument, Type, TypeDefinition, TypeKind,
    TypeSystemDefinition,
};
use async_graphql_parser::Positioned;
use async_graphql_value::ConstValue;
use indexmap::IndexMap;

use super::{public::arg_def, ArgDef, Subgraph, SubgraphId};

mod checks;

/// The composed graph, as [`super::emit`] writes it.
#[derive(Debug)]
pub(super) struct Composed {
    pub types: IndexMap<String, TypeDef>,
    pub mutation: bool,
}

/// A type as composition sees it.
#[derive(Debug)]
pub(super) struct TypeDef {
    pub name: String,
    pub description: Option<String>,
    pub kind: Kind,
    /// Subgraphs that define it.
    pub subgraphs: BTreeSet<SubgraphId>,
}

#[derive(Debug)]
pub(super) enum Kind {
    Object(ObjectDef),
    Enum(Vec<String>),
    InputObject(Vec<ArgDef>),
    Scalar,
}

#[derive(Debug, Default)]
pub(super) struct ObjectDef {
    pub fields: IndexMap<String, FieldDef>,
    /// The `@key` each subgraph declares for this type (first one wins).
    pub keys: Vec<(SubgraphId, Vec<String>)>,
    /// Subgraphs that mention the type at all.
    pub defined_in: BTreeSet<SubgraphId>,
}

#[derive(Debug)]
pub(super) struct FieldDef {
    pub name: String,
    pub description: Option<String>,
    pub ty: Type,
    pub args: Vec<ArgDef>,
    /// Subgraphs that can resolve this field, in subgraph order.
    pub owners: Vec<SubgraphId>,
    /// Subgraphs that declare it shareable (Federation 2) or define it on a value type.
    shareable_in: Vec<SubgraphId>,
    /// Subgraphs that declare it `@external` (and do not resolve it).
    pub external_in: Vec<SubgraphId>,
}

/// Why composition failed: every problem found, one per line.
#[derive(Debug)]
pub struct CompositionError(pub Vec<String>);

impl fmt::Display for CompositionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "cannot compose the supergraph:")?;
        for problem in &self.0 {
            writeln!(f, "  - {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CompositionError {}

/// Compose `sdls[i]`, the SDL of `subgraphs[i]`, into a supergraph SDL.
pub fn compose(subgraphs: &[Subgraph], sdls: &[String]) -> Result<String, CompositionError> {
    let composed = compose_graph(subgraphs, sdls)?;
    Ok(super::emit::write(&composed, subgraphs))
}

/// The composed graph, before it is written.
fn compose_graph(subgraphs: &[Subgraph], sdls: &[String]) -> Result<Composed, CompositionError> {
    let mut composer = Composer::default();
    for (id, sdl) in sdls.iter().enumerate() {
        let name = &subgraphs[id].name;
        match async_graphql_parser::parse_schema(sdl) {
            Ok(doc) => composer.add(id, name, &doc),
            Err(e) => composer
                .problems
                .push(format!("subgraph {name}: SDL does not parse: {e}")),
        }
    }
    composer.finish(subgraphs)
}

impl ObjectDef {
    /// The key fields subgraph `id` accepts for this type in `_entities`.
    fn key_for(&self, id: SubgraphId) -> Option<&[String]> {
        self.keys
            .iter()
            .find(|(s, _)| *s == id)
            .map(|(_, k)| k.as_slice())
    }
}

impl FieldDef {
    fn is_owned_by(&self, id: SubgraphId) -> bool {
        self.owners.contains(&id)
    }
}

fn is_federation_internal_type(name: &str) -> bool {
    name.starts_with('_')
        || name.starts_with("link__")
        || name.starts_with("federation__")
        || name == "FieldSet"
}

fn directive<'a>(dirs: &'a [Positioned<ConstDirective>], name: &str) -> Option<&'a ConstDirective> {
    dirs.iter().map(|d| &d.node).find(|d| d.name.node == name)
}

fn has_directive(dirs: &[Positioned<ConstDirective>], name: &str) -> bool {
    directive(dirs, name).is_some()
}

#[derive(Default)]
struct Composer {
    types: IndexMap<String, TypeDef>,
    problems: Vec<String>,
    query_type_seen: bool,
    mutation_type_seen: bool,
    /// Fields explicitly marked `@external` by some subgraph: (type, field, subgraph).
    externals: Vec<(String, String, SubgraphId)>,
}

const QUERY: &str = "Query";
const MUTATION: &str = "Mutation";

impl Composer {
    fn add(&mut self, id: SubgraphId, sg: &str, doc: &ServiceDocument) {
        // A subgraph may rename its root types; map them back to Query/Mutation.
        let mut query_name = QUERY.to_string();
        let mut mutation_name = MUTATION.to_string();
        for def in &doc.definitions {
            if let TypeSystemDefinition::Schema(schema) = def {
                if let Some(q) = &schema.node.query {
                    query_name = q.node.to_string();
                }
                if let Some(m) = &schema.node.mutation {
                    mutation_name = m.node.to_string();
                }
                if schema.node.subscription.is_some() {
                    self.problems.push(format!(
                        "subgraph {sg}: subscriptions are not supported by this gateway"
                    ));
                }
            }
        }
        for def in &doc.definitions {
            let TypeSystemDefinition::Type(def) = def else {
                continue;
            };
            let def = &def.node;
            let raw = def.name.node.as_str();
            if is_federation_internal_type(raw) {
                continue;
            }
            let name = if raw == query_name {
                QUERY
            } else if raw == mutation_name {
                MUTATION
            } else {
                raw
            };
            self.add_type(id, sg, name, def);
        }
    }

    fn add_type(&mut self, id: SubgraphId, sg: &str, name: &str, def: &TypeDefinition) {
        let description = def.description.as_ref().map(|d| d.node.clone());
        match &def.kind {
            TypeKind::Object(object) => {
                if name == QUERY {
                    self.query_type_seen = true;
                }
                if name == MUTATION {
                    self.mutation_type_seen = true;
                }
                let entry = self.types.entry(name.to_string()).or_insert_with(|| TypeDef {
                    name: name.to_string(),
                    description: None,
                    kind: Kind::Object(ObjectDef::default()),
                    subgraphs: BTreeSet::new(),
                });
                entry.subgraphs.insert(id);
                if entry.description.is_none() && !def.extend && !has_directive(&def.directives, "extends") {
                    entry.description = description;
                }
                let Kind::Object(target) = &mut entry.kind else {
                    self.problems.push(format!("type {name} is an object in subgraph {sg} but not elsewhere"));
                    return;
                };
                target.defined_in.insert(id);
                let key = directive(&def.directives, "key").and_then(|d| d.get_argument("fields"));
                let key_fields: Option<Vec<String>> = match key.map(|v| &v.node) {
                    Some(ConstValue::String(fields)) => {
                        if fields.contains('{') {
                            self.problems.push(format!(
                                "subgraph {sg}: @key(fields: {fields:?}) on {name}: nested keys are not supported"
                            ));
                            None
                        } else {
                            Some(fields.split_whitespace().map(str::to_string).collect())
                        }
                    }
                    Some(other) => {
                        self.problems.push(format!("subgraph {sg}: @key on {name} has fields: {other}, expected a string"));
                        None
                    }
                    None => None,
                };
                if let Some(fields) = &key_fields {
                    if target.key_for(id).is_none() {
                        target.keys.push((id, fields.clone()));
                    }
                }
                let type_shareable = has_directive(&def.directives, "shareable");
                for field in &object.fields {
                    let field = &field.node;
                    let fname = field.name.node.as_str();
                    if name == QUERY && (fname == "_service" || fname == "_entities") {
                        continue;
                    }
                    let is_key = key_fields.as_ref().is_some_and(|k| k.iter().any(|f| f == fname));
                    let external = has_directive(&field.directives, "external");
                    if external && !is_key {
                        self.externals.push((name.to_string(), fname.to_string(), id));
                    }
                    let shareable = type_shareable || has_directive(&field.directives, "shareable") || is_key;
                    merge_field(&mut self.problems, target, id, sg, name, field, !external || is_key, shareable);
                    if external && !is_key {
                        if let Some(f) = target.fields.get_mut(fname) {
                            f.external_in.push(id);
                        }
                    }
                }
            }
            TypeKind::Enum(e) => {
                let values: Vec<String> = e.values.iter().map(|v| v.node.value.node.to_string()).collect();
                self.merge_simple(id, sg, name, description, Kind::Enum(values));
            }
            TypeKind::InputObject(input) => {
                let fields = input.fields.iter().map(|f| arg_def(&f.node)).collect();
                self.merge_simple(id, sg, name, description, Kind::InputObject(fields));
            }
            TypeKind::Scalar => self.merge_simple(id, sg, name, description, Kind::Scalar),
            TypeKind::Interface(_) | TypeKind::Union(_) => self.problems.push(format!(
                "subgraph {sg}: {name} is an interface or union; this gateway composes object, enum, input and scalar types only"
            )),
        }
    }

    fn merge_simple(
        &mut self,
        id: SubgraphId,
        sg: &str,
        name: &str,
        description: Option<String>,
        kind: Kind,
    ) {
        match self.types.get(name) {
            None => {
                self.types.insert(
                    name.to_string(),
                    TypeDef {
                        name: name.to_string(),
                        description,
                        kind,
                        subgraphs: BTreeSet::from([id]),
                    },
                );
            }
            Some(_) => {
                let existing = self.types.get_mut(name).expect("looked up above");
                existing.subgraphs.insert(id);
                let same = match (&existing.kind, &kind) {
                    (Kind::Scalar, Kind::Scalar) => true,
                    (Kind::Enum(a), Kind::Enum(b)) => a == b,
                    (Kind::InputObject(a), Kind::InputObject(b)) => {
                        a.len() == b.len()
                            && a.iter().zip(b).all(|(x, y)| {
                                x.name == y.name && x.ty.to_string() == y.ty.to_string()
                            })
                    }
                    _ => false,
                };
                if !same {
                    self.problems.push(format!("type {name} in subgraph {sg} differs from its definition in another subgraph"));
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn merge_field(
    problems: &mut Vec<String>,
    target: &mut ObjectDef,
    id: SubgraphId,
    sg: &str,
    ty: &str,
    field: &FieldDefinition,
    resolvable: bool,
    shareable: bool,
) {
    let name = field.name.node.to_string();
    let args: Vec<ArgDef> = field.arguments.iter().map(|a| arg_def(&a.node)).collect();
    match target.fields.get_mut(&name) {
        None => {
            target.fields.insert(
                name.clone(),
                FieldDef {
                    name,
                    description: field.description.as_ref().map(|d| d.node.clone()),
                    ty: field.ty.node.clone(),
                    args,
                    owners: if resolvable { vec![id] } else { vec![] },
                    shareable_in: if shareable { vec![id] } else { vec![] },
                    external_in: Vec::new(),
                },
            );
        }
        Some(existing) => {
            // Nullability may differ between subgraphs for shared key fields (`ID!` vs
            // `ID`); the named type and list shape may not.
            if strip_non_null(&existing.ty) != strip_non_null(&field.ty.node) {
                problems.push(format!(
                    "{ty}.{name} has type {} in subgraph {sg} but {} elsewhere",
                    field.ty.node, existing.ty
                ));
            }
            if resolvable && !args_match(&existing.args, &args) {
                problems.push(format!(
                    "{ty}.{name} has different arguments in subgraph {sg} than elsewhere"
                ));
            }
            if existing.description.is_none() {
                existing.description = field.description.as_ref().map(|d| d.node.clone());
            }
            if resolvable && !existing.owners.contains(&id) {
                existing.owners.push(id);
                if !field.ty.node.nullable {
                    existing.ty = field.ty.node.clone();
                }
            }
            if shareable {
                existing.shareable_in.push(id);
            }
        }
    }
}

fn strip_non_null(ty: &Type) -> String {
    ty.to_string().replace('!', "")
}

fn args_match(a: &[ArgDef], b: &[ArgDef]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.name == y.name && x.ty.to_string() == y.ty.to_string())
}

#[cfg(test)]
mod tests;
