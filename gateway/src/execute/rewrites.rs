//! The planner's rewrites of values, applied where it asks for them.
//!
//! Two kinds, each with a path into a value (`TypenameEquals` steps match objects
//! whose `__typename` satisfies one of the types, `Key` steps descend, lists are
//! walked through):
//!
//! - a **value setter** puts a string at the path: the planner uses it to give an
//!   interface object's representation the interface's name as its `__typename`;
//! - a **key renamer** renames the member at the path: where two fields of one
//!   answer would share a response key with different types, the planner asks for
//!   one under an alias and renames it back.
//!
//! Input rewrites apply to representations, output rewrites to a fetch's answer
//! before it is read. Both are rare, so this works on `serde_json` values, off the
//! common path: the tape-based data never needs them.

use hive_router_query_planner::planner::plan_nodes::{FetchNodePathSegment, FetchRewrite};
use serde_json::Value;

use crate::supergraph::Supergraph;

/// One rewrite, as the planner gives it.
pub type Rewrite = FetchRewrite;

/// Apply `rewrites` to `value`.
pub fn apply(rewrites: &[FetchRewrite], value: &mut Value, supergraph: &Supergraph) {
    for rewrite in rewrites {
        match rewrite {
            FetchRewrite::ValueSetter(s) => set(value, &s.path, &s.set_value_to, supergraph),
            FetchRewrite::KeyRenamer(r) => rename(value, &r.path, &r.rename_key_to, supergraph),
        }
    }
}

/// Apply `rewrites` to the JSON text `json`; the text unchanged when it does not
/// parse.
pub fn apply_to_text(rewrites: &[FetchRewrite], json: &[u8], supergraph: &Supergraph) -> Vec<u8> {
    match serde_json::from_slice::<Value>(json) {
        Ok(mut value) => {
            apply(rewrites, &mut value, supergraph);
            serde_json::to_vec(&value).unwrap_or_else(|_| json.to_vec())
        }
        Err(_) => json.to_vec(),
    }
}

fn matches(
    object: &serde_json::Map<String, Value>,
    types: &std::collections::BTreeSet<String>,
    supergraph: &Supergraph,
) -> bool {
    match object.get("__typename").and_then(Value::as_str) {
        Some(ty) => types.iter().any(|t| supergraph.satisfies(ty, t)),
        None => true,
    }
}

fn set(value: &mut Value, path: &[FetchNodePathSegment], to: &str, supergraph: &Supergraph) {
    let Some((step, rest)) = path.split_first() else {
        *value = Value::String(to.to_string());
        return;
    };
    match value {
        Value::Array(items) => items.iter_mut().for_each(|i| set(i, path, to, supergraph)),
        Value::Object(object) => match step {
            FetchNodePathSegment::TypenameEquals(types) => {
                if matches(object, types, supergraph) {
                    set(value, rest, to, supergraph);
                }
            }
            FetchNodePathSegment::Key(key) => {
                if let Some(v) = object.get_mut(key) {
                    set(v, rest, to, supergraph);
                }
            }
        },
        _ => {}
    }
}

fn rename(value: &mut Value, path: &[FetchNodePathSegment], to: &str, supergraph: &Supergraph) {
    let Some((step, rest)) = path.split_first() else {
        return;
    };
    match value {
        Value::Array(items) => items
            .iter_mut()
            .for_each(|i| rename(i, path, to, supergraph)),
        Value::Object(object) => match step {
            FetchNodePathSegment::TypenameEquals(types) => {
                if matches(object, types, supergraph) {
                    rename(value, rest, to, supergraph);
                }
            }
            FetchNodePathSegment::Key(key) if rest.is_empty() => {
                if key != to {
                    if let Some(v) = object.remove(key) {
                        object.insert(to.to_string(), v);
                    }
                }
            }
            FetchNodePathSegment::Key(key) => {
                if let Some(v) = object.get_mut(key) {
                    rename(v, rest, to, supergraph);
                }
            }
        },
        _ => {}
    }
}
