//! Step 3 of the request path: the plan for a request, with its estimated cost, and the
//! limits an operation must fit before any fetch (`--max-cost`,
//! `--max-subgraph-requests`, `--introspection`). A plan is compiled once per operation
//! and `@skip`/`@include` values and kept with its document, with its cost when the cost
//! reads no variable; a plan the limits refuse is never kept.

use std::sync::Arc;

use async_graphql::{ServerError, Variables};
use async_graphql_parser::types::OperationDefinition;

use super::App;
use crate::documents::{cost, CachedDocument, DocumentKey, KeptPlan};
use crate::plan::{Conditions, DocumentView, Plan};
use crate::server::metrics::Limit;

/// The plan for `op` under this request's `@skip`/`@include` values (kept with the
/// document, or compiled now and kept: a new document is stored with its first plan),
/// and its estimated cost; or the errors of an operation the limits refuse before any
/// fetch: its cost over `--max-cost`, its plan's subgraph requests over
/// `--max-subgraph-requests`, introspection when it is off. A cost that reads no
/// variable is kept with the plan; one that does is estimated per request.
pub(super) fn plan_for(
    app: &App,
    key: DocumentKey,
    entry: &CachedDocument,
    op: &OperationDefinition,
    operation_name: Option<&str>,
    variables: &Variables,
    fresh: bool,
) -> Result<(Arc<Plan>, u64), Vec<ServerError>> {
    let limits = &app.document_limits;
    let view = DocumentView {
        fragments: &entry.doc.fragments,
        variables,
        operation: op,
    };
    let known = entry
        .plans
        .iter()
        .find(|p| p.operation.as_deref() == operation_name);
    let conditions = match known {
        Some(p) => p.conditions_of.clone(),
        None => Arc::new(Conditions::of(&entry.doc, op)),
    };
    let bits = conditions.key(&view);
    let kept = bits.and_then(|bits| entry.kept(operation_name, bits));
    if let Some(KeptPlan {
        plan,
        cost: Some(cost),
        ..
    }) = kept
    {
        return Ok((plan.clone(), *cost));
    }
    let estimate = cost::estimate(&entry.doc, op, variables, &app.supergraph, limits.list_size);
    if let Some(max) = limits.max_cost.filter(|max| estimate.cost > *max) {
        app.metrics.refused(Limit::Cost);
        return Err(vec![over_cost(estimate.cost, max)]);
    }
    if let Some(kept) = kept {
        return Ok((kept.plan.clone(), estimate.cost));
    }
    let plan = app
        .planner
        .compile(&entry.text, &entry.doc, op, operation_name, variables)
        .map_err(|e| vec![ServerError::new(e.to_string(), None)])?;
    if plan.fetches.len() > limits.max_subgraph_requests {
        app.metrics.refused(Limit::Fetches);
        return Err(vec![ServerError::new(
            format!(
                "the operation needs {} subgraph requests; the limit is {} (--max-subgraph-requests)",
                plan.fetches.len(),
                limits.max_subgraph_requests
            ),
            None,
        )]);
    }
    if plan.introspection.is_some() && !limits.introspection {
        app.metrics.refused(Limit::Introspection);
        return Err(vec![ServerError::new(
            "introspection is disabled (--introspection off)",
            None,
        )]);
    }
    let plan = Arc::new(plan);
    if bits.is_none() && fresh {
        // More condition variables than plans are kept for: the document is kept,
        // its plans are compiled per request.
        app.documents.insert(key, entry.clone());
    }
    if let Some(bits) = bits {
        let kept = KeptPlan {
            operation: operation_name.map(Arc::from),
            conditions: bits,
            conditions_of: conditions,
            plan: plan.clone(),
            cost: estimate.fixed.then_some(estimate.cost),
        };
        if fresh {
            app.documents.insert(key, entry.with_plan(kept));
        } else {
            app.documents.add_plan(key, entry, kept);
        }
    }
    Ok((plan, estimate.cost))
}

/// The error of an operation whose estimated cost is over `--max-cost`, with the
/// estimate in its `extensions` (the code is Apollo Router's).
fn over_cost(estimated: u64, max: u64) -> ServerError {
    let mut error = ServerError::new(
        format!("the operation's estimated cost is {estimated}; the limit is {max} (--max-cost)"),
        None,
    );
    let mut extensions = async_graphql::ErrorExtensionValues::default();
    extensions.set("code", "COST_ESTIMATED_TOO_EXPENSIVE");
    extensions.set("estimatedCost", estimated);
    extensions.set("maxCost", max);
    error.extensions = Some(extensions);
    error
}
