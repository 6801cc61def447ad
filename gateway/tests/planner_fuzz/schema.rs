//! The pieces of an async-graphql `dynamic` schema that both executors build alike from
//! [`super::graph`]: type references, arguments, enums, interfaces, unions, and a field
//! value of [`super::data`] turned into what a resolver returns.

use async_graphql::dynamic::{
    Enum, Field, FieldValue, InputValue, Interface, InterfaceField, TypeRef, Union,
};
use async_graphql::Value;

use super::data::{Args, Out, Ref};
use super::graph;

/// An object as resolvers see it: its row, and the field values that came with it (a
/// representation's fields, or fields provided by the field that returned it).
pub struct Node {
    pub r: Ref,
    pub known: Args,
}

/// A type's text (`[Review!]!`) as a type reference.
pub fn type_ref(ty: &str) -> TypeRef {
    if let Some(inner) = ty.strip_suffix('!') {
        TypeRef::NonNull(Box::new(type_ref(inner)))
    } else if let Some(inner) = ty.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        TypeRef::List(Box::new(type_ref(inner)))
    } else {
        TypeRef::named(ty)
    }
}

/// `field` with the arguments of `described`.
pub fn with_arguments(mut field: Field, described: &graph::Field) -> Field {
    for a in described.args {
        let mut input = InputValue::new(a.name, type_ref(a.ty));
        if let Some(default) = a.default {
            let json: serde_json::Value =
                serde_json::from_str(default).expect("defaults are JSON-compatible literals");
            input = input.default_value(Value::from_json(json).expect("a default value"));
        }
        field = field.argument(input);
    }
    field
}

pub fn enum_type(e: &graph::Enum) -> Enum {
    Enum::new(e.name).items(e.values.iter().copied())
}

pub fn interface_type(i: &graph::Interface) -> Interface {
    i.fields
        .iter()
        .fold(Interface::new(i.name), |out, (name, ty)| {
            out.field(InterfaceField::new(*name, type_ref(ty)))
        })
}

pub fn union_type(name: &str, members: &[&str]) -> Union {
    members
        .iter()
        .fold(Union::new(name), |u, m| u.possible_type(*m))
}

/// The row a resolver's parent stands for (the root has none of its own).
pub fn parent<'a>(on: &str, value: &'a FieldValue<'a>) -> async_graphql::Result<(Ref, &'a Args)> {
    static EMPTY: std::sync::OnceLock<Args> = std::sync::OnceLock::new();
    if on == "Query" {
        return Ok((
            Ref {
                ty: "Query",
                row: 0,
            },
            EMPTY.get_or_init(Args::new),
        ));
    }
    let node = value.try_downcast_ref::<Node>()?;
    Ok((node.r, &node.known))
}

/// `out`, a value of a field of type `ty`, as a resolver's answer; each object becomes a
/// [`Node`] with what `known` says came with it.
pub fn field_value(out: Out, ty: &str, known: &dyn Fn(Ref) -> Args) -> FieldValue<'static> {
    let abstract_type = graph::object(graph::base(ty)).is_none();
    match out {
        Out::Leaf(v) => FieldValue::value(v),
        Out::Object(r) => {
            let node = FieldValue::owned_any(Node { r, known: known(r) });
            if abstract_type {
                node.with_type(r.ty)
            } else {
                node
            }
        }
        Out::List(items) => {
            FieldValue::list(items.into_iter().map(|item| field_value(item, ty, known)))
        }
    }
}
