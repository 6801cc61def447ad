//! The response body, written in the order the query asked for its fields.
//!
//! async-graphql 7.2 resolves sibling fields concurrently and assembles each object in
//! the order its fields *finish*, so a fast subgraph can overtake a slow one. GraphQL
//! wants the order of the query. [`write_body`] writes the JSON by walking the
//! request's parsed document and the data together.

use std::collections::HashMap;

use async_graphql::{ServerError, Variables};
use async_graphql_parser::types::{
    BaseType, DocumentOperations, ExecutableDocument, Field, OperationDefinition, OperationType,
    SelectionSet, Type,
};
use async_graphql_value::{indexmap::IndexMap, ConstValue, Name};

use crate::plan::DocumentView;
use crate::supergraph::{base_name, Supergraph};

/// The operation of `doc` that `operation_name` selects, if that is unambiguous.
pub fn selected_operation<'d>(
    doc: &'d ExecutableDocument,
    operation_name: Option<&str>,
) -> Option<&'d OperationDefinition> {
    match (&doc.operations, operation_name) {
        (DocumentOperations::Single(op), _) => Some(&op.node),
        (DocumentOperations::Multiple(ops), Some(name)) => ops.get(name).map(|op| &op.node),
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => {
            ops.values().next().map(|op| &op.node)
        }
        (DocumentOperations::Multiple(_), None) => None,
    }
}

/// async-graphql's dynamic schema adds this when a non-null field resolved to null;
/// the gateway has already reported why, at the same path.
const NON_NULL_ECHO: &str = "internal: non-null types require a return value";

/// Serialize `response` with every object's keys in query order and nulls propagated
/// to the nearest nullable parent. `executed` is false for a request error (the
/// document did not parse or validate): then the body has no `data`, as the spec asks.
pub fn write_body(
    response: &async_graphql::Response,
    document: Option<&ExecutableDocument>,
    operation_name: Option<&str>,
    variables: &Variables,
    supergraph: &Supergraph,
    executed: bool,
) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    out.push(b'{');
    if executed {
        out.extend_from_slice(b"\"data\":");
        let operation =
            document.and_then(|doc| Some((doc, selected_operation(doc, operation_name)?)));
        match (operation, &response.data) {
            (Some((doc, op)), ConstValue::Object(map)) => {
                let view = DocumentView {
                    fragments: &doc.fragments,
                    variables,
                    operation: op,
                };
                let root = match op.ty {
                    OperationType::Mutation => supergraph.mutation_type.as_deref(),
                    _ => Some(supergraph.query_type.as_str()),
                };
                let writer = Writer { view, supergraph };
                let start = out.len();
                if !writer.object(&mut out, map, root, &[&op.selection_set.node])? {
                    out.truncate(start);
                    out.extend_from_slice(b"null");
                }
            }
            (_, data) => serde_json::to_writer(&mut out, data)?,
        }
    }
    let errors: Vec<&ServerError> = response
        .errors
        .iter()
        .filter(|e| {
            e.message != NON_NULL_ECHO
                || !response
                    .errors
                    .iter()
                    .any(|o| o.message != NON_NULL_ECHO && o.path == e.path)
        })
        .collect();
    if !errors.is_empty() {
        if executed {
            out.push(b',');
        }
        out.extend_from_slice(b"\"errors\":");
        serde_json::to_writer(&mut out, &errors)?;
    }
    if !response.extensions.is_empty() {
        out.extend_from_slice(b",\"extensions\":");
        serde_json::to_writer(&mut out, &response.extensions)?;
    }
    out.push(b'}');
    Ok(out)
}

struct Writer<'a> {
    view: DocumentView<'a>,
    supergraph: &'a Supergraph,
}

/// Whether null may stand at a position of type `ty` (unknown types, inside
/// introspection results, may be null).
fn nullable(ty: Option<&Type>) -> bool {
    ty.is_none_or(|t| t.nullable)
}

impl Writer<'_> {
    /// Write `value`, of schema type `ty` when known. Returns false when the value is
    /// null where `ty` forbids it (after propagation): the caller must null itself.
    fn value(
        &self,
        out: &mut Vec<u8>,
        value: &ConstValue,
        ty: Option<&Type>,
        sets: &[&SelectionSet],
    ) -> serde_json::Result<bool> {
        let start = out.len();
        let ok = match value {
            ConstValue::Null => {
                out.extend_from_slice(b"null");
                return Ok(nullable(ty));
            }
            ConstValue::Object(map) if !sets.is_empty() => {
                let object_type = ty.map(base_name);
                self.object(out, map, object_type, sets)?
            }
            ConstValue::List(items) => {
                let item_type = ty.and_then(|t| match &t.base {
                    BaseType::List(inner) => Some(&**inner),
                    BaseType::Named(_) => None,
                });
                out.push(b'[');
                let mut ok = true;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    if !self.value(out, item, item_type, sets)? {
                        ok = false;
                        break;
                    }
                }
                out.push(b']');
                ok
            }
            leaf => {
                serde_json::to_writer(&mut *out, leaf)?;
                true
            }
        };
        if ok {
            return Ok(true);
        }
        out.truncate(start);
        out.extend_from_slice(b"null");
        Ok(nullable(ty))
    }

    /// Write an object of type `ty` (`None` inside introspection results, where every
    /// fragment is taken to apply). Returns false when a non-null field is null.
    fn object(
        &self,
        out: &mut Vec<u8>,
        map: &IndexMap<Name, ConstValue>,
        ty: Option<&str>,
        sets: &[&SelectionSet],
    ) -> serde_json::Result<bool> {
        let mut fields = Vec::new();
        for set in sets {
            self.view.collect_fields(ty, set, &mut fields);
        }
        let groups = ResponseKeys::group(&fields);
        let object = ty.and_then(|t| self.supergraph.object(t));
        out.push(b'{');
        for (i, (key, field, child_sets)) in groups.entries.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let child_ty = object
                .and_then(|o| o.fields.get(field.name.node.as_str()))
                .map(|def| &def.ty);
            serde_json::to_writer(&mut *out, key)?;
            out.push(b':');
            // async-graphql usually assembles an object in query order: try the same
            // position first, and look the key up only when it is elsewhere. A field
            // async-graphql left out (its resolver failed) is null.
            let value = match map.get_index(i) {
                Some((k, v)) if k.as_str() == *key => v,
                _ => map.get(*key).unwrap_or(&ConstValue::Null),
            };
            if !self.value(out, value, child_ty, child_sets)? {
                return Ok(false);
            }
        }
        // Anything the document does not explain keeps async-graphql's order.
        let mut written = groups.entries.len();
        for (key, value) in map {
            if !groups.contains(key.as_str()) {
                if written > 0 {
                    out.push(b',');
                }
                written += 1;
                serde_json::to_writer(&mut *out, key.as_str())?;
                out.push(b':');
                serde_json::to_writer(&mut *out, value)?;
            }
        }
        out.push(b'}');
        Ok(true)
    }
}

/// The fields of one object grouped by response key, in the order each key first
/// appears, each with the sub-selections of every field that shares the key (GraphQL
/// merges them). Linear in the number of fields: a 1000-alias document must not cost
/// a million comparisons per object.
struct ResponseKeys<'d> {
    entries: Vec<(&'d str, &'d Field, Vec<&'d SelectionSet>)>,
    /// Key → position in `entries`, built only for objects with many fields; small
    /// objects are searched linearly, which is cheaper than hashing.
    index: Option<HashMap<&'d str, usize>>,
}

/// Above this many fields an object's keys are indexed by a hash map.
const LINEAR_SEARCH_MAX: usize = 16;

impl<'d> ResponseKeys<'d> {
    fn group(fields: &[&'d Field]) -> ResponseKeys<'d> {
        let mut keys = ResponseKeys {
            entries: Vec::with_capacity(fields.len()),
            index: (fields.len() > LINEAR_SEARCH_MAX).then(|| HashMap::with_capacity(fields.len())),
        };
        for field in fields {
            let key = field.response_key().node.as_str();
            match keys.position(key) {
                Some(i) => keys.entries[i].2.push(&field.selection_set.node),
                None => {
                    if let Some(index) = &mut keys.index {
                        index.insert(key, keys.entries.len());
                    }
                    keys.entries
                        .push((key, field, vec![&field.selection_set.node]));
                }
            }
        }
        keys
    }

    fn position(&self, key: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(key).copied(),
            None => self.entries.iter().position(|(k, _, _)| *k == key),
        }
    }

    fn contains(&self, key: &str) -> bool {
        self.position(key).is_some()
    }
}
