//! The reference executor: one monolithic, non-federated async-graphql `dynamic` schema
//! with every public type and field of [`super::graph`], each resolved straight from
//! [`super::data`] (a `@requires` field from the row's own inputs). It answers the same
//! public schema as the gateway over the supergraph, and is the fuzzer's oracle, and
//! its validator: an operation it refuses is not a valid operation.
//! It runs through [`super::spec`], which keeps async-graphql's executor to the spec.

use std::sync::Arc;

use async_graphql::dynamic::{Field, FieldFuture, Object, Schema};
use async_graphql::Value;

use super::data::{Args, Data, Out};
use super::graph;
use super::schema as parts;

/// The reference schema over `data`.
pub fn schema(data: Arc<Data>) -> Schema {
    let mut builder = Schema::build("Query", None, None);
    for e in graph::ENUMS {
        builder = builder.register(parts::enum_type(e));
    }
    for i in graph::INTERFACES {
        builder = builder.register(parts::interface_type(i));
    }
    for u in graph::UNIONS {
        builder = builder.register(parts::union_type(u.name, &u.all_members()));
    }
    for o in graph::OBJECTS {
        builder = builder.register(object(o, &data));
    }
    builder
        .finish()
        .unwrap_or_else(|e| panic!("the reference schema: {e}"))
}

fn object(o: &'static graph::Object, data: &Arc<Data>) -> Object {
    let mut out = o
        .implements
        .iter()
        .fold(Object::new(o.name), |out, i| out.implement(*i));
    for f in o.fields.iter().filter(|f| f.public()) {
        let data = data.clone();
        let on = o.name;
        let field = Field::new(f.name, parts::type_ref(f.ty), move |ctx| {
            let data = data.clone();
            FieldFuture::new(async move {
                let (r, _) = parts::parent(on, ctx.parent_value)?;
                let args: Args = ctx.args.as_index_map().clone();
                Ok(match data.field(r, f.name, &args) {
                    Out::Leaf(Value::Null) => None,
                    out => Some(parts::field_value(out, f.ty, &|_| Args::new())),
                })
            })
        });
        out = out.field(parts::with_arguments(field, f));
    }
    out
}
