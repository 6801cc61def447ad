//! Subgraphs of the federation tests, built with async-graphql's `dynamic` schemas
//! over JSON: the helpers that write fields ([`field`], [`computed`], [`arg`],
//! [`ifield`]), the [`Subgraph`] builder (types, mutations, `_entities`, and the faults
//! to inject: answers rewritten, requests held), and [`lookup`], entities out of a
//! table.

use std::sync::Arc;

use async_graphql::dynamic::{
    Field, FieldFuture, FieldValue, InputValue, InterfaceField, Object, ResolverContext, Schema,
    Type, TypeRef,
};
use serde_json::Value as Json;

/// A GraphQL type written as text (`[Book!]!`), for the dynamic schema.
pub fn ty(text: &str) -> TypeRef {
    if let Some(inner) = text.strip_suffix('!') {
        TypeRef::NonNull(Box::new(ty(inner)))
    } else if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        TypeRef::List(Box::new(ty(inner)))
    } else {
        TypeRef::Named(text.to_string().into())
    }
}

/// A field whose value is the parent object's member of the same name (null when
/// absent).
pub fn field(name: &str, type_text: &str) -> Field {
    let member = name.to_string();
    computed(name, type_text, move |parent, _| {
        Ok(parent.get(&member).cloned().unwrap_or(Json::Null))
    })
}

/// A field computed from the parent object and the arguments (a JSON object of them).
pub fn computed(
    name: &str,
    type_text: &str,
    resolve: impl Fn(&Json, &Json) -> Result<Json, String> + Send + Sync + 'static,
) -> Field {
    let resolve = Arc::new(resolve);
    let named: Arc<str> = type_text.trim_matches(['[', ']', '!']).into();
    Field::new(name, ty(type_text), move |ctx: ResolverContext<'_>| {
        let resolve = resolve.clone();
        // Only a value of an interface or a union names its type (async-graphql
        // hands an object field's value on as it is, so a typed one would hide its JSON).
        let typed = ctx
            .schema_env
            .registry
            .types
            .get(&*named)
            .is_some_and(|t| t.is_abstract());
        FieldFuture::new(async move {
            let parent = ctx
                .parent_value
                .downcast_ref::<Json>()
                .cloned()
                .unwrap_or(Json::Null);
            let args = arguments(&ctx);
            let value = resolve(&parent, &args).map_err(async_graphql::Error::new)?;
            Ok(field_value(value, typed))
        })
    })
}

/// An interface's field: `ifield("id", "ID!")`.
pub fn ifield(name: &str, type_text: &str) -> InterfaceField {
    InterfaceField::new(name, ty(type_text))
}

/// An argument of a field: `arg("unit", "Unit!")`.
pub fn arg(name: &str, type_text: &str) -> InputValue {
    InputValue::new(name, ty(type_text))
}

fn arguments(ctx: &ResolverContext<'_>) -> Json {
    Json::Object(
        ctx.args
            .as_index_map()
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone().into_json().unwrap_or(Json::Null)))
            .collect(),
    )
}

/// JSON as what a dynamic resolver returns: objects stay JSON (`typed`: named by
/// their `__typename`), lists are lists, the rest are values.
fn field_value(value: Json, typed: bool) -> Option<FieldValue<'static>> {
    match value {
        Json::Null => None,
        Json::Array(items) => {
            Some(FieldValue::list(items.into_iter().map(|item| {
                field_value(item, typed).unwrap_or(FieldValue::NULL)
            })))
        }
        Json::Object(map) => {
            let typename = map
                .get("__typename")
                .and_then(Json::as_str)
                .filter(|_| typed)
                .map(str::to_string);
            let object = FieldValue::owned_any(Json::Object(map));
            Some(match typename {
                Some(t) => object.with_type(t),
                None => object,
            })
        }
        leaf => Some(FieldValue::value(
            async_graphql::Value::from_json(leaf).expect("a JSON leaf is a GraphQL value"),
        )),
    }
}

/// What a subgraph does with a representation: the entity it stands for, or null.
pub type Entities = Arc<dyn Fn(&Json) -> Json + Send + Sync>;

/// A rewrite of a subgraph's answer (the query it answers, the answer as JSON).
pub type Tamper = Arc<dyn Fn(&str, &mut Json) + Send + Sync>;

/// How long a subgraph holds a request (by its query) before it runs it.
pub type Delay = Arc<dyn Fn(&str) -> std::time::Duration + Send + Sync>;

/// A subgraph, before it is served.
pub struct Subgraph {
    pub name: &'static str,
    query: Object,
    mutation: Option<Object>,
    types: Vec<Type>,
    entities: Option<Entities>,
    tamper: Option<Tamper>,
    delay: Option<Delay>,
}

impl Subgraph {
    pub fn new(name: &'static str, query: Object) -> Subgraph {
        Subgraph {
            name,
            query,
            mutation: None,
            types: Vec::new(),
            entities: None,
            tamper: None,
            delay: None,
        }
    }

    pub fn mutation(mut self, mutation: Object) -> Subgraph {
        self.mutation = Some(mutation);
        self
    }

    /// Register a type (object, interface, union, enum, input object).
    pub fn with(mut self, t: impl Into<Type>) -> Subgraph {
        self.types.push(t.into());
        self
    }

    /// Resolve `_entities`: each representation (as JSON) to its entity (with its
    /// `__typename`), or null.
    pub fn entities(mut self, resolve: impl Fn(&Json) -> Json + Send + Sync + 'static) -> Subgraph {
        self.entities = Some(Arc::new(resolve));
        self
    }

    /// Rewrite every answer before it is sent.
    pub fn tamper(mut self, rewrite: impl Fn(&str, &mut Json) + Send + Sync + 'static) -> Subgraph {
        self.tamper = Some(Arc::new(rewrite));
        self
    }

    /// Hold each request for as long as `delay` says (by its query) before running it.
    pub fn delay(
        mut self,
        delay: impl Fn(&str) -> std::time::Duration + Send + Sync + 'static,
    ) -> Subgraph {
        self.delay = Some(Arc::new(delay));
        self
    }

    /// The schema, and what the host does around it.
    pub(super) fn schema(self) -> (Schema, Option<Entities>, Option<Tamper>, Option<Delay>) {
        let mut builder = Schema::build(
            self.query.type_name(),
            self.mutation.as_ref().map(|m| m.type_name()),
            None,
        )
        .register(self.query)
        .enable_federation();
        if let Some(m) = self.mutation {
            builder = builder.register(m);
        }
        for t in self.types {
            builder = builder.register(t);
        }
        if let Some(resolve) = self.entities.clone() {
            builder = builder.entity_resolver(move |ctx| {
                let resolve = resolve.clone();
                FieldFuture::new(async move {
                    let representations = ctx.args.try_get("representations")?.list()?;
                    let entities: Vec<FieldValue<'static>> = representations
                        .iter()
                        .map(|r| {
                            let r = r.as_value().clone().into_json().unwrap_or(Json::Null);
                            field_value(resolve(&r), true).unwrap_or(FieldValue::NULL)
                        })
                        .collect();
                    Ok(Some(FieldValue::list(entities)))
                })
            });
        }
        let schema = builder
            .finish()
            .unwrap_or_else(|e| panic!("subgraph {}: {e}", self.name));
        (schema, self.entities, self.tamper, self.delay)
    }
}

/// The rows of `table` as entities: the row whose `__typename` and `key` fields equal
/// the representation's, with the representation's other fields (the inputs of
/// `@requires`) laid over it; null when none matches.
pub fn lookup(table: Json, key: &'static [&'static str]) -> impl Fn(&Json) -> Json + Send + Sync {
    move |rep| {
        let found = table.as_array().into_iter().flatten().find(|row| {
            row.get("__typename") == rep.get("__typename")
                && key
                    .iter()
                    .all(|k| rep.get(*k).is_some() && row.get(*k) == rep.get(*k))
        });
        match found {
            Some(row) => {
                let mut entity = row.clone();
                for (k, v) in rep.as_object().into_iter().flatten() {
                    entity[k] = v.clone();
                }
                entity
            }
            None => Json::Null,
        }
    }
}
