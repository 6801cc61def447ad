//! async-graphql's executor kept to the spec, for the reference and the subgraphs.
//! async-graphql 7.2.1 departs from the spec in four ways the fuzzer meets (each
//! found by it, as a difference that was not the gateway's fault):
//!
//! 1. `@skip`/`@include` ignore the defaults of variables that were not sent
//!    (`remove_skipped_selection` reads the sent variables only): the variables go in
//!    with the defaults filled in;
//! 2. an object none of whose fields applies comes back `null`, not `{}`
//!    (`do_resolve_container`): every selection set gets one more field,
//!    `_ref: __typename`, taken out of the answer again;
//! 3. the dynamic executor applies a fragment whose type condition is a union to no
//!    object (`collect_fields` knows objects and interfaces only): for the reference,
//!    fragment spreads are inlined and an inline fragment on a union becomes one per
//!    member that can be there. (The subgraphs are not given such fragments: the
//!    gateway's fetches name concrete types.)
//! 4. its validator does not see a variable used in a directive on `__typename`, and
//!    refuses the document for declaring an unused variable; the planner writes such
//!    fetches (`... @skip(if: $v) { __typename }` becomes `__typename @skip(if: $v)`):
//!    such a `__typename` is put back inside an inline fragment with its directives.
//!    A real async-graphql subgraph refuses these fetches: the gateway answers with an
//!    error at the field (`Variable "$v" is not used`), not with wrong data.

use std::collections::HashMap;

use async_graphql::dynamic::Schema;
use async_graphql::{
    BatchRequest, BatchResponse, Executor, Name, Request, Response, Value, Variables,
};
use async_graphql_parser::types::{
    DocumentOperations, ExecutableDocument, Field, InlineFragment, OperationDefinition, Selection,
    SelectionSet, TypeCondition,
};
use async_graphql_parser::{Pos, Positioned};

use super::graph;

/// The response key of the field added to every selection set.
const MARK: &str = "_ref";

/// The only operation of `doc`, if it has one.
pub fn operation(doc: &ExecutableDocument) -> Option<&OperationDefinition> {
    match &doc.operations {
        DocumentOperations::Single(op) => Some(&op.node),
        DocumentOperations::Multiple(ops) if ops.len() == 1 => ops.values().next().map(|o| &o.node),
        _ => None,
    }
}

/// The variables `operation` runs with: those `sent`, and the defaults of the others.
pub fn coerced(
    operation: &OperationDefinition,
    sent: &serde_json::Value,
) -> HashMap<String, Value> {
    let mut out = HashMap::new();
    for def in &operation.variable_definitions {
        let name = def.node.name.node.to_string();
        let value = match sent.get(&name) {
            Some(v) => Value::from_json(v.clone()).unwrap_or(Value::Null),
            None => match &def.node.default_value {
                Some(d) => d.node.clone(),
                None => continue,
            },
        };
        out.insert(name, value);
    }
    out
}

/// Run `doc` with `sent` on `schema` as the spec would; `expand_unions` for a document
/// that may hold fragments on unions (3. above).
pub async fn execute(
    schema: &Schema,
    doc: &ExecutableDocument,
    sent: &serde_json::Value,
    expand_unions: bool,
) -> Response {
    if expand_unions {
        // Validation is of the document as written: the rewrite could make an invalid
        // one valid (a fragment that can never apply is left out).
        let mut as_written = Request::new("").variables(Variables::from_json(sent.clone()));
        as_written.set_parsed_query(doc.clone());
        let checked = schema.execute(as_written).await;
        if checked.errors.iter().any(|e| e.path.is_empty()) {
            return checked;
        }
    }
    let Some(op) = operation(doc) else {
        return schema
            .execute(Request::new("").variables(Variables::from_json(sent.clone())))
            .await;
    };
    let variables: serde_json::Map<String, serde_json::Value> = coerced(op, sent)
        .into_iter()
        .map(|(k, v)| (k, v.into_json().unwrap_or_default()))
        .collect();
    let mut doc = doc.clone();
    if expand_unions {
        let fragments = std::mem::take(&mut doc.fragments);
        for_each_operation(&mut doc, &mut |set| inline(set, "Query", &fragments, 0));
    }
    for_each_operation(&mut doc, &mut mark);
    for f in doc.fragments.values_mut() {
        mark(&mut f.node.selection_set.node);
    }
    let mut request = Request::new("").variables(Variables::from_json(variables.into()));
    request.set_parsed_query(doc);
    let mut response = schema.execute(request).await;
    unmark(&mut response.data);
    response
}

fn for_each_operation(doc: &mut ExecutableDocument, f: &mut dyn FnMut(&mut SelectionSet)) {
    match &mut doc.operations {
        DocumentOperations::Single(op) => f(&mut op.node.selection_set.node),
        DocumentOperations::Multiple(ops) => ops
            .values_mut()
            .for_each(|op| f(&mut op.node.selection_set.node)),
    }
}

fn at<T>(node: T) -> Positioned<T> {
    Positioned::new(node, Pos::default())
}

/// Inline the spreads of `set` (a position of type `ty`) and split its fragments on
/// unions by member.
fn inline(
    set: &mut SelectionSet,
    ty: &str,
    fragments: &HashMap<Name, Positioned<async_graphql_parser::types::FragmentDefinition>>,
    depth: usize,
) {
    let mut out = Vec::new();
    for item in std::mem::take(&mut set.items) {
        let (condition, directives, inner) = match item.node {
            Selection::Field(mut f) => {
                let child = graph::public_fields(ty)
                    .iter()
                    .find(|p| p.name == f.node.name.node.as_str())
                    .map(|p| graph::base(p.ty));
                if let Some(child) = child {
                    inline(&mut f.node.selection_set.node, child, fragments, depth);
                }
                out.push(at(Selection::Field(f)));
                continue;
            }
            Selection::FragmentSpread(s) => match fragments.get(&s.node.fragment_name.node) {
                Some(f) if depth < 32 => (
                    Some(f.node.type_condition.node.on.node.to_string()),
                    s.node.directives,
                    f.node.selection_set.node.clone(),
                ),
                _ => continue,
            },
            Selection::InlineFragment(i) => (
                i.node.type_condition.map(|c| c.node.on.node.to_string()),
                i.node.directives,
                i.node.selection_set.node,
            ),
        };
        let on = condition.clone().unwrap_or(ty.to_string());
        // A fragment that can apply to no object here is left out, since the split
        // below can put one where the schema no longer allows it.
        let conditions: Vec<Option<String>> = match graph::union(&on) {
            Some(u) if condition.is_some() => u
                .all_members()
                .into_iter()
                .filter(|m| graph::applies(ty, m))
                .map(|m| Some(m.to_string()))
                .collect(),
            _ if graph::possible_types(&on)
                .iter()
                .any(|m| graph::applies(ty, m)) =>
            {
                vec![condition]
            }
            _ => Vec::new(),
        };
        for c in conditions {
            let mut inner = inner.clone();
            inline(&mut inner, c.as_deref().unwrap_or(ty), fragments, depth + 1);
            out.push(at(Selection::InlineFragment(at(InlineFragment {
                type_condition: c.map(|c| {
                    at(TypeCondition {
                        on: at(Name::new(c)),
                    })
                }),
                directives: directives.clone(),
                selection_set: at(inner),
            }))));
        }
    }
    set.items = out;
}

fn mark(set: &mut SelectionSet) {
    for item in &mut set.items {
        // 4. above: `__typename @skip(if: $v)` as `... @skip(if: $v) { __typename }`.
        if let Selection::Field(f) = &mut item.node {
            if f.node.name.node == "__typename" && !f.node.directives.is_empty() {
                let directives = std::mem::take(&mut f.node.directives);
                let field = f.clone();
                item.node = Selection::InlineFragment(at(InlineFragment {
                    type_condition: None,
                    directives,
                    selection_set: at(SelectionSet {
                        items: vec![at(Selection::Field(field))],
                    }),
                }));
            }
        }
        match &mut item.node {
            Selection::Field(f) if !f.node.selection_set.node.items.is_empty() => {
                mark(&mut f.node.selection_set.node)
            }
            Selection::InlineFragment(i) => mark(&mut i.node.selection_set.node),
            _ => {}
        }
    }
    set.items.push(at(Selection::Field(at(Field {
        alias: Some(at(Name::new(MARK))),
        name: at(Name::new("__typename")),
        arguments: Vec::new(),
        directives: Vec::new(),
        selection_set: at(SelectionSet::default()),
    }))));
}

fn unmark(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.shift_remove(MARK);
            map.values_mut().for_each(unmark);
        }
        Value::List(items) => items.iter_mut().for_each(unmark),
        _ => {}
    }
}

/// A subgraph's schema, executing each request as the spec would (1. and 2. above).
#[derive(Clone)]
pub struct SpecExecutor(pub Schema);

impl Executor for SpecExecutor {
    async fn execute(&self, mut request: Request) -> Response {
        let doc = match request.parsed_query() {
            Ok(doc) => doc.clone(),
            Err(_) => return self.0.execute(request).await,
        };
        let sent = request
            .variables
            .clone()
            .into_value()
            .into_json()
            .unwrap_or_default();
        execute(&self.0, &doc, &sent, false).await
    }

    async fn execute_batch(&self, batch: BatchRequest) -> BatchResponse {
        self.0.execute_batch(batch).await
    }

    fn execute_stream(
        &self,
        request: Request,
        session_data: Option<std::sync::Arc<async_graphql::Data>>,
    ) -> futures::stream::BoxStream<'static, Response> {
        Executor::execute_stream(&self.0, request, session_data)
    }
}
