//! Validating a document once, not on every request.
//!
//! After the parser, async-graphql's validation is the largest cost left on a
//! subgraph's request: about a quarter of post-service's CPU on the seed query's
//! `_entities` request, which validates the same text with the same kind of variables
//! thousands of times a second. Apollo Router and graphql-js split the same work in two:
//! the document is validated once, and each request's variables are coerced on their
//! own. async-graphql does not offer that split, but it does offer a schema that skips
//! the rules (`ValidationMode::Fast`), and this module decides when skipping is exact.
//!
//! In async-graphql, strict validation of a document depends on three things: the
//! document, the operation chosen, and the *values* of the variables that arguments
//! refer to (each is checked against its argument's type). The first two are the key of
//! a memo; the third is reduced to its [`shape`]: the kind of every leaf (null, boolean,
//! integer, other number, string), the keys of every object, and the set of shapes in
//! every list. Two variable maps of the same shape get the same verdict **as long as
//! every input type checks a value by its kind alone**, which holds for `Int`, `Float`,
//! `String`, `Boolean`, `ID`, `_Any`, input objects, lists and non-nulls of these, and
//! not for enums (the value's text matters) or other custom scalars (anything may).
//! [`kind_checked_inputs`] reads the schema by introspection when the host starts, and
//! a schema with any other input type never skips validation.
//!
//! The memo learns only from a strict run that answered without any error: then the
//! document, the operation and that shape of variables are known to validate. A later
//! request with the same three runs on the fast schema (the same schema over the same
//! data, with only the validation rules that the strict mode would have run and passed
//! left out), so it gets the answer the strict schema would have given. Anything new,
//! and anything whose shape is larger than [`MAX_SHAPE`], runs strict.

use std::sync::Mutex;

use async_graphql::{Executor, Request, Variables};
use async_graphql_value::ConstValue;

/// The longest shape remembered; requests with larger ones always validate in full.
pub const MAX_SHAPE: usize = 256;
/// How many (operation, shape) pairs one document remembers.
pub const MAX_SHAPES: usize = 4;

/// The (operation, variables' shape) pairs one document has passed strict validation
/// with.
#[derive(Debug, Default)]
pub struct Validated {
    passed: Mutex<Vec<(Option<String>, String)>>,
}

impl Validated {
    /// Bytes this memo may come to hold, at most.
    pub const MAX_BYTES: usize = MAX_SHAPES * (MAX_SHAPE + 64);

    /// Has `operation` with variables of `shape` passed strict validation before?
    pub fn knows(&self, operation: &Option<String>, shape: &str) -> bool {
        let passed = self.passed.lock().unwrap_or_else(|p| p.into_inner());
        passed.iter().any(|(o, s)| o == operation && s == shape)
    }

    /// Remember that `operation` with variables of `shape` passed strict validation.
    pub fn remember(&self, operation: Option<String>, shape: String) {
        let mut passed = self.passed.lock().unwrap_or_else(|p| p.into_inner());
        if passed.len() < MAX_SHAPES && !passed.iter().any(|(o, s)| *o == operation && *s == shape)
        {
            passed.push((operation, shape));
        }
    }
}

/// The shape of a request's variables, or `None` when it is longer than [`MAX_SHAPE`].
pub fn shape(variables: &Variables) -> Option<String> {
    let mut out = String::new();
    for (name, value) in variables.iter() {
        out.push_str(name);
        out.push(':');
        write_shape(value, &mut out);
        out.push(',');
        if out.len() > MAX_SHAPE {
            return None;
        }
    }
    (out.len() <= MAX_SHAPE).then_some(out)
}

fn write_shape(value: &ConstValue, out: &mut String) {
    match value {
        ConstValue::Null => out.push('n'),
        ConstValue::Boolean(_) => out.push('b'),
        ConstValue::Number(n) if n.is_i64() => out.push('i'),
        ConstValue::Number(_) => out.push('f'),
        ConstValue::String(_) => out.push('s'),
        // Neither comes from JSON variables; their content may matter.
        ConstValue::Enum(e) => {
            out.push('e');
            out.push_str(e);
        }
        ConstValue::Binary(_) => out.push('x'),
        ConstValue::List(items) => {
            // A list is valid when each element is: the set of element shapes decides.
            let mut shapes: Vec<String> = items
                .iter()
                .map(|item| {
                    let mut s = String::new();
                    write_shape(item, &mut s);
                    s
                })
                .collect();
            shapes.sort_unstable();
            shapes.dedup();
            out.push('[');
            out.push_str(&shapes.join("|"));
            out.push(']');
        }
        ConstValue::Object(fields) => {
            let mut keys: Vec<(&str, &ConstValue)> =
                fields.iter().map(|(k, v)| (k.as_str(), v)).collect();
            keys.sort_unstable_by_key(|(k, _)| *k);
            out.push('{');
            for (k, v) in keys {
                out.push_str(k);
                out.push(':');
                write_shape(v, out);
                out.push(',');
            }
            out.push('}');
        }
    }
}

/// The scalars whose validity in async-graphql depends only on a value's kind.
const KIND_CHECKED: [&str; 6] = ["Int", "Float", "String", "Boolean", "ID", "_Any"];

/// Does every argument and input field of `executor`'s schema take only kind-checked
/// scalars, input objects, and lists and non-nulls of those? Read by introspection; a
/// schema that cannot be read answers no.
pub fn kind_checked_inputs<E: Executor>(executor: &E) -> bool {
    const QUERY: &str = "{ __schema { types { inputFields { type { ...T } } \
        fields(includeDeprecated: true) { args { type { ...T } } } } \
        directives { args { type { ...T } } } } } \
        fragment T on __Type { kind name ofType { kind name ofType { kind name \
        ofType { kind name ofType { kind name ofType { kind name } } } } } }";
    let Some(response) = run_now(executor.execute(Request::new(QUERY))) else {
        return false;
    };
    if !response.errors.is_empty() {
        return false;
    }
    let Ok(data) = response.data.into_json() else {
        return false;
    };
    let mut ok = true;
    let mut check = |ty: &serde_json::Value| {
        let mut t = ty;
        while matches!(t["kind"].as_str(), Some("LIST" | "NON_NULL")) {
            t = &t["ofType"];
        }
        ok &= match t["kind"].as_str() {
            Some("INPUT_OBJECT") => true,
            Some("SCALAR") => KIND_CHECKED.contains(&t["name"].as_str().unwrap_or("")),
            _ => false,
        };
    };
    let schema = &data["__schema"];
    let empty = Vec::new();
    let list = |v: &serde_json::Value| v.as_array().unwrap_or(&empty).clone();
    for ty in list(&schema["types"]) {
        for field in list(&ty["inputFields"]) {
            check(&field["type"]);
        }
        for field in list(&ty["fields"]) {
            for arg in list(&field["args"]) {
                check(&arg["type"]);
            }
        }
    }
    for directive in list(&schema["directives"]) {
        for arg in list(&directive["args"]) {
            check(&arg["type"]);
        }
    }
    ok
}

/// Poll `future` to completion on this thread, for work that never waits (an
/// introspection query); `None` if it does wait.
fn run_now<F: std::future::Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    for _ in 0..1000 {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return Some(out);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape_of(json: serde_json::Value) -> Option<String> {
        shape(&Variables::from_json(json))
    }

    #[test]
    fn shapes_keep_what_validity_depends_on() {
        let reps = |ids: &[&str]| serde_json::json!({ "r0": ids.iter().map(|id| serde_json::json!({ "__typename": "User", "id": id })).collect::<Vec<_>>() });
        // Which keys, how many elements: not the verdict.
        assert_eq!(shape_of(reps(&["u1"])), shape_of(reps(&["u2", "u3", "u4"])));
        // Kinds and keys: the verdict.
        let differ = [
            serde_json::json!({ "c": 1 }),
            serde_json::json!({ "c": 1.5 }),
            serde_json::json!({ "c": "1" }),
            serde_json::json!({ "c": null }),
            serde_json::json!({ "c": true }),
            serde_json::json!({ "c": [1] }),
            serde_json::json!({ "c": [1, null] }),
            serde_json::json!({ "c": { "a": 1 } }),
            serde_json::json!({ "c": { "b": 1 } }),
            serde_json::json!({ "d": 1 }),
        ];
        let shapes: std::collections::HashSet<_> =
            differ.iter().map(|v| shape_of(v.clone())).collect();
        assert_eq!(shapes.len(), differ.len());
        assert_eq!(
            shape_of(serde_json::json!({ "c": 2 })),
            shape_of(serde_json::json!({ "c": -7 }))
        );
        // Not an i64 either way: no kind-checked scalar tells them apart.
        assert_eq!(
            shape_of(serde_json::json!({ "c": 1.5 })),
            shape_of(serde_json::json!({ "c": 18446744073709551615u64 }))
        );
        let big: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
        let big: serde_json::Map<String, serde_json::Value> =
            big.into_iter().map(|k| (k, serde_json::json!(1))).collect();
        assert_eq!(shape_of(serde_json::Value::Object(big)), None);
    }

    #[test]
    fn the_memo_remembers_a_bounded_number_of_shapes() {
        let memo = Validated::default();
        assert!(!memo.knows(&None, "a"));
        memo.remember(None, "a".into());
        assert!(memo.knows(&None, "a"));
        assert!(!memo.knows(&Some("Op".into()), "a"));
        for s in ["b", "c", "d", "e", "f"] {
            memo.remember(None, s.into());
        }
        assert!(memo.knows(&None, "d") && !memo.knows(&None, "e"));
    }
}
