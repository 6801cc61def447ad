//! The response body, written from the subgraphs' raw JSON in the order the query
//! asked for its fields.
//!
//! [`write()`] walks the plan's shape ([`crate::plan::Selection`]) and the data
//! execution gathered ([`crate::execute::data`]) together: each object of the
//! response is a view of the answers merged at its place, its concrete type is
//! the one its `__typename` names (which picks the shape's variant for an
//! interface or union), and leaves are copied as the subgraph wrote them once they
//! are of their type's kind (a built-in scalar's JSON kind, one of an enum's public
//! values).
//!
//! Errors: those execution recorded come first, at their paths (a subgraph's own,
//! and a failed fetch's at every field or object it was for). The writer adds its
//! own where the data breaks the schema: a null where the type forbids one (which
//! nulls the nearest nullable parent, as GraphQL requires; the rest of the object
//! is still walked for errors), a value of the wrong kind, and a field that no
//! answer holds and no error explains. That last one is the gateway's guard
//! against answering wrong data silently: a field it failed to fetch is never a
//! quiet `null`.
//!
//! The response's `extensions` (`extensions.rs`, [`with_cost`]) name the fields
//! answered from an entry the cache served in place of a failed fetch
//! (`stale-if-error`), and, when the client asks, the operation's estimated cost and
//! the answer's size.
//!
//! The writer checks the response's length at each object, list element and field:
//! past `--max-answer-bytes` it stops, and the response is one error naming the path
//! where it stopped.

mod errors;
mod extensions;
pub mod http_cache;
mod introspection;
mod leaves;

use crate::answer::tape::{Kind, Value};
use crate::execute::data::{Data, Nodes, Place};
use crate::execute::Outcome;
use crate::plan::{FieldKind, OutField, Plan, Selection, Sources, Variant};
use crate::server::request::RequestInput;
use crate::supergraph::Supergraph;
pub use errors::write_errors;
use errors::Explanation;
pub use extensions::with_cost;
use leaves::{leaf, Leaf};

/// How a response was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// It carries errors.
    pub failed: bool,
    /// It has an `extensions` member (more can be added per request: [`with_cost`]).
    pub extended: bool,
    /// It grew past `max_bytes` and was replaced by an error.
    pub stopped: bool,
}

/// `{"data":…,"errors":[…]}` for an executed operation. A response that grows past
/// `max_bytes` (`--max-answer-bytes`) is not finished: it is replaced by
/// `{"data":null,"errors":[…]}` with one error naming the path where it stopped.
pub fn write(
    out: &mut Vec<u8>,
    plan: &Plan,
    outcome: &Outcome,
    input: &RequestInput,
    supergraph: &Supergraph,
    max_bytes: usize,
) -> Written {
    let begin = out.len();
    let mut writer = Writer {
        plan,
        outcome,
        data: &outcome.data,
        input,
        supergraph,
        path: Vec::with_capacity(8),
        errors: Vec::new(),
        count: 0,
        max_bytes: begin.saturating_add(max_bytes),
        limit: max_bytes,
        stopped: None,
    };
    for e in outcome.errors.iter().filter(|e| !e.failed_fetch) {
        writer.found_error(e);
    }
    if let Some(response) = &outcome.introspection {
        for error in &response.errors {
            writer.separator();
            let _ = serde_json::to_writer(&mut writer.errors, error);
        }
    }
    out.extend_from_slice(b"{\"data\":");
    let start = out.len();
    let complete = writer.root(out);
    if let Some(stopped) = writer.stopped.take() {
        out.truncate(begin);
        out.extend_from_slice(b"{\"data\":null,\"errors\":[");
        out.extend_from_slice(&stopped);
        out.extend_from_slice(b"]}");
        return Written {
            failed: true,
            extended: false,
            stopped: true,
        };
    }
    if !complete {
        out.truncate(start);
        out.extend_from_slice(b"null");
    }
    let failed = writer.count > 0;
    if failed {
        out.extend_from_slice(b",\"errors\":[");
        out.extend_from_slice(&writer.errors);
        out.push(b']');
    }
    let extended = extensions::stale(out, &outcome.stale);
    out.push(b'}');
    Written {
        failed,
        extended,
        stopped: false,
    }
}

/// The object whose fields [`Writer::fields`] writes.
#[derive(Clone, Copy)]
enum Object<'v> {
    /// The response's root: each field is read from the root answers that hold it.
    Root,
    /// Any other object: its view.
    View(&'v Nodes),
}

/// One step of a response path.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

struct Writer<'a> {
    plan: &'a Plan,
    outcome: &'a Outcome,
    data: &'a Data,
    input: &'a RequestInput,
    supergraph: &'a Supergraph,
    path: Vec<Step<'a>>,
    /// The errors' JSON, comma-separated.
    errors: Vec<u8>,
    count: usize,
    /// The length `out` may reach (`--max-answer-bytes` past where the response began);
    /// 0 once the writing has stopped.
    max_bytes: usize,
    /// `--max-answer-bytes`, for the error.
    limit: usize,
    /// The error that stopped the writing, once the response grew past `max_bytes`.
    stopped: Option<Vec<u8>>,
}

impl<'a> Writer<'a> {
    fn root(&mut self, out: &mut Vec<u8>) -> bool {
        let plan = self.plan;
        let Some(variant) = plan.root.only() else {
            out.extend_from_slice(b"null");
            return false;
        };
        self.fields(out, variant, Object::Root)
    }

    /// Write the object `view` with `selection`. False when a non-null field is
    /// null: the caller must null the object.
    fn object(&mut self, out: &mut Vec<u8>, selection: &'a Selection, view: &Nodes) -> bool {
        let supergraph = self.supergraph;
        let chosen = match selection.only() {
            Some(v) if !selection.is_abstract => Ok(v),
            _ => match self.data.typename(view, supergraph) {
                Some(t) => match selection.variant(&t) {
                    Some(v) => Ok(v),
                    // An interface object's answer names its interface.
                    None if supergraph.is_abstract(&t) => {
                        selection.common.as_ref().ok_or_else(|| {
                            format!(
                                "no subgraph answer names the concrete type of this {t}"
                            )
                        })
                    }
                    None if supergraph.fields_of(&t).is_some() => Err(format!(
                        "a subgraph returned an object of type {t}, which {} cannot hold",
                        selection.type_name
                    )),
                    // A type the public schema hides (`@inaccessible`) or does not have.
                    None => Err(format!(
                        "a subgraph returned an object of type {t}, which the schema does not expose"
                    )),
                },
                None => selection.common.as_ref().ok_or_else(|| {
                    format!(
                        "a subgraph returned an object of {} without its __typename",
                        selection.type_name
                    )
                }),
            },
        };
        let variant = match chosen {
            Ok(v) => v,
            Err(message) => {
                match self.explanation() {
                    Explanation::Reported => {}
                    Explanation::Failed(failure) => self.error(failure, None),
                    Explanation::None => self.error(&message, None),
                }
                return false;
            }
        };
        self.fields(out, variant, Object::View(view))
    }

    fn fields(&mut self, out: &mut Vec<u8>, variant: &'a Variant, object: Object<'_>) -> bool {
        if self.over(out) {
            return false;
        }
        out.push(b'{');
        let mut ok = true;
        // The member read last from the view's first answer: fields usually come in
        // the order the answers hold them, so each is a step on from the one before.
        let mut cursor = None;
        // The fetches the view's first answer came from: a hint is followed only
        // where they may hold the field.
        let first_by = match object {
            Object::View(view) => self.data.first_answered_by(view),
            Object::Root => Sources::ALL,
        };
        for (i, field) in variant.fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&field.key_json);
            if let Object::View(view) = object {
                if self.hinted_leaf(out, view, field, first_by, &mut cursor) {
                    if self.over(out) {
                        return false;
                    }
                    continue;
                }
            }
            self.path.push(Step::Key(&field.key));
            let field_ok = match &field.kind {
                FieldKind::Typename => {
                    string(out, &variant.type_name);
                    true
                }
                FieldKind::Introspection => {
                    introspection::write(
                        out,
                        self.outcome.introspection.as_ref(),
                        self.plan.introspection.as_deref(),
                        &self.input.graphql_variables,
                        &field.key,
                    );
                    true
                }
                FieldKind::Leaf(_) | FieldKind::Enum(_) | FieldKind::Object(_) => match object {
                    Object::View(view) => self.answered(out, view, field, first_by, &mut cursor),
                    Object::Root => {
                        // Each root field from the root answers that hold it.
                        let data = self.data;
                        let answers = data.root_answers(&self.plan.root_sources, &field.key);
                        let view = data.view_of(&answers);
                        let first_by = data.first_answered_by(&view);
                        self.answered(out, &view, field, first_by, &mut None)
                    }
                },
            };
            if self.over(out) {
                return false;
            }
            self.path.pop();
            ok &= field_ok;
        }
        out.push(b'}');
        ok
    }

    /// Write the leaf `field` of the object `view` when it stands where its hint says
    /// and is of its scalar's kind as it is (the usual case: no path, no error, no
    /// view to build); false, having written nothing, when it is not. `first_by`:
    /// the fetches the view's first answer came from.
    #[inline]
    fn hinted_leaf(
        &self,
        out: &mut Vec<u8>,
        view: &Nodes,
        field: &OutField,
        first_by: Sources,
        cursor: &mut Option<Place>,
    ) -> bool {
        let (FieldKind::Leaf(scalar), true) = (&field.kind, field.single_source) else {
            return false;
        };
        let data = self.data;
        let sources = (field.sources, first_by);
        let Some(node) = data.hinted_member(view, &field.key, sources, false, &field.hint, cursor)
        else {
            return false;
        };
        let value = data.value(node);
        if !matches!(leaf(*scalar, &value), Leaf::AsIs) {
            return false;
        }
        out.extend_from_slice(value.raw());
        true
    }

    /// Write `field`, which the subgraphs answer, of the object `view`; `first_by`
    /// are the fetches the view's first answer came from, `cursor` the member read
    /// before from it. False when it is null where the type forbids it.
    fn answered(
        &mut self,
        out: &mut Vec<u8>,
        view: &Nodes,
        field: &'a OutField,
        first_by: Sources,
        cursor: &mut Option<Place>,
    ) -> bool {
        let data = self.data;
        // A scalar is one answer's; an object or a list is merged from every answer
        // of a merged view that holds it, so its hint holds only where no other
        // answer may hold it.
        let sole = !field.single_source && !view.is_single();
        let sources = (field.sources, first_by);
        let (values, null) =
            data.member_by_hint(view, &field.key, sources, sole, &field.hint, cursor);
        if !values.is_empty() {
            return self.value(out, &values, field, 0);
        }
        if null {
            return self.null_at(out, field, 0);
        }
        self.unexplained(
            || {
                format!(
                    "{} could not be resolved: no subgraph answer holds it",
                    field.coordinate
                )
            },
            field.pos,
        );
        out.extend_from_slice(b"null");
        field.shape.nullable(0)
    }

    /// Write the value at `values` at list level `level` of `field`'s type. False
    /// when it is null (after propagation) where the type forbids it.
    fn value(
        &mut self,
        out: &mut Vec<u8>,
        values: &Nodes,
        field: &'a OutField,
        level: usize,
    ) -> bool {
        let Some(first) = values.first() else {
            return self.null_at(out, field, level);
        };
        let value = self.data.value(first);
        let start = out.len();
        let errors_before = self.count;
        if field.shape.is_list(level) {
            if value.kind() != Kind::Array {
                return self.mismatch(out, field, level, "a list");
            }
            out.push(b'[');
            let mut ok = true;
            let data = self.data;
            for (i, item) in data.elements(values).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                self.path.push(Step::Index(i));
                if self.over(out) {
                    return false;
                }
                ok &= self.value(out, &item, field, level + 1);
                self.path.pop();
            }
            out.push(b']');
            if ok {
                return true;
            }
        } else if let FieldKind::Object(selection) = &field.kind {
            if value.kind() != Kind::Object {
                return self.mismatch(out, field, level, "an object");
            }
            let view = self.data.view_of(values);
            if self.object(out, selection, &view) {
                return true;
            }
        } else {
            return self.scalar(out, &value, field, level);
        }
        out.truncate(start);
        if self.count > errors_before {
            // What nulled a field inside is reported already; the null it leaves here
            // adds no error of its own (GraphQL reports a field error once).
            out.extend_from_slice(b"null");
            return field.shape.nullable(level);
        }
        self.null_at(out, field, level)
    }

    /// Write `value` (not null), at list level `level` of a leaf or enum `field`,
    /// as the subgraph wrote it when it is of the type's kind. False when it is
    /// not, and the type forbids null.
    fn scalar(
        &mut self,
        out: &mut Vec<u8>,
        value: &Value<'_>,
        field: &'a OutField,
        level: usize,
    ) -> bool {
        if let FieldKind::Enum(values) = &field.kind {
            let name = value.as_str();
            let known = name
                .as_deref()
                .is_some_and(|n| values.binary_search_by(|v| (**v).cmp(n)).is_ok());
            if !known {
                let message = format!(
                    "{} returned {}, which its enum type does not have",
                    field.coordinate,
                    String::from_utf8_lossy(value.raw())
                );
                self.error(&message, Some(field.pos));
                out.extend_from_slice(b"null");
                return field.shape.nullable(level);
            }
            out.extend_from_slice(value.raw());
            true
        } else if let FieldKind::Leaf(scalar) = &field.kind {
            match leaf(*scalar, value) {
                Leaf::AsIs => {
                    out.extend_from_slice(value.raw());
                    true
                }
                Leaf::Quoted => {
                    out.push(b'"');
                    out.extend_from_slice(value.raw());
                    out.push(b'"');
                    true
                }
                Leaf::Wrong(expected) => self.mismatch(out, field, level, expected),
            }
        } else {
            out.extend_from_slice(value.raw());
            true
        }
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
            field.coordinate
        );
        self.error(&message, Some(field.pos));
        out.extend_from_slice(b"null");
        field.shape.nullable(level)
    }

    /// Write null at list level `level` of `field`; false (with an error, unless one
    /// explains it) where the type forbids null.
    fn null_at(&mut self, out: &mut Vec<u8>, field: &OutField, level: usize) -> bool {
        out.extend_from_slice(b"null");
        let nullable = field.shape.nullable(level);
        if !nullable {
            self.unexplained(
                || {
                    format!(
                        "Cannot return null for non-nullable field {}",
                        field.coordinate
                    )
                },
                field.pos,
            );
        }
        nullable
    }
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
