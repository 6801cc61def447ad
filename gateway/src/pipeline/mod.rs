//! One GraphQL request, from its decoded body to the response body: the request
//! path's steps in order.
//!
//! 0. **Named documents**: a request that names a persisted document (an APQ hash, a
//!    trusted document's id) gets its text from [`crate::documents::persisted`], with
//!    its key already hashed; `--require-persisted` refuses any other here.
//! 1. **Document**: the document cache ([`crate::documents`]) by the text's hash. A
//!    new document is measured (tokens, nesting: [`crate::documents::lexical`]),
//!    parsed, admitted (fragments, counts, reserved names:
//!    [`crate::documents::admit`]) and validated by async-graphql
//!    ([`crate::documents::validation`]) before it is kept.
//! 2. **Operation and variables**: the operation the request names, its variables'
//!    defaults, and whether the variables fit their declared types.
//! 3. **Plan**: the operation's estimated cost ([`crate::documents::cost`]), then the
//!    document's plan for this operation and these `@skip`/`@include` values, compiled
//!    once and kept with the document ([`crate::plan`]); an operation over
//!    `--max-cost` or `--max-subgraph-requests` is refused here, before any fetch.
//! 4. **Execution**: the plan's fetches through the cache seam ([`crate::execute`]),
//!    once the request has its turn when `--max-executing-requests` limits how many
//!    execute at once ([`crate::server::turns`]; the turn is held through step 5).
//! 5. **Response**: written from the subgraphs' raw JSON in query order
//!    ([`crate::response`]), with what HTTP caches may keep of it (`Cache-Control`,
//!    `ETag`, `304`: [`crate::response::http_cache`]).
//!
//! A request-level strategy (`--request-strategy`, [`crate::caching::requests`])
//! wraps steps 4 and 5 of a query: identical requests in flight share one execution,
//! and the response strategy answers from the stored bytes without running the plan.
//!
//! A request that fails before execution gets GraphQL-over-HTTP's answer: a GraphQL
//! error without `data`, with 200 under `application/json` and 400 under
//! `application/graphql-response+json`.
//!
//! `POST /validate` ([`Run::Validate`]) takes the same steps up to the plan and stops
//! there: a tool can check an operation against the supergraph (a mutation included)
//! without running it. A valid one is answered
//! `{"valid":true,"operation":"query","estimatedCost":7}`, an invalid one (its cost
//! over `--max-cost` included) with the errors it would have got.

mod planning;

use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use async_graphql::{ServerError, Variables};
use async_graphql_parser::types::{OperationDefinition, OperationType};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::caching::edge::{EdgeKeys, EdgePurge};
use crate::caching::requests::{Answer, Produced, RequestCache};
use crate::documents::persisted::{PersistedDocuments, Resolved};
use crate::documents::validation::Validator;
use crate::documents::{
    admit, check_variables, lexical, operation, CachedDocument, DocumentCache, DocumentKey,
    DocumentLimits, Refusal,
};
use crate::execute::{Executor, Outcome};
use crate::plan::{Plan, Planner};
use crate::response::http_cache::Keepable;
use crate::server::metrics::{Limit, Metrics};
use crate::server::request::{GraphqlRequest, MediaType, Rejection, RequestInput, RequestLimits};
use crate::server::turns::Turns;
use crate::supergraph::Supergraph;
use planning::plan_for;

/// Everything the request path needs.
pub struct App {
    pub supergraph: Arc<Supergraph>,
    pub planner: Arc<Planner>,
    pub validator: Arc<Validator>,
    pub executor: Executor,
    /// The request-level strategy (`--request-strategy`), in front of execution.
    pub requests: Option<Arc<RequestCache>>,
    pub metrics: Arc<Metrics>,
    pub limits: RequestLimits,
    /// Serve `GET /debug/profile` (CPU sampling for flamegraphs).
    pub profiling: bool,
    pub documents: Arc<DocumentCache>,
    pub document_limits: DocumentLimits,
    /// Turns at execution (`--max-executing-requests`).
    pub turns: Arc<Turns>,
    /// Trusted documents and APQ registrations.
    pub persisted: Arc<PersistedDocuments>,
    /// The headers policies key by, as every answer's `Vary` (none: no `Vary`).
    pub vary: Option<HeaderValue>,
    /// `--surrogate-keys`: answers name the entities they hold in `Surrogate-Key`.
    pub surrogate_keys: bool,
    /// `--edge-purge`: the edge cache in front, purged after mutations.
    pub edge: Option<Arc<EdgePurge>>,
}

/// The answer to a request that never reached execution: a 4xx with its message.
pub fn reject(r: Rejection, media: MediaType, metrics: &Metrics, started: Instant) -> Response {
    metrics.request(started.elapsed(), true);
    let body = serde_json::json!({ "errors": [{ "message": r.message }] });
    let mut response = (r.status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(media.as_str()),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if r.status == StatusCode::METHOD_NOT_ALLOWED {
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
    }
    response
}

/// The answer to a document that is not executed (it does not parse, validate or
/// fit the limits): GraphQL errors without `data`.
fn not_executed(
    errors: Vec<ServerError>,
    media: MediaType,
    metrics: &Metrics,
    started: Instant,
) -> Response {
    metrics.request(started.elapsed(), true);
    let mut body = Vec::with_capacity(128);
    crate::response::write_errors(&mut body, &errors);
    let status = match media {
        MediaType::GraphqlResponseJson => StatusCode::BAD_REQUEST,
        MediaType::Json => StatusCode::OK,
    };
    respond(status, Bytes::from(body), media)
}

fn refused(
    Refusal(message): Refusal,
    media: MediaType,
    metrics: &Metrics,
    started: Instant,
) -> Response {
    not_executed(
        vec![ServerError::new(message, None)],
        media,
        metrics,
        started,
    )
}

/// An answer never kept by an HTTP cache (`Cache-Control: no-store`).
fn respond(status: StatusCode, body: Bytes, media: MediaType) -> Response {
    let mut out = (status, body).into_response();
    let headers = out.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(media.as_str()),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    out
}

/// An executed request's answer with what HTTP caches may keep of it
/// ([`crate::response::http_cache`]); `304` without a body when the request's
/// `If-None-Match` names its validator.
fn respond_keepable(
    app: &App,
    body: Bytes,
    keepable: &Keepable,
    input: &RequestInput,
    media: MediaType,
) -> Response {
    let not_modified = keepable.matches(input.headers.get(header::IF_NONE_MATCH));
    // Every header of the answer in one allocation (axum would grow the map as they
    // are added).
    let mut headers = HeaderMap::with_capacity(8);
    let mut out = if not_modified {
        Response::new(axum::body::Body::empty())
    } else {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(media.as_str()),
        );
        Response::new(axum::body::Body::from(body))
    };
    if not_modified {
        *out.status_mut() = StatusCode::NOT_MODIFIED;
    }
    let credentials = input.authorization.is_some();
    headers.insert(
        header::CACHE_CONTROL,
        keepable.cache_control(Instant::now(), credentials),
    );
    if let Some(vary) = &app.vary {
        headers.insert(header::VARY, vary.clone());
    }
    if keepable.may_keep() {
        if let Some(etag) = &keepable.etag {
            headers.insert(header::ETAG, etag.clone());
        }
        if let Some(keys) = &keepable.surrogate_keys {
            headers.insert(SURROGATE_KEY.clone(), keys.clone());
        }
    }
    *out.headers_mut() = headers;
    out
}

/// The header an edge cache purges by.
static SURROGATE_KEY: header::HeaderName = header::HeaderName::from_static("surrogate-key");

/// Give every variable the operation declares with a default, and the client did not
/// send, its default.
fn apply_variable_defaults(operation: &OperationDefinition, variables: &mut Variables) {
    for def in &operation.variable_definitions {
        let name = &def.node.name.node;
        if !variables.contains_key(name) {
            if let Some(default) = &def.node.default_value {
                variables.insert(name.clone(), default.node.clone());
            }
        }
    }
}

/// How far a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// Execute it and answer with its response.
    Execute,
    /// Stop once it is planned: validation only (`POST /validate`).
    Validate,
}

/// Answer one GraphQL request.
pub async fn handle(
    app: &App,
    request: GraphqlRequest<'_>,
    headers: HeaderMap,
    media: MediaType,
    started: Instant,
    via_get: bool,
    run: Run,
) -> Response {
    // 0. The document's text: sent, or named (a persisted document).
    let resolved = app
        .persisted
        .resolve(request.query.as_deref(), request.naming.as_ref())
        .await;
    let (text, key, register): (&str, DocumentKey, _) = match &resolved {
        Ok(Resolved::Sent { text, register }) => (text, DocumentKey::of(text), *register),
        Ok(Resolved::Kept(kept)) => (&kept.text, kept.key, None),
        Err(refused) => {
            return not_executed(vec![refused.to_error()], media, &app.metrics, started)
        }
    };
    let cached = app.documents.get(key, text);
    let mut variables = match &request.variables {
        Some(map) if !map.is_empty() => {
            Variables::from_json(serde_json::Value::Object(map.clone()))
        }
        _ => Variables::default(),
    };
    let operation_name = request.operation_name.as_deref();
    // 1. The document: cached, or parsed and admitted now (validated below, once the
    //    operation and its variables are known).
    let (entry, fresh) = match cached {
        Some(entry) => (entry, false),
        None => {
            let limits = &app.document_limits;
            if let Err(message) = lexical::check(text, limits.max_tokens, limits.max_nesting()) {
                app.metrics.refused(Limit::Text);
                let r = Rejection::bad_request(message);
                return reject(r, media, &app.metrics, started);
            }
            let doc = match async_graphql_parser::parse_query(text) {
                Ok(doc) => doc,
                Err(e) => return not_executed(vec![e.into()], media, &app.metrics, started),
            };
            if let Err(refusal) = admit(&doc, limits) {
                app.metrics.refused(Limit::Document);
                return refused(refusal, media, &app.metrics, started);
            }
            let entry = CachedDocument {
                text: match &resolved {
                    Ok(Resolved::Kept(kept)) => kept.text.clone(),
                    _ => Arc::from(text),
                },
                doc: Arc::new(doc),
                plans: Arc::new([]),
            };
            (entry, true)
        }
    };
    // 2. The operation and its variables.
    let op = match operation(&entry.doc, operation_name) {
        Ok(op) => op,
        Err(e) if fresh => {
            // async-graphql's validation errors come first, as they would have.
            let validation = app
                .validator
                .validate(text, &entry.doc, operation_name, &variables);
            if let Err(errors) = Box::pin(validation).await {
                return not_executed(errors, media, &app.metrics, started);
            }
            return not_executed(vec![e], media, &app.metrics, started);
        }
        Err(e) => return not_executed(vec![e], media, &app.metrics, started),
    };
    if via_get && op.ty == OperationType::Mutation {
        let r = Rejection::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "mutations must be sent with POST",
        );
        return reject(r, media, &app.metrics, started);
    }
    if !op.variable_definitions.is_empty() {
        apply_variable_defaults(op, &mut variables);
        if let Err(refusal) = check_variables(op, &variables, &app.supergraph) {
            return refused(refusal, media, &app.metrics, started);
        }
    }
    if fresh {
        // async-graphql's validation runs once per new document; its future is large,
        // so it is boxed rather than held in this one, which every request builds and
        // moves whole (the same for the request strategy's work below).
        let validation = app
            .validator
            .validate(text, &entry.doc, operation_name, &variables);
        if let Err(errors) = Box::pin(validation).await {
            return not_executed(errors, media, &app.metrics, started);
        }
    }
    if let Some(hash) = register {
        // An APQ hash sent with its text: registered once the document has validated.
        app.persisted.register(hash, &entry.text, key);
    }
    // 3. The plan, and its cost.
    let (plan, estimated) = match plan_for(app, key, &entry, op, operation_name, &variables, fresh)
    {
        Ok(planned) => planned,
        Err(errors) => return not_executed(errors, media, &app.metrics, started),
    };
    if run == Run::Validate {
        app.metrics.request(started.elapsed(), false);
        let kind = if plan.mutation { "mutation" } else { "query" };
        let body = format!(r#"{{"valid":true,"operation":"{kind}","estimatedCost":{estimated}}}"#);
        return respond(StatusCode::OK, Bytes::from(body), MediaType::Json);
    }
    // 4. Execution, and 5. the response: through the request-level strategy when one
    //    runs and this is a query. Under `--edge-purge`, the purges so far: an answer
    //    whose execution a purge overlapped may hold what the purge dropped, so the
    //    edge must not keep it.
    let edge_epoch = app.edge.as_deref().map(EdgePurge::epoch);
    let input = Arc::new(RequestInput {
        authorization: headers.get(header::AUTHORIZATION).cloned(),
        headers,
        variables: request.variables.unwrap_or_default(),
        graphql_variables: variables,
    });
    let answer = match app.requests.as_deref() {
        Some(requests) if !plan.mutation => {
            let key = requests.key(text, operation_name, &input);
            match requests.hit_now(key, &input) {
                Some(answer) => answer,
                None => {
                    let executor = app.executor.clone();
                    let (plan, shared) = (plan.clone(), input.clone());
                    let references = requests.stores_references();
                    let surrogate = app.surrogate_keys;
                    let turns = app.turns.clone();
                    let metrics = app.metrics.clone();
                    let work = requests.answer(key, &input, move || async move {
                        // Only the request that executes takes a turn: those that
                        // share its answer wait for it without one.
                        let _turn = turns.take().await;
                        let outcome = executor.run(&plan, &shared).await;
                        produce(
                            &executor, &plan, &outcome, &shared, references, surrogate, &metrics,
                        )
                    });
                    let work = Box::pin(work);
                    match tokio::time::timeout(app.limits.request_timeout, work).await {
                        Ok(Ok(answer)) => answer,
                        Ok(Err(message)) => {
                            let r = Rejection::new(StatusCode::BAD_GATEWAY, message);
                            return reject(r, media, &app.metrics, started);
                        }
                        Err(_) => return timed_out(app, media, started),
                    }
                }
            }
        }
        requests => {
            // The turn (`--max-executing-requests`), held until the response is
            // written: at once unless every turn is taken, else waited for under the
            // request timeout, whose deadline the execution then keeps.
            let (turn, deadline) = match app.turns.try_take() {
                Some(turn) => (turn, None),
                None => {
                    let deadline = tokio::time::Instant::now() + app.limits.request_timeout;
                    match tokio::time::timeout_at(deadline, app.turns.take()).await {
                        Ok(turn) => (turn, Some(deadline)),
                        Err(_) => return timed_out(app, media, started),
                    }
                }
            };
            // A request answered wholly from the cache completes on its first poll:
            // only one that has to wait is put under the request timeout, so the
            // answers that cost least do not pay for arming and clearing a timer.
            let mut run = std::pin::pin!(app.executor.run(&plan, &input));
            let first = futures::poll!(run.as_mut());
            let waited = match first {
                Poll::Ready(outcome) => Ok(outcome),
                Poll::Pending => {
                    let deadline = deadline.unwrap_or_else(|| {
                        tokio::time::Instant::now() + app.limits.request_timeout
                    });
                    tokio::time::timeout_at(deadline, run).await
                }
            };
            let Ok(outcome) = waited else {
                return timed_out(app, media, started);
            };
            let mutated = requests.filter(|r| plan.mutation && r.stores_references());
            let edge = app.edge.as_deref().filter(|_| plan.mutation);
            let produced = produce(
                &app.executor,
                &plan,
                &outcome,
                &input,
                mutated.is_some() || edge.is_some(),
                app.surrogate_keys,
                &app.metrics,
            );
            drop(turn);
            // The stored answers, then the edge's kept ones, written from an entity
            // the mutation returned go before its response does (in that order, so
            // that the edge cannot keep a stored answer read in between).
            let edge_keys = edge.map(|_| EdgeKeys::of_references(&produced.references));
            if let Some(requests) = mutated {
                Box::pin(requests.after_mutation(produced.references)).await;
            }
            if let (Some(edge), Some(keys)) = (edge, edge_keys) {
                // A failure is logged and counted; the mutation itself happened.
                let _ = edge.purge(&keys).await;
            }
            produced.answer
        }
    };
    app.metrics.request(started.elapsed(), answer.failed);
    app.metrics.operation(estimated, answer.body.len());
    if request.cost {
        // The figures make the body another one: no validator, nothing kept.
        let body = crate::response::with_cost(&answer, estimated, app.document_limits.max_cost);
        return respond_keepable(app, body, &Keepable::never(), &input, media);
    }
    if app
        .edge
        .as_deref()
        .is_some_and(|e| Some(e.epoch()) != edge_epoch)
    {
        return respond_keepable(app, answer.body, &Keepable::never(), &input, media);
    }
    respond_keepable(app, answer.body, &answer.keepable, &input, media)
}

/// The response to an executed request, what HTTP caches may keep of it, and (when
/// `references`) the references of every entity in the subgraph answers it was written
/// from; with `surrogate`, those references also name the answer in `Surrogate-Key`.
fn produce(
    executor: &Executor,
    plan: &Plan,
    outcome: &Outcome,
    input: &RequestInput,
    references: bool,
    surrogate: bool,
    metrics: &Metrics,
) -> Produced {
    // As large as the plan's last response (a deep answer would otherwise be copied
    // a dozen times as its buffer doubles).
    let mut body = Vec::with_capacity(plan.sizes.response.get().max(512));
    let written = crate::response::write(
        &mut body,
        plan,
        outcome,
        input,
        &executor.supergraph,
        executor.max_answer_bytes,
    );
    if written.stopped {
        metrics.refused(Limit::Answer);
    }
    plan.sizes.response.note(body.len());
    if body.capacity() - body.len() > 4096 {
        // A smaller answer than the last one: a stored response must not keep the
        // rest of the buffer alive.
        body.shrink_to_fit();
    }
    let mut keepable = Keepable::of(outcome.freshness, &body, plan.mutation || written.failed);
    let surrogate = surrogate && keepable.may_keep();
    let mut refs = Vec::new();
    if references || surrogate {
        for tape in outcome.data.tapes() {
            crate::caching::collect_references(tape.root(), &mut refs);
        }
    }
    if surrogate {
        keepable.surrogate_keys = crate::response::http_cache::surrogate_keys(&refs);
    }
    Produced {
        answer: Answer {
            body: Bytes::from(body),
            failed: written.failed,
            extended: written.extended,
            keepable,
        },
        references: refs,
        stale: !outcome.stale.is_empty(),
    }
}

/// The answer to a request that ran past `--request-timeout-ms`.
fn timed_out(app: &App, media: MediaType, started: Instant) -> Response {
    let r = Rejection::new(
        StatusCode::GATEWAY_TIMEOUT,
        format!(
            "the request did not complete within {:?}",
            app.limits.request_timeout
        ),
    );
    reject(r, media, &app.metrics, started)
}
