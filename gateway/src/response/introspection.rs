//! Introspection's root fields in the response: async-graphql's answer, written
//! with its objects' keys in the order the document asks for them.

use async_graphql_parser::types::{DocumentOperations, ExecutableDocument, SelectionSet};
use async_graphql_value::{indexmap::IndexMap, ConstValue, Name};

use crate::plan::DocumentView;

/// Write root field `key` of async-graphql's `response` to the introspection
/// document `doc`; `null` when either is missing.
pub fn write(
    out: &mut Vec<u8>,
    response: Option<&async_graphql::Response>,
    doc: Option<&ExecutableDocument>,
    variables: &async_graphql::Variables,
    key: &str,
) {
    let (Some(response), Some(doc)) = (response, doc) else {
        out.extend_from_slice(b"null");
        return;
    };
    let value = match &response.data {
        ConstValue::Object(map) => map.get(key).unwrap_or(&ConstValue::Null),
        _ => &ConstValue::Null,
    };
    let view = match &doc.operations {
        DocumentOperations::Single(op) => DocumentView {
            fragments: &doc.fragments,
            variables,
            operation: &op.node,
        },
        DocumentOperations::Multiple(_) => {
            out.extend_from_slice(b"null");
            return;
        }
    };
    let sets: Vec<&SelectionSet> = view
        .merged(&|_| true, &[&view.operation.selection_set.node])
        .into_iter()
        .find(|m| m.key == key)
        .map(|m| m.sets)
        .unwrap_or_default();
    const_value(out, &view, value, &sets);
}

/// Write an async-graphql value, objects' keys in the order `sets` select them.
fn const_value(
    out: &mut Vec<u8>,
    view: &DocumentView<'_>,
    value: &ConstValue,
    sets: &[&SelectionSet],
) {
    match value {
        ConstValue::Object(map) if !sets.is_empty() => const_object(out, view, map, sets),
        ConstValue::List(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                const_value(out, view, item, sets);
            }
            out.push(b']');
        }
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

fn const_object(
    out: &mut Vec<u8>,
    view: &DocumentView<'_>,
    map: &IndexMap<Name, ConstValue>,
    sets: &[&SelectionSet],
) {
    let fields = view.merged(&|_| true, sets);
    out.push(b'{');
    let mut written = 0;
    for m in &fields {
        if let Some(value) = map.get(m.key) {
            if written > 0 {
                out.push(b',');
            }
            written += 1;
            super::key(out, m.key);
            const_value(out, view, value, &m.sets);
        }
    }
    // Anything the document does not explain keeps async-graphql's order.
    for (k, value) in map {
        if !fields.iter().any(|m| m.key == k.as_str()) {
            if written > 0 {
                out.push(b',');
            }
            written += 1;
            super::key(out, k);
            let _ = serde_json::to_writer(&mut *out, value);
        }
    }
    out.push(b'}');
}
