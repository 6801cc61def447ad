//! The graph's five federated subgraphs, built from [`super::graph`] as async-graphql
//! `dynamic` schemas with federation entities, over the one data set of
//! [`super::data`], and served by `subgraph-host` on free 127.0.0.1 ports.
//!
//! A subgraph resolves only what it holds. Its `@external` fields answer only with a
//! value that came with the object (in the representation, or provided by the field
//! that returned it), and its `@requires` fields compute from the representation's
//! inputs alone, which must equal the row's; anything else is an error that names the
//! subgraph, so a gateway that asks the wrong subgraph, or leaves out an input, gets an
//! error instead of a plausible answer. An entity that names no row is an error too.
//! Each runs through [`super::spec`], which keeps async-graphql's executor to the spec.

use std::sync::Arc;

use async_graphql::dynamic::{Field, FieldFuture, FieldValue, Object, Schema};
use async_graphql::{Name, Value};
use gateway::supergraph::Subgraph;

use super::data::{same_leaf, Args, Data, Out, Ref};
use super::graph::{self, Home};
use super::schema::{self as parts, Node};
use super::spec::SpecExecutor;
use crate::common::Server;

/// The schema of `subgraph` over `data`.
pub fn schema(subgraph: &'static str, data: Arc<Data>) -> Schema {
    let mut builder = Schema::build("Query", None, None).enable_federation();
    for e in graph::ENUMS
        .iter()
        .filter(|e| e.subgraphs.contains(&subgraph))
    {
        builder = builder.register(parts::enum_type(e));
    }
    for i in graph::INTERFACES
        .iter()
        .filter(|i| i.subgraphs.contains(&subgraph))
    {
        builder = builder.register(parts::interface_type(i));
    }
    for u in graph::UNIONS {
        if let Some((_, members)) = u.members.iter().find(|(s, _)| *s == subgraph) {
            builder = builder.register(parts::union_type(u.name, members));
        }
    }
    for o in graph::OBJECTS.iter().filter(|o| o.in_subgraph(subgraph)) {
        builder = builder.register(object(subgraph, o, &data));
    }
    let entities = data.clone();
    builder
        .entity_resolver(move |ctx| {
            let data = entities.clone();
            FieldFuture::new(async move {
                let representations = ctx.args.try_get("representations")?.list()?;
                let mut out = Vec::new();
                for rep in representations.iter() {
                    out.push(entity(subgraph, &data, rep.object()?.as_index_map())?);
                }
                Ok(Some(FieldValue::list(out)))
            })
        })
        .finish()
        .unwrap_or_else(|e| panic!("subgraph {subgraph}: {e}"))
}

/// Object type `o` as `subgraph` declares it.
fn object(subgraph: &'static str, o: &'static graph::Object, data: &Arc<Data>) -> Object {
    let mut out = Object::new(o.name);
    for (_, key) in o.keys.iter().filter(|(s, _)| *s == subgraph) {
        out = out.key(*key);
    }
    for i in o.implements {
        if graph::interface(i).is_some_and(|i| i.subgraphs.contains(&subgraph)) {
            out = out.implement(*i);
        }
    }
    for f in o.fields {
        let Some(home) = f.home(subgraph) else {
            continue;
        };
        let data = data.clone();
        let on = o.name;
        let mut field = Field::new(f.name, parts::type_ref(f.ty), move |ctx| {
            let data = data.clone();
            FieldFuture::new(async move {
                let (r, known) = parts::parent(on, ctx.parent_value)?;
                let args: Args = ctx.args.as_index_map().clone();
                let out = resolve(subgraph, &data, r, known, f, home, &args)?;
                let provided = |row: Ref| match home {
                    Home::Provides(fields) => provided(&data, row, fields),
                    _ => Args::new(),
                };
                Ok(match out {
                    Out::Leaf(Value::Null) => None,
                    out => Some(parts::field_value(out, f.ty, &provided)),
                })
            })
        });
        field = parts::with_arguments(field, f);
        field = match home {
            Home::Owns => field,
            Home::Shares => field.shareable(),
            Home::External => field.external(),
            Home::Requires(fields) => field.requires(fields),
            Home::Provides(fields) => field.provides(fields),
        };
        out = out.field(field);
    }
    out
}

/// Field `f` of row `r`, as `subgraph` resolves it.
fn resolve(
    subgraph: &str,
    data: &Data,
    r: Ref,
    known: &Args,
    f: &graph::Field,
    home: Home,
    args: &Args,
) -> async_graphql::Result<Out> {
    match home {
        Home::Owns | Home::Shares | Home::Provides(_) => Ok(data.field(r, f.name, args)),
        Home::External => match known.get(f.name) {
            Some(v) => Ok(Out::Leaf(v.clone())),
            None => Err(format!(
                "{subgraph} was asked for its @external field {}.{} without being given it",
                r.ty, f.name
            )
            .into()),
        },
        Home::Requires(inputs) => {
            for input in inputs.split_whitespace() {
                let Some(given) = known.get(input) else {
                    return Err(format!(
                        "{subgraph}: {}.{} @requires {input}, which the representation lacks",
                        r.ty, f.name
                    )
                    .into());
                };
                if let Out::Leaf(mine) = data.field(r, input, &Args::new()) {
                    if !same_leaf(given, &mine) {
                        return Err(format!(
                            "{subgraph}: {}.{} was given {input} = {given}, but the row has {mine}",
                            r.ty, f.name
                        )
                        .into());
                    }
                }
            }
            Ok(data.required(r.ty, f.name, &|name| known.get(name).cloned())?)
        }
    }
}

/// The values of `fields` of `row`, which a `@provides` hands over with it.
fn provided(data: &Data, row: Ref, fields: &str) -> Args {
    fields
        .split_whitespace()
        .filter_map(|f| match data.field(row, f, &Args::new()) {
            Out::Leaf(v) => Some((Name::new(f), v)),
            _ => None,
        })
        .collect()
}

/// The object a representation names, by one of `subgraph`'s keys of its type.
fn entity(subgraph: &str, data: &Data, rep: &Args) -> async_graphql::Result<FieldValue<'static>> {
    let typename = match rep.get("__typename") {
        Some(Value::String(t)) => t.as_str(),
        _ => {
            return Err(format!("{subgraph}: a representation without __typename: {rep:?}").into())
        }
    };
    let o = graph::object(typename)
        .filter(|o| o.in_subgraph(subgraph))
        .ok_or_else(|| format!("{subgraph} has no entity type {typename}"))?;
    let key = o
        .keys
        .iter()
        .filter(|(s, _)| *s == subgraph)
        .map(|(_, k)| *k)
        .find(|k| k.split_whitespace().all(|f| rep.contains_key(f)))
        .ok_or_else(|| format!("{subgraph}: no key of {typename} in {rep:?}"))?;
    let row = data
        .find(o.name, key, rep)
        .ok_or_else(|| format!("{subgraph}: no {typename} with {key} as in {rep:?}"))?;
    let mut known = rep.clone();
    known.shift_remove("__typename");
    Ok(FieldValue::owned_any(Node {
        r: Ref { ty: o.name, row },
        known,
    })
    .with_type(o.name))
}

/// The SDL `subgraph` serves as `_service { sdl }`.
pub async fn sdl(schema: &Schema) -> String {
    let answer = schema.execute("{ _service { sdl } }").await;
    assert!(answer.errors.is_empty(), "{:?}", answer.errors);
    let json = answer.data.into_json().expect("JSON");
    json["_service"]["sdl"]
        .as_str()
        .expect("an SDL string")
        .to_string()
}

/// The five subgraphs, each served on its own free port.
pub struct Subgraphs {
    pub servers: Vec<(&'static str, Server)>,
}

impl Subgraphs {
    pub async fn start(data: &Arc<Data>) -> Subgraphs {
        let mut servers = Vec::new();
        for name in graph::SUBGRAPHS {
            let router = subgraph_host::router(
                name,
                SpecExecutor(schema(name, data.clone())),
                std::time::Duration::ZERO,
            );
            servers.push((*name, Server::start(router).await));
        }
        Subgraphs { servers }
    }

    /// Each subgraph's URL, to override the supergraph's with.
    pub fn urls(&self) -> Vec<Subgraph> {
        self.servers
            .iter()
            .map(|(name, s)| Subgraph {
                name: name.to_string(),
                url: s.url(),
            })
            .collect()
    }
}
