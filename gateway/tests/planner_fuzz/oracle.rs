//! The oracle's two judgements of the gateway's answer to an operation: that it equals
//! the reference's (as JSON, whatever the order of keys within objects), and that its
//! keys come in the order the operation selects them, which the spec requires and
//! JSON equality cannot see.
//!
//! The order is checked against the operation itself, not the reference: for each
//! object of the answer, the fields the operation collects for each type the object
//! may be (skipped and excluded selections left out, fragments whose type condition
//! does not apply left out, repeated keys merged where they first appear) give the
//! order its keys must have; one of those types must match the object's keys and
//! their order.

use std::collections::HashMap;

use async_graphql::Value;
use async_graphql_parser::types::{
    Directive, ExecutableDocument, OperationDefinition, Selection, SelectionSet,
};
use async_graphql_parser::Positioned;
use async_graphql_value::{ConstValue, Value as GqlValue};

use super::{graph, spec};

/// Where `a` and `b` first differ, as a path and both values; `None` if they are equal
/// (as JSON, in any key order).
pub fn difference(a: &Value, b: &Value) -> Option<String> {
    fn walk(a: &Value, b: &Value, path: &mut Vec<String>) -> Option<String> {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for (k, v) in x {
                    path.push(k.to_string());
                    let found = match y.get(k) {
                        Some(w) => walk(v, w, path),
                        None => Some(format!("{}: {v} against no such key", path.join("."))),
                    };
                    path.pop();
                    if found.is_some() {
                        return found;
                    }
                }
                y.keys()
                    .find(|k| !x.contains_key(*k))
                    .map(|k| format!("{}.{k}: no such key against {}", path.join("."), y[k]))
            }
            (Value::List(x), Value::List(y)) if x.len() == y.len() => {
                x.iter().zip(y).enumerate().find_map(|(i, (v, w))| {
                    path.push(i.to_string());
                    let found = walk(v, w, path);
                    path.pop();
                    found
                })
            }
            _ if a == b => None,
            _ => Some(format!("{}: {a} against {b}", path.join("."))),
        }
    }
    walk(a, b, &mut Vec::new())
}

/// The operation a document runs (its only one), its variables' values (those sent,
/// else their defaults), and its fragments.
pub struct Run<'a> {
    doc: &'a ExecutableDocument,
    operation: &'a OperationDefinition,
    variables: HashMap<String, ConstValue>,
}

impl<'a> Run<'a> {
    pub fn new(doc: &'a ExecutableDocument, sent: &serde_json::Value) -> Result<Run<'a>, String> {
        let operation =
            spec::operation(doc).ok_or("the document does not have exactly one operation")?;
        Ok(Run {
            doc,
            operation,
            variables: spec::coerced(operation, sent),
        })
    }

    /// Whether `directives` (`@skip`, `@include`) let their selection in.
    fn included(&self, directives: &[Positioned<Directive>]) -> bool {
        directives.iter().all(|d| {
            let condition = match d.node.get_argument("if").map(|v| &v.node) {
                Some(GqlValue::Boolean(b)) => *b,
                Some(GqlValue::Variable(v)) => {
                    matches!(
                        self.variables.get(v.as_str()),
                        Some(ConstValue::Boolean(true))
                    )
                }
                _ => return true,
            };
            match d.node.name.node.as_str() {
                "skip" => !condition,
                "include" => condition,
                _ => true,
            }
        })
    }
}

/// A field the operation collects for one object: its response key, the named type of
/// its value, and every selection set merged under that key.
struct Collected<'a> {
    key: String,
    ty: &'static str,
    sets: Vec<&'a SelectionSet>,
}

/// Collect the fields of `sets` for an object of type `object` (the spec's
/// CollectFields, over the selection sets merged under one key).
fn collect<'a>(
    run: &Run<'a>,
    object: &'static str,
    sets: &[&'a SelectionSet],
) -> Vec<Collected<'a>> {
    fn visit<'a>(
        run: &Run<'a>,
        object: &'static str,
        set: &'a SelectionSet,
        visited: &mut Vec<&'a str>,
        out: &mut Vec<Collected<'a>>,
    ) {
        for s in &set.items {
            match &s.node {
                Selection::Field(f) => {
                    let f = &f.node;
                    if !run.included(&f.directives) {
                        continue;
                    }
                    let key = f.response_key().node.to_string();
                    let name = f.name.node.as_str();
                    let ty = if name == "__typename" {
                        "String"
                    } else {
                        graph::public_fields(object)
                            .iter()
                            .find(|p| p.name == name)
                            .map(|p| graph::base(p.ty))
                            .unwrap_or("?")
                    };
                    match out.iter_mut().find(|c| c.key == key) {
                        Some(c) => c.sets.push(&f.selection_set.node),
                        None => out.push(Collected {
                            key,
                            ty,
                            sets: vec![&f.selection_set.node],
                        }),
                    }
                }
                Selection::InlineFragment(i) => {
                    let i = &i.node;
                    let applies = i
                        .type_condition
                        .as_ref()
                        .is_none_or(|c| graph::applies(c.node.on.node.as_str(), object));
                    if run.included(&i.directives) && applies {
                        visit(run, object, &i.selection_set.node, visited, out);
                    }
                }
                Selection::FragmentSpread(spread) => {
                    let name = spread.node.fragment_name.node.as_str();
                    let Some(f) = run.doc.fragments.get(name) else {
                        continue;
                    };
                    if visited.contains(&name)
                        || !run.included(&spread.node.directives)
                        || !graph::applies(f.node.type_condition.node.on.node.as_str(), object)
                    {
                        continue;
                    }
                    visited.push(name);
                    visit(run, object, &f.node.selection_set.node, visited, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    for set in sets {
        visit(run, object, set, &mut Vec::new(), &mut out);
    }
    out
}

/// Whether every object of `answer` (the `data` of a response to `run`) has its keys
/// in the order the operation selects them; the first object that does not, if one
/// does not.
pub fn in_query_order(run: &Run<'_>, answer: &Value) -> Result<(), String> {
    let root = &run.operation.selection_set.node;
    walk(run, "Query", &[root], answer, &mut vec!["data".into()])
}

fn walk(
    run: &Run<'_>,
    ty: &'static str,
    sets: &[&SelectionSet],
    value: &Value,
    path: &mut Vec<String>,
) -> Result<(), String> {
    match value {
        Value::Null => Ok(()),
        Value::List(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(i.to_string());
                walk(run, ty, sets, item, path)?;
                path.pop();
            }
            Ok(())
        }
        Value::Object(map) => {
            let got: Vec<&str> = map.keys().map(|k| k.as_str()).collect();
            let mut shapes = Vec::new();
            for object in graph::possible_types(ty) {
                let fields = collect(run, object, sets);
                let keys: Vec<&str> = fields.iter().map(|c| c.key.as_str()).collect();
                if keys == got {
                    for c in &fields {
                        path.push(c.key.clone());
                        walk(run, c.ty, &c.sets, &map[c.key.as_str()], path)?;
                        path.pop();
                    }
                    return Ok(());
                }
                shapes.push(format!("{object}: {keys:?}"));
            }
            Err(format!(
                "{}: keys {got:?}, where the operation selects, by type, {}",
                path.join("."),
                shapes.join("; ")
            ))
        }
        _ if graph::composite(ty) => Err(format!("{}: a leaf {value} for {ty}", path.join("."))),
        _ => Ok(()),
    }
}
