//! The supergraph: the schema clients see, the subgraphs behind it, and the join
//! facts the gateway needs beyond what its planner keeps.
//!
//! There are two ways in, and one model out:
//!
//! - [`join`] reads a composed supergraph SDL (the join spec, v0.3 to v0.5, with
//!   link v1.0), as Apollo's composition, The Guild's federation-composition or the
//!   federation audit write it (`gateway --supergraph FILE`);
//! - [`compose`] composes the subgraphs' own SDL (`_service { sdl }`) into the same
//!   kind of supergraph SDL (`gateway --subgraph NAME=URL`), which [`join`] then
//!   reads like any other.
//!
//! So the planner ([`crate::plan`]) always starts from one supergraph SDL. What
//! [`Supergraph`] holds is what the rest of the gateway asks of the schema: the
//! public types (`@inaccessible` elements removed) for validation, introspection
//! and the response's shape; which object types an interface or union may hold;
//! and each subgraph's URL. What only planning needs (keys, `@external`, each
//! subgraph's own view of a type) stays in the planner's state.

pub mod compose;
mod emit;
pub mod join;
pub mod list_size;
mod public;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use async_graphql_parser::types::{BaseType, Type};
use async_graphql_value::ConstValue;
use indexmap::IndexMap;

pub use compose::CompositionError;
pub use join::SupergraphError;

/// Index of a subgraph in [`Supergraph::subgraphs`].
pub type SubgraphId = usize;

/// Prefix of the aliases under which the gateway asks a subgraph for an entity's
/// key fields (the cache's references), so that they never collide with the
/// client's own response keys.
pub const KEY_ALIAS_PREFIX: &str = "_gw_k_";

/// A subgraph as the gateway knows it: a name and its GraphQL endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subgraph {
    pub name: String,
    pub url: String,
}

/// The public schema, the subgraphs, and the join facts the gateway reads.
#[derive(Debug)]
pub struct Supergraph {
    pub subgraphs: Vec<Subgraph>,
    pub query_type: String,
    pub mutation_type: Option<String>,
    /// Every public type but the built-in scalars and introspection's, in the
    /// supergraph's order.
    pub types: IndexMap<String, TypeDef>,
    /// The supergraph SDL the planner was built from.
    pub sdl: Arc<str>,
    /// Per abstract type, the object types it may hold (sorted).
    possible: HashMap<String, Vec<String>>,
}

#[derive(Debug)]
pub struct TypeDef {
    pub name: String,
    pub description: Option<String>,
    pub kind: Kind,
}

#[derive(Debug)]
pub enum Kind {
    Object(ObjectDef),
    Interface(ObjectDef),
    /// Its member object types.
    Union(Vec<String>),
    Enum(Vec<EnumValueDef>),
    InputObject(Vec<ArgDef>),
    Scalar,
}

/// The fields of an object or interface type, and the interfaces it implements.
#[derive(Debug, Default)]
pub struct ObjectDef {
    pub fields: IndexMap<String, FieldDef>,
    pub implements: Vec<String>,
}

#[derive(Debug)]
pub struct FieldDef {
    pub name: String,
    pub description: Option<String>,
    pub ty: Type,
    pub args: Vec<ArgDef>,
    pub deprecation: Option<String>,
    /// Its `@listSize`, when the supergraph gives one.
    pub list_size: Option<list_size::ListSize>,
}

#[derive(Debug, Clone)]
pub struct ArgDef {
    pub name: String,
    pub description: Option<String>,
    pub ty: Type,
    pub default: Option<ConstValue>,
}

#[derive(Debug, Clone)]
pub struct EnumValueDef {
    pub name: String,
    pub description: Option<String>,
    pub deprecation: Option<String>,
}

impl Supergraph {
    /// The model out of its parts; `possible` is derived from the types.
    fn assemble(
        subgraphs: Vec<Subgraph>,
        public: public::PublicSchema,
        sdl: Arc<str>,
    ) -> Supergraph {
        let public::PublicSchema {
            types,
            query: query_type,
            mutation: mutation_type,
        } = public;
        let mut possible: HashMap<String, BTreeSet<String>> = HashMap::new();
        for t in types.values() {
            match &t.kind {
                Kind::Union(members) => {
                    possible
                        .entry(t.name.clone())
                        .or_default()
                        .extend(members.iter().cloned());
                }
                Kind::Interface(_) => {
                    possible.entry(t.name.clone()).or_default();
                }
                Kind::Object(o) => {
                    for i in &o.implements {
                        possible
                            .entry(i.clone())
                            .or_default()
                            .insert(t.name.clone());
                    }
                }
                _ => {}
            }
        }
        Supergraph {
            subgraphs,
            query_type,
            mutation_type,
            types,
            sdl,
            possible: possible
                .into_iter()
                .map(|(k, v)| (k, v.into_iter().collect()))
                .collect(),
        }
    }

    /// An object or interface type's fields.
    pub fn fields_of(&self, ty: &str) -> Option<&ObjectDef> {
        match &self.types.get(ty)?.kind {
            Kind::Object(o) | Kind::Interface(o) => Some(o),
            _ => None,
        }
    }

    pub fn field(&self, ty: &str, field: &str) -> Option<&FieldDef> {
        self.fields_of(ty)?.fields.get(field)
    }

    /// Whether values of the named type have a selection set.
    pub fn is_composite(&self, ty: &str) -> bool {
        matches!(
            self.types.get(ty).map(|t| &t.kind),
            Some(Kind::Object(_) | Kind::Interface(_) | Kind::Union(_))
        )
    }

    /// Whether the named type is an interface or a union.
    pub fn is_abstract(&self, ty: &str) -> bool {
        matches!(
            self.types.get(ty).map(|t| &t.kind),
            Some(Kind::Interface(_) | Kind::Union(_))
        )
    }

    /// The object types a value of `ty` may be: itself for an object type.
    pub fn possible_types<'a>(&'a self, ty: &'a str) -> &'a [String] {
        match self.possible.get(ty) {
            Some(types) => types,
            None => std::slice::from_ref(
                self.types
                    .get_key_value(ty)
                    .map(|(k, _)| k)
                    .unwrap_or(&self.query_type),
            ),
        }
    }

    /// Whether an object of type `object` matches a fragment on `condition`.
    pub fn satisfies(&self, object: &str, condition: &str) -> bool {
        object == condition
            || self
                .possible
                .get(condition)
                .is_some_and(|types| types.binary_search_by(|t| t.as_str().cmp(object)).is_ok())
    }

    pub fn subgraph_id(&self, name: &str) -> Option<SubgraphId> {
        self.subgraphs.iter().position(|s| s.name == name)
    }

    /// Replace subgraph URLs (`--subgraph-url NAME=URL`); an unknown name is an
    /// error that lists the known ones.
    pub fn override_urls(&mut self, overrides: &[Subgraph]) -> Result<(), String> {
        for o in overrides {
            match self.subgraphs.iter_mut().find(|s| s.name == o.name) {
                Some(s) => s.url = o.url.clone(),
                None => {
                    let known: Vec<&str> = self.subgraphs.iter().map(|s| s.name.as_str()).collect();
                    return Err(format!(
                        "--subgraph-url {}: the supergraph has no subgraph named {:?} (it has: {})",
                        o.name,
                        o.name,
                        known.join(", ")
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A model of the public schema `sdl` alone, with no subgraphs: for unit tests of what
/// reads the schema.
#[cfg(test)]
pub(crate) fn from_public_sdl(sdl: &str) -> Supergraph {
    let public = public::read(sdl).expect("the SDL reads");
    Supergraph::assemble(Vec::new(), public, Arc::from(sdl))
}

/// The named type at the bottom of a (possibly list, possibly non-null) type.
pub fn base_name(ty: &Type) -> &str {
    match &ty.base {
        BaseType::Named(name) => name.as_str(),
        BaseType::List(inner) => base_name(inner),
    }
}
