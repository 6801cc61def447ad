//! From the planner's query plan to the gateway's [`Plan`].
//!
//! The planner works on its own syntax tree (graphql-parser's), so the client's
//! text is parsed a second time for it, once per document; its normalization
//! inlines fragments and merges fields, and its plan is a tree of Hive/Apollo plan
//! nodes, which [`super::steps`] maps onto the gateway's [`super::Step`]s and
//! [`Fetch`]es. This file runs the planner and puts the [`Plan`] together: the
//! response's shape, the steps, which fetches may hold each response key, the
//! entity fetches that walk alike, the plan's size. Introspection and the root
//! `__typename` never reach the planner: async-graphql and the response writer
//! answer them.
//!
//! The planner is someone else's code: a panic inside it is caught and becomes
//! this request's error, and planning is bounded in time.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use async_graphql::Variables;
use async_graphql_parser::types::{
    DocumentOperations, ExecutableDocument, OperationDefinition, OperationType,
    Selection as AstSelection, SelectionSet as AstSelectionSet,
};
use async_graphql_parser::Positioned;
use hive_router_query_planner::ast::normalization::normalize_operation;
use hive_router_query_planner::ast::selection_item::SelectionItem;
use hive_router_query_planner::graph::PlannerOverrideContext;
use hive_router_query_planner::planner::plan_nodes::QueryPlan;
use hive_router_query_planner::utils::cancellation::CancellationToken;

use super::operation::plain_typenames;
use super::references::ReferenceKeys;
use super::shape::Shaper;
use super::steps::Builder;
use super::{
    DocumentView, EntityGroup, Fetch, FetchKind, Plan, PlanError, Planner, RootSources, SizeHints,
    WalksAlike, PLANNING_TIMEOUT,
};

/// See [`Planner::compile`].
pub fn compile(
    planner: &Planner,
    text: &str,
    doc: &ExecutableDocument,
    op: &OperationDefinition,
    operation_name: Option<&str>,
    variables: &Variables,
) -> Result<Plan, PlanError> {
    let supergraph = &*planner.supergraph;
    let view = DocumentView {
        fragments: &doc.fragments,
        variables,
        operation: op,
    };
    let mutation = op.ty == OperationType::Mutation;
    let root_type = match op.ty {
        OperationType::Query => supergraph.query_type.as_str(),
        OperationType::Mutation => supergraph
            .mutation_type
            .as_deref()
            .ok_or_else(|| PlanError("the schema has no mutations".into()))?,
        OperationType::Subscription => {
            return Err(PlanError("subscriptions are not supported".into()))
        }
    };
    let (root, introspection_keys) =
        Shaper::new(supergraph, view).root(root_type, &op.selection_set.node)?;
    let introspection = (!introspection_keys.is_empty())
        .then(|| Arc::new(introspection_document(doc, op, &view, &introspection_keys)));
    let mut builder = Builder::new(
        supergraph,
        &planner.hive.supergraph,
        planner
            .references
            .then(|| ReferenceKeys::new(supergraph, &planner.hive.supergraph)),
    );
    let steps = match query_plan(planner, text, operation_name, root_type)? {
        Some(QueryPlan {
            node: Some(node), ..
        }) => Some(builder.node(&node)?),
        _ => None,
    };
    let mut plan = Plan {
        origin: origin_of(text, operation_name),
        mutation,
        root,
        steps,
        root_sources: RootSources::of(&builder.fetches),
        walks_alike: WalksAlike::default(),
        fetches: builder.fetches,
        introspection,
        heap_size: 0,
        sizes: SizeHints::default(),
    };
    super::sources::assign(&mut plan);
    // After the sources: paths match by them.
    plan.walks_alike = WalksAlike::of(&plan.fetches);
    plan.heap_size = heap_size(&plan);
    Ok(plan)
}

/// The identity of operation `operation_name` of the document `text`: its xxh3 hash,
/// never 0 (0 marks a piece of unknown origin, read back from Redis).
fn origin_of(text: &str, operation_name: Option<&str>) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(text.as_bytes());
    hasher.update(&[0]);
    hasher.update(operation_name.unwrap_or("").as_bytes());
    hasher.digest().max(1)
}

/// The planner's plan for the operation, `None` when it asks no subgraph.
fn query_plan(
    planner: &Planner,
    text: &str,
    operation_name: Option<&str>,
    root_type: &str,
) -> Result<Option<QueryPlan>, PlanError> {
    let doc = graphql_tools::parser::parse_query::<String>(text)
        .map_err(|e| PlanError(format!("the planner cannot parse the document: {e}")))?
        .into_static();
    let hive = &planner.hive;
    let planned = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let mut normalized = normalize_operation(&hive.supergraph, &doc, operation_name)
            .map_err(|e| PlanError(format!("the planner cannot normalize it: {e}")))?;
        // The gateway answers these itself (async-graphql for introspection).
        normalized.operation.selection_set.items.retain(|item| {
            !matches!(item, SelectionItem::Field(f) if matches!(f.name.as_str(), "__typename" | "__schema" | "__type"))
        });
        if normalized.operation.selection_set.items.is_empty() {
            return Ok(None);
        }
        plain_typenames(
            &mut normalized.operation.selection_set,
            root_type,
            &hive.supergraph,
        );
        hive.plan_from_normalized_operation(
            &normalized.operation,
            PlannerOverrideContext::default(),
            &CancellationToken::with_timeout(PLANNING_TIMEOUT),
        )
        .map(Some)
        .map_err(|e| PlanError(e.to_string()))
    }));
    match planned {
        Ok(result) => result,
        Err(panic) => Err(PlanError(format!(
            "the planner failed: {}",
            crate::supergraph::join::panic_message(&panic)
        ))),
    }
}

/// A document of the root fields named `keys` only (introspection), with the
/// original fragments and variables, for async-graphql to answer.
fn introspection_document(
    doc: &ExecutableDocument,
    op: &OperationDefinition,
    view: &DocumentView<'_>,
    keys: &[&str],
) -> ExecutableDocument {
    let mut fields = Vec::new();
    view.collect_fields(&|_| true, &op.selection_set.node, &mut fields);
    let items = fields
        .into_iter()
        .filter(|f| keys.contains(&f.response_key().node.as_str()))
        .map(|f| {
            Positioned::new(
                AstSelection::Field(Positioned::new(f.clone(), op.selection_set.pos)),
                op.selection_set.pos,
            )
        })
        .collect();
    let operation = OperationDefinition {
        ty: OperationType::Query,
        variable_definitions: op.variable_definitions.clone(),
        directives: Vec::new(),
        selection_set: Positioned::new(AstSelectionSet { items }, op.selection_set.pos),
    };
    ExecutableDocument {
        operations: DocumentOperations::Single(Positioned::new(operation, op.selection_set.pos)),
        fragments: doc.fragments.clone(),
    }
}

/// A rough count of the plan's heap bytes (texts and tree nodes).
fn heap_size(plan: &Plan) -> usize {
    let fetches: usize = plan
        .fetches
        .iter()
        .map(|f| {
            std::mem::size_of::<Fetch>()
                + f.query.len()
                + f.body.len()
                + f.variables.len() * 32
                + match &f.kind {
                    FetchKind::Root(r) => {
                        r.namespace.len()
                            + r.selection.len()
                            + r.args.len() * 64
                            + r.keys.len() * 24
                    }
                    FetchKind::Entities(groups) => groups
                        .iter()
                        .map(|g| {
                            std::mem::size_of::<EntityGroup>()
                                + g.selection.len()
                                + g.paths.iter().map(|p| p.len() * 32).sum::<usize>()
                                + g.requires.len() * 128
                                + g.namespaces.len() * 48
                        })
                        .sum(),
                }
        })
        .sum();
    let introspection = plan
        .introspection
        .as_ref()
        .map_or(0, |d| crate::documents::heap_size(d));
    std::mem::size_of::<Plan>()
        + plan.root.heap_size()
        + fetches
        + plan.walks_alike.heap_size()
        + introspection
}
