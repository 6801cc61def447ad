//! The public schema's types, read from SDL: what clients may ask for, as
//! validation, introspection and the response writer see it.
//!
//! The SDL is the planner's consumer schema (the supergraph with its join and link
//! machinery stripped and `@inaccessible` elements pruned), printed and parsed
//! again with async-graphql's parser, so that the rest of the gateway works with
//! one syntax tree. Built-in scalars and introspection's own types are left out:
//! async-graphql brings its own.

use async_graphql_parser::types::{
    ConstDirective, FieldDefinition, InputValueDefinition, SchemaDefinition, TypeDefinition,
    TypeKind, TypeSystemDefinition,
};
use async_graphql_parser::Positioned;
use async_graphql_value::ConstValue;
use indexmap::IndexMap;

use super::{ArgDef, EnumValueDef, FieldDef, Kind, ObjectDef, TypeDef};

const BUILT_IN_SCALARS: [&str; 5] = ["String", "Int", "Float", "Boolean", "ID"];

/// The public schema's types and root types.
pub struct PublicSchema {
    pub types: IndexMap<String, TypeDef>,
    pub query: String,
    pub mutation: Option<String>,
}

/// The public types of `sdl`, with the root types' names.
pub fn read(sdl: &str) -> Result<PublicSchema, String> {
    let doc = async_graphql_parser::parse_schema(sdl)
        .map_err(|e| format!("the public schema does not parse: {e}"))?;
    let mut types = IndexMap::new();
    let mut roots: Option<SchemaDefinition> = None;
    for def in doc.definitions {
        match def {
            TypeSystemDefinition::Schema(s) => roots = Some(s.node),
            TypeSystemDefinition::Type(t) => {
                let t = t.node;
                let name = t.name.node.to_string();
                if name.starts_with("__") || BUILT_IN_SCALARS.contains(&name.as_str()) {
                    continue;
                }
                types.insert(name.clone(), type_def(name, t));
            }
            TypeSystemDefinition::Directive(_) => {}
        }
    }
    let query = roots
        .as_ref()
        .and_then(|s| s.query.as_ref())
        .map_or_else(|| "Query".to_string(), |q| q.node.to_string());
    let mutation = match roots.as_ref() {
        Some(s) => s.mutation.as_ref().map(|m| m.node.to_string()),
        None => types
            .contains_key("Mutation")
            .then(|| "Mutation".to_string()),
    };
    if !types.contains_key(&query) {
        return Err(format!("the public schema has no query type {query}"));
    }
    if let Some(m) = &mutation {
        if !types.contains_key(m) {
            return Err(format!("the public schema has no mutation type {m}"));
        }
    }
    // Introspection's root fields belong to async-graphql, not to the query type.
    if let Some(TypeDef {
        kind: Kind::Object(o),
        ..
    }) = types.get_mut(&query)
    {
        o.fields.retain(|name, _| !name.starts_with("__"));
    }
    Ok(PublicSchema {
        types,
        query,
        mutation,
    })
}

fn type_def(name: String, t: TypeDefinition) -> TypeDef {
    let description = t.description.map(|d| d.node);
    let kind = match t.kind {
        TypeKind::Object(o) => Kind::Object(ObjectDef {
            fields: fields(o.fields),
            implements: o.implements.iter().map(|i| i.node.to_string()).collect(),
        }),
        TypeKind::Interface(i) => Kind::Interface(ObjectDef {
            fields: fields(i.fields),
            implements: i.implements.iter().map(|i| i.node.to_string()).collect(),
        }),
        TypeKind::Union(u) => Kind::Union(u.members.iter().map(|m| m.node.to_string()).collect()),
        TypeKind::Enum(e) => Kind::Enum(
            e.values
                .into_iter()
                .map(|v| {
                    let v = v.node;
                    EnumValueDef {
                        name: v.value.node.to_string(),
                        description: v.description.map(|d| d.node),
                        deprecation: deprecation(&v.directives),
                    }
                })
                .collect(),
        ),
        TypeKind::InputObject(i) => {
            Kind::InputObject(i.fields.iter().map(|f| arg_def(&f.node)).collect())
        }
        TypeKind::Scalar => Kind::Scalar,
    };
    TypeDef {
        name,
        description,
        kind,
    }
}

fn fields(defs: Vec<Positioned<FieldDefinition>>) -> IndexMap<String, FieldDef> {
    defs.into_iter()
        .map(|f| {
            let f = f.node;
            let name = f.name.node.to_string();
            let def = FieldDef {
                name: name.clone(),
                description: f.description.map(|d| d.node),
                ty: f.ty.node,
                args: f.arguments.iter().map(|a| arg_def(&a.node)).collect(),
                deprecation: deprecation(&f.directives),
                list_size: None,
            };
            (name, def)
        })
        .collect()
}

pub(super) fn arg_def(def: &InputValueDefinition) -> ArgDef {
    ArgDef {
        name: def.name.node.to_string(),
        description: def.description.as_ref().map(|d| d.node.clone()),
        ty: def.ty.node.clone(),
        default: def.default_value.as_ref().map(|v| v.node.clone()),
    }
}

/// `@deprecated`'s reason (its default when none is given).
fn deprecation(directives: &[Positioned<ConstDirective>]) -> Option<String> {
    let d = directives
        .iter()
        .find(|d| d.node.name.node == "deprecated")?;
    Some(match d.node.get_argument("reason").map(|v| &v.node) {
        Some(ConstValue::String(reason)) => reason.clone(),
        _ => "No longer supported".to_string(),
    })
}
