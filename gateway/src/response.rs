//! The response body, written in the order the query asked for its fields.
//!
//! async-graphql 7.2 resolves sibling fields concurrently and assembles each object in
//! the order its fields *finish*, so a fast subgraph can overtake a slow one. GraphQL
//! wants the order of the query. [`write_body`] writes the JSON by walking the
//! request's parsed document and the data together.

use async_graphql::Variables;
use async_graphql_parser::types::{DocumentOperations, ExecutableDocument, SelectionSet};
use async_graphql_value::{indexmap::IndexMap, ConstValue, Name};

use crate::plan::DocumentView;
use crate::supergraph::{base_name, Supergraph};

/// Serialize `response` with every object's keys in query order.
pub fn write_body(
    response: &async_graphql::Response,
    document: Option<&ExecutableDocument>,
    operation_name: Option<&str>,
    variables: &Variables,
    supergraph: &Supergraph,
) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"data\":");
    let operation = document.and_then(|doc| match &doc.operations {
        DocumentOperations::Single(op) => Some((doc, &op.node)),
        DocumentOperations::Multiple(ops) => match operation_name {
            Some(name) => ops.get(name).map(|op| (doc, &op.node)),
            None => None,
        },
    });
    match (operation, &response.data) {
        (Some((doc, op)), ConstValue::Object(map)) => {
            let view = DocumentView {
                fragments: &doc.fragments,
                variables,
                operation: op,
            };
            let root = match op.ty {
                async_graphql_parser::types::OperationType::Mutation => {
                    supergraph.mutation_type.as_deref()
                }
                _ => Some(supergraph.query_type.as_str()),
            };
            let writer = Writer { view, supergraph };
            writer.object(&mut out, map, root, &[&op.selection_set.node])?;
        }
        (_, data) => serde_json::to_writer(&mut out, data)?,
    }
    if !response.errors.is_empty() {
        out.extend_from_slice(b",\"errors\":");
        serde_json::to_writer(&mut out, &response.errors)?;
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

impl Writer<'_> {
    fn value(
        &self,
        out: &mut Vec<u8>,
        value: &ConstValue,
        ty: Option<&str>,
        sets: &[&SelectionSet],
    ) -> serde_json::Result<()> {
        match value {
            ConstValue::Object(map) if !sets.is_empty() => self.object(out, map, ty, sets),
            ConstValue::List(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    self.value(out, item, ty, sets)?;
                }
                out.push(b']');
                Ok(())
            }
            leaf => serde_json::to_writer(out, leaf),
        }
    }

    /// `ty` is the object's type when known (`None` inside introspection results,
    /// where every fragment is taken to apply).
    fn object(
        &self,
        out: &mut Vec<u8>,
        map: &IndexMap<Name, ConstValue>,
        ty: Option<&str>,
        sets: &[&SelectionSet],
    ) -> serde_json::Result<()> {
        let mut fields = Vec::new();
        for set in sets {
            self.view.collect_fields(ty, set, &mut fields);
        }
        let mut written: Vec<&str> = Vec::with_capacity(map.len());
        out.push(b'{');
        for field in &fields {
            let key = field.response_key().node.as_str();
            if written.contains(&key) {
                continue;
            }
            let Some(value) = map.get(key) else { continue };
            if !written.is_empty() {
                out.push(b',');
            }
            written.push(key);
            let child_sets: Vec<&SelectionSet> = fields
                .iter()
                .filter(|f| f.response_key().node == key)
                .map(|f| &f.selection_set.node)
                .collect();
            let child_ty = ty
                .and_then(|t| self.supergraph.field(t, field.name.node.as_str()))
                .map(|def| base_name(&def.ty));
            serde_json::to_writer(&mut *out, key)?;
            out.push(b':');
            self.value(out, value, child_ty, &child_sets)?;
        }
        // Anything the document does not explain keeps async-graphql's order.
        for (key, value) in map {
            if !written.contains(&key.as_str()) {
                if !written.is_empty() {
                    out.push(b',');
                }
                written.push(key.as_str());
                serde_json::to_writer(&mut *out, key.as_str())?;
                out.push(b':');
                serde_json::to_writer(&mut *out, value)?;
            }
        }
        out.push(b'}');
        Ok(())
    }
}
