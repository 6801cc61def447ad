//! The response body, written from the subgraphs' raw JSON in the order the query
//! asked for its fields.
//!
//! [`write()`] walks the plan's shape ([`crate::plan::Selection`]) and the pieces
//! execution found, together: each field's value is read from the object's own
//! data, from the entity piece fetched for that object, or answered by the gateway
//! (`__typename`), and leaves are copied as the subgraph wrote them. Errors are
//! reported on the way, where the path is known: a subgraph's error at the field
//! its path names, a failed fetch at every field it was for, with its location in
//! the document. A null where the type forbids one nulls the nearest nullable
//! parent, as GraphQL requires; the rest of the object is still walked for errors.
//!
//! A field answered from an entry the cache served in place of a failed fetch
//! (`stale-if-error`) is named in the response's `extensions`:
//! `"extensions":{"staleIfError":[{"path":["getPost"],"staleSeconds":3.2}]}`, with how
//! long past its freshness the entry was.

use std::sync::Arc;
use std::time::Duration;

use async_graphql::ServerError;
use async_graphql_parser::types::{DocumentOperations, ExecutableDocument, SelectionSet};
use async_graphql_parser::Pos;
use async_graphql_value::{indexmap::IndexMap, ConstValue, Name};

use crate::execute::{Outcome, RequestInput};
use crate::json::{Kind, Tape, Value};
use crate::piece::Piece;
use crate::plan::{DocumentView, OutField, Plan, Selection, Source};
use crate::upstream::{PathItem, UpstreamError};

/// `{"data":…,"errors":[…]}` for an executed operation; returns whether it has
/// errors.
pub fn write(out: &mut Vec<u8>, plan: &Plan, outcome: &Outcome, input: &RequestInput) -> bool {
    let mut writer = Writer {
        outcome,
        input,
        plan,
        path: Vec::with_capacity(8),
        errors: Vec::new(),
        count: 0,
        stale: Vec::new(),
    };
    out.extend_from_slice(b"{\"data\":");
    let start = out.len();
    if !writer.root(out) {
        out.truncate(start);
        out.extend_from_slice(b"null");
    }
    if let Some(response) = &outcome.introspection {
        for error in &response.errors {
            writer.separator();
            let _ = serde_json::to_writer(&mut writer.errors, error);
        }
    }
    let failed = writer.count > 0;
    if failed {
        out.extend_from_slice(b",\"errors\":[");
        out.extend_from_slice(&writer.errors);
        out.push(b']');
    }
    if !writer.stale.is_empty() {
        out.extend_from_slice(b",\"extensions\":{\"staleIfError\":[");
        out.extend_from_slice(&writer.stale);
        out.extend_from_slice(b"]}");
    }
    out.push(b'}');
    failed
}

/// `{"errors":[…]}` for a request that was not executed.
pub fn write_errors(out: &mut Vec<u8>, errors: &[ServerError]) {
    out.extend_from_slice(b"{\"errors\":");
    // ServerErrors always serialize.
    let _ = serde_json::to_writer(&mut *out, errors);
    out.push(b'}');
}

/// One step of a response path.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

struct Writer<'a> {
    plan: &'a Plan,
    outcome: &'a Outcome,
    input: &'a RequestInput,
    path: Vec<Step<'a>>,
    /// The errors' JSON, comma-separated.
    errors: Vec<u8>,
    count: usize,
    /// The stale-if-error notes' JSON, comma-separated.
    stale: Vec<u8>,
}

impl<'a> Writer<'a> {
    fn separator(&mut self) {
        if self.count > 0 {
            self.errors.push(b',');
        }
        self.count += 1;
    }

    /// Report `message` at the current path followed by `rest`.
    fn error(&mut self, message: &str, at: Option<Pos>, rest: &[PathItem]) {
        self.separator();
        let out = &mut self.errors;
        out.extend_from_slice(b"{\"message\":");
        let _ = serde_json::to_writer(&mut *out, message);
        if let Some(pos) = at {
            out.extend_from_slice(
                format!(
                    ",\"locations\":[{{\"line\":{},\"column\":{}}}]",
                    pos.line, pos.column
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(b",\"path\":");
        write_path(out, &self.path, rest);
        out.push(b'}');
    }

    /// Note that the current field was answered from an entry served `stale_for`
    /// past its freshness, in place of a failed fetch.
    fn stale_note(&mut self, stale_for: Duration) {
        if !self.stale.is_empty() {
            self.stale.push(b',');
        }
        self.stale.extend_from_slice(b"{\"path\":");
        write_path(&mut self.stale, &self.path, &[]);
        self.stale.extend_from_slice(
            format!(",\"staleSeconds\":{:.3}}}", stale_for.as_secs_f64()).as_bytes(),
        );
    }

    /// Report a subgraph's errors that concern `field` (the current path's last
    /// step): those whose path starts with its key, and those without a path.
    fn field_errors(&mut self, errors: &[UpstreamError], key: &str) {
        for e in errors {
            match e.path.split_first() {
                None => self.error(&e.message, None, &[]),
                Some((PathItem::Key(k), rest)) if k == key => self.error(&e.message, None, rest),
                Some(_) => {}
            }
        }
    }

    fn root(&mut self, out: &mut Vec<u8>) -> bool {
        let plan = self.plan;
        let selection = &plan.root;
        out.push(b'{');
        let mut ok = true;
        for (i, field) in selection.fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            key(out, &field.key);
            self.path.push(Step::Key(&field.key));
            let field_ok = match field.source {
                Source::Typename => {
                    string(out, &selection.type_name);
                    true
                }
                Source::Root(r) => match &self.outcome.roots[r as usize] {
                    Some(Ok(piece)) => {
                        // Paths are relative to the field's value: report them all here.
                        for e in piece.errors.iter() {
                            self.error(&e.message, None, &e.path);
                        }
                        if let Some(stale_for) = piece.served_stale {
                            self.stale_note(stale_for);
                        }
                        self.value(out, piece.value(), piece.tape(), field, 0)
                    }
                    Some(Err(failure)) => self.failed(out, field, failure),
                    None => null(out, field),
                },
                Source::Introspection => {
                    self.introspection(out, &field.key);
                    true
                }
                Source::Carried | Source::Site(_) => null(out, field),
            };
            self.path.pop();
            ok &= field_ok;
        }
        out.push(b'}');
        ok
    }

    /// A fetch for `field` failed: its error at the field, and null.
    fn failed(&mut self, out: &mut Vec<u8>, field: &OutField, failure: &str) -> bool {
        self.error(failure, Some(field.pos), &[]);
        null(out, field)
    }

    /// Write `object` (of `tape`) with `selection`. False when a non-null field is
    /// null: the caller must null the object.
    fn object(
        &mut self,
        out: &mut Vec<u8>,
        selection: &'a Selection,
        tape: &Arc<Tape>,
        object: Value<'_>,
    ) -> bool {
        let id = crate::execute::object_id(tape, object);
        out.push(b'{');
        let mut cursor = 0u32;
        let mut ok = true;
        for (i, field) in selection.fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            key(out, &field.key);
            self.path.push(Step::Key(&field.key));
            let field_ok = match field.source {
                Source::Typename => {
                    string(out, &selection.type_name);
                    true
                }
                Source::Carried => {
                    let value = object.get_from(&field.key, &mut cursor);
                    self.value(out, value, tape, field, 0)
                }
                Source::Site(site) => match self.outcome.sites.get(&(site, id)) {
                    Some(Ok(piece)) => self.entity_field(out, piece, field),
                    Some(Err(failure)) => self.failed(out, field, failure),
                    None => null(out, field),
                },
                Source::Root(_) | Source::Introspection => null(out, field),
            };
            self.path.pop();
            ok &= field_ok;
        }
        out.push(b'}');
        ok
    }

    /// `field`'s value in an entity piece, after the piece's errors that concern it.
    fn entity_field(&mut self, out: &mut Vec<u8>, piece: &Piece, field: &'a OutField) -> bool {
        self.field_errors(&piece.errors, &field.key);
        if let Some(stale_for) = piece.served_stale {
            self.stale_note(stale_for);
        }
        let value = piece.value().and_then(|v| v.get(&field.key));
        self.value(out, value, piece.tape(), field, 0)
    }

    /// Write `value` at list level `level` of `field`'s type. False when it is null
    /// (after propagation) where the type forbids it.
    fn value(
        &mut self,
        out: &mut Vec<u8>,
        value: Option<Value<'_>>,
        tape: &Arc<Tape>,
        field: &'a OutField,
        level: usize,
    ) -> bool {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return null_at(out, field, level);
        };
        let start = out.len();
        if field.shape.is_list(level) {
            if value.kind() != Kind::Array {
                return self.mismatch(out, field, level, "a list");
            }
            out.push(b'[');
            let mut ok = true;
            for (i, item) in value.items().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                self.path.push(Step::Index(i));
                ok &= self.value(out, Some(item), tape, field, level + 1);
                self.path.pop();
            }
            out.push(b']');
            if ok {
                return true;
            }
        } else if let Some(children) = &field.children {
            if value.kind() != Kind::Object {
                return self.mismatch(out, field, level, "an object");
            }
            if self.object(out, children, tape, value) {
                return true;
            }
        } else {
            out.extend_from_slice(value.raw());
            return true;
        }
        out.truncate(start);
        null_at(out, field, level)
    }

    fn mismatch(
        &mut self,
        out: &mut Vec<u8>,
        field: &OutField,
        level: usize,
        expected: &str,
    ) -> bool {
        let message = format!(
            "a subgraph returned something other than {expected} for {}",
            field.key
        );
        self.error(&message, Some(field.pos), &[]);
        null_at(out, field, level)
    }

    /// An introspection root field, from async-graphql's answer, its objects' keys in
    /// query order.
    fn introspection(&mut self, out: &mut Vec<u8>, key: &str) {
        let (Some(response), Some(doc)) = (&self.outcome.introspection, &self.plan.introspection)
        else {
            out.extend_from_slice(b"null");
            return;
        };
        let value = match &response.data {
            ConstValue::Object(map) => map.get(key).unwrap_or(&ConstValue::Null),
            _ => &ConstValue::Null,
        };
        let Some(view) = introspection_view(doc, &self.input.graphql_variables) else {
            out.extend_from_slice(b"null");
            return;
        };
        let sets: Vec<&SelectionSet> = view
            .merged(None, &[&view.operation.selection_set.node])
            .into_iter()
            .find(|m| m.key == key)
            .map(|m| m.sets)
            .unwrap_or_default();
        const_value(out, &view, value, &sets);
    }
}

fn introspection_view<'d>(
    doc: &'d ExecutableDocument,
    variables: &'d async_graphql::Variables,
) -> Option<DocumentView<'d>> {
    match &doc.operations {
        DocumentOperations::Single(op) => Some(DocumentView {
            fragments: &doc.fragments,
            variables,
            operation: &op.node,
        }),
        DocumentOperations::Multiple(_) => None,
    }
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
    let fields = view.merged(None, sets);
    out.push(b'{');
    let mut written = 0;
    for m in &fields {
        if let Some(value) = map.get(m.key) {
            if written > 0 {
                out.push(b',');
            }
            written += 1;
            key(out, m.key);
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
            key(out, k);
            let _ = serde_json::to_writer(&mut *out, value);
        }
    }
    out.push(b'}');
}

/// A response path as a JSON array: the writer's steps, then `rest`.
fn write_path(out: &mut Vec<u8>, steps: &[Step<'_>], rest: &[PathItem]) {
    out.push(b'[');
    let mut first = true;
    let mut comma = |out: &mut Vec<u8>| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
    };
    for step in steps {
        comma(out);
        match step {
            Step::Key(k) => {
                let _ = serde_json::to_writer(&mut *out, k);
            }
            Step::Index(i) => out.extend_from_slice(i.to_string().as_bytes()),
        }
    }
    for item in rest {
        comma(out);
        match item {
            PathItem::Key(k) => {
                let _ = serde_json::to_writer(&mut *out, k);
            }
            PathItem::Index(i) => out.extend_from_slice(i.to_string().as_bytes()),
        }
    }
    out.push(b']');
}

/// `"key":` (response keys are GraphQL names: nothing to escape).
fn key(out: &mut Vec<u8>, key: &str) {
    string(out, key);
    out.push(b':');
}

/// A GraphQL name as a JSON string.
fn string(out: &mut Vec<u8>, name: &str) {
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.push(b'"');
}

fn null(out: &mut Vec<u8>, field: &OutField) -> bool {
    null_at(out, field, 0)
}

fn null_at(out: &mut Vec<u8>, field: &OutField, level: usize) -> bool {
    out.extend_from_slice(b"null");
    field.shape.nullable(level)
}
