//! Execution: run a [`Plan`] for one request, fetching through the cache seam.
//!
//! The plan's steps run as the planner ordered them: a sequence one after another,
//! a parallel group at once (joined futures, in the request's own task: no spawns),
//! a condition by its variable. Each fetch step is one request to one subgraph:
//!
//! - a **root fetch** answers a root field; its `data` object becomes one of the
//!   response's root objects (or, for a root query re-entered at a path, is merged
//!   into every object there);
//! - an **entity fetch** walks the data gathered so far to its paths, builds each
//!   object's representation (`__typename`, keys, `@requires` inputs) from the
//!   answers that stand there, and asks for each distinct one once; each answer is
//!   merged into the objects it was asked for ([`data`]). A fetch that walks like an
//!   earlier one (the same paths and representations: [`crate::plan::WalksAlike`])
//!   takes that fetch's walk instead, and a fetch whose path goes on from an
//!   earlier one's walks on from the objects that fetch found, when nothing was
//!   added to the data since.
//!
//! With a cache ([`crate::caching`]) every root field and every entity is looked up
//! under its own key first: an entity's key holds its representation, so the
//! inputs of `@requires` are part of it. Only the misses go into the request, and a
//! miss that another request is already fetching is joined instead. Lookups the
//! store answers at once (memory) are made before any future is built, judged
//! against one clock reading per wave (not one per look-up), so a request
//! that is all hits completes in its first poll (a hit a strategy wants refreshed
//! early starts a one-item fetch in the background, run by the cache). A mutation's
//! root field is never cached; its answer's entities are invalidated before the
//! next step runs.
//!
//! Nothing here builds a value tree: answers stay in their [`Tape`]s, and the
//! response writer ([`crate::response`]) reads them in query order. Errors are
//! recorded with their place in the response: a subgraph's errors at their paths
//! (an entity's, below the object it was fetched for), a failed fetch at the root
//! field or object it was for (the response reports it at each field it left
//! without a value).
//!
//! Along the data's path: this module runs the steps and the fetches; `walks`
//! builds an entity fetch's representations from the data and shares them between
//! fetches; `subgraph_request` sends a fetch and reads its answer; `found` records
//! what came back, in [`data`] and as errors at their places.
//!
//! [`Tape`]: crate::answer::tape::Tape

pub mod data;
mod found;
mod rewrites;
mod subgraph_request;
mod walks;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::answer::piece::Piece;
use crate::caching::{Call, ResolverCache};
use crate::documents::validation::Validator;
use crate::plan::{EntityGroup, Fetch, FetchId, FetchKind, Plan, RootFetch, Sources, Step};
use crate::server::request::RequestInput;
use crate::supergraph::Supergraph;
use crate::upstream::{FetchError, PathItem, Upstream};
use data::{owned_path, Data, Node};
use found::Found;
pub use found::FoundError;
use subgraph_request::{Item, SubgraphRequest};
use walks::{Kept, Lent, Walk};

/// Everything execution found: what the response writer reads.
pub struct Outcome {
    pub data: Data,
    pub errors: Vec<FoundError>,
    /// Places answered from an entry the cache served in place of a failed fetch
    /// (`stale-if-error`), with how long past its freshness it was.
    pub stale: Vec<(Vec<PathItem>, Duration)>,
    /// async-graphql's answer to the introspection root fields.
    pub introspection: Option<async_graphql::Response>,
    /// How long HTTP caches may keep the answer, by its pieces.
    pub freshness: crate::response::http_cache::Freshness,
}

/// Runs plans: the subgraph clients, the optional cache, and async-graphql for
/// introspection.
#[derive(Clone)]
pub struct Executor {
    pub upstream: Arc<Upstream>,
    pub cache: Option<Arc<ResolverCache>>,
    pub validator: Arc<Validator>,
    pub supergraph: Arc<Supergraph>,
    /// Largest response written (`--max-answer-bytes`).
    pub max_answer_bytes: usize,
}

type Boxed<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A background refresh's fetch.
type Refetch = Pin<Box<dyn Future<Output = Vec<Result<Piece, FetchError>>> + Send>>;

/// One request's run of its plan.
struct Run<'a> {
    executor: &'a Executor,
    plan: &'a Arc<Plan>,
    input: &'a Arc<RequestInput>,
    found: Mutex<Found>,
    /// The walks of the fetches that a later fetch walks alike
    /// ([`crate::plan::WalksAlike`]), by fetch.
    walks: Mutex<Vec<(FetchId, Lent<'a>)>>,
    /// The objects found by the fetches that a later fetch walks on from, by fetch.
    kept: Mutex<Vec<(FetchId, Kept<'a>)>>,
}

impl Executor {
    /// Execute `plan` for one request.
    pub async fn run(&self, plan: &Arc<Plan>, input: &Arc<RequestInput>) -> Outcome {
        let run = Run {
            executor: self,
            plan,
            input,
            found: Mutex::new(Found {
                data: Data::with_capacity(plan.fetches.len(), plan.sizes.merges.get()),
                ..Found::default()
            }),
            walks: Mutex::new(Vec::new()),
            kept: Mutex::new(Vec::new()),
        };
        // Everything the cache answers at once runs here, before any future exists;
        // only what must wait becomes one.
        let pending = plan
            .steps
            .as_ref()
            .and_then(|step| run.step(step, Instant::now()));
        let fetches = async {
            if let Some(pending) = pending {
                pending.await;
            }
        };
        // async-graphql answers introspection; its future is large and rarely needed,
        // so it is boxed rather than held in this one.
        let introspection = async {
            match &plan.introspection {
                Some(doc) => {
                    let answer = self.validator.introspect(doc, &input.graphql_variables);
                    Some(Box::pin(answer).await)
                }
                None => None,
            }
        };
        let ((), introspection) = futures::future::join(fetches, introspection).await;
        let found = run.found.into_inner();
        plan.sizes.merges.note(found.data.merged_objects());
        Outcome {
            data: found.data,
            errors: found.errors,
            stale: found.stale,
            introspection,
            freshness: found.freshness,
        }
    }
}

impl<'a> Run<'a> {
    /// Run `step` as far as it goes without waiting; what is left to wait for, as a
    /// future (`None` when it completed: every fetch in it was a cache hit). `now` is
    /// the clock reading the cache judges freshness by: one per wave of steps that
    /// run without waiting (read again after each wait), not one per look-up.
    fn step<'s>(&'s self, step: &'a Step, now: Instant) -> Option<Boxed<'s>> {
        match step {
            Step::Sequence(steps) => {
                for (i, s) in steps.iter().enumerate() {
                    if let Some(waiting) = self.step(s, now) {
                        let rest = &steps[i + 1..];
                        return Some(Box::pin(async move {
                            waiting.await;
                            for s in rest {
                                if let Some(waiting) = self.step(s, Instant::now()) {
                                    waiting.await;
                                }
                            }
                        }));
                    }
                }
                None
            }
            Step::Parallel(steps) => {
                let mut waiting: Vec<Boxed<'s>> =
                    steps.iter().filter_map(|s| self.step(s, now)).collect();
                match waiting.len() {
                    0 => None,
                    1 => waiting.pop(),
                    _ => Some(Box::pin(async move {
                        futures::future::join_all(waiting).await;
                    })),
                }
            }
            Step::Condition {
                variable,
                then,
                otherwise,
            } => {
                let branch = if self.input.is_true(variable) {
                    then
                } else {
                    otherwise
                };
                branch.as_deref().and_then(|s| self.step(s, now))
            }
            Step::Fetch(id) => {
                let plan: &'a Plan = self.plan;
                let fetch = &plan.fetches[*id as usize];
                match &fetch.kind {
                    FetchKind::Root(root) => self.root(*id, fetch, root, now),
                    FetchKind::Entities(groups) => self.entities(*id, fetch, groups, now),
                }
            }
        }
    }

    fn request(
        &self,
        fetch: FetchId,
        representations: Bytes,
        items: Vec<Item>,
    ) -> Arc<SubgraphRequest> {
        let executor = self.executor;
        Arc::new(SubgraphRequest {
            upstream: executor.upstream.clone(),
            supergraph: executor.supergraph.clone(),
            plan: self.plan.clone(),
            input: self.input.clone(),
            fetch,
            representations,
            items,
            kept: executor.cache.is_some(),
        })
    }

    /// A fetch of `items` alone, as the cache takes it: what a background refresh
    /// of a cached entry runs.
    fn refetch(
        &self,
        fetch: FetchId,
        representations: Bytes,
        items: Vec<Item>,
    ) -> impl Fn(Vec<usize>) -> Refetch + Send + Sync + 'static {
        let request = self.request(fetch, representations, items);
        move |asked| request.clone().send(asked)
    }

    /// A root fetch: through the cache when it is a query. A hit is recorded at
    /// once; a miss is the future returned.
    fn root<'s>(
        &'s self,
        id: FetchId,
        fetch: &'a Fetch,
        root: &'a RootFetch,
        now: Instant,
    ) -> Option<Boxed<'s>> {
        let cache = self.executor.cache.as_deref();
        let call = match cache {
            Some(cache) if !fetch.mutation => {
                Some(cache.root_call(self.plan, fetch, root, self.input))
            }
            _ => None,
        };
        if let (Some(cache), Some(call)) = (cache, &call) {
            if let Some(piece) = cache.hit_at(call, self.plan.origin, now, || {
                self.refetch(id, Bytes::new(), Vec::new())
            }) {
                self.record_root(id, fetch, root, Ok(piece), Sources::ALL);
                return None;
            }
        }
        Some(Box::pin(async move {
            let request = self.request(id, Bytes::new(), Vec::new());
            let send = move |asked: Vec<usize>| request.clone().send(asked);
            // What the cache gives may be another operation's answer; what this fetch
            // gets is its own.
            let (mut pieces, by) = match (cache, call) {
                (Some(cache), Some(call)) => (
                    cache.fetch(&[call], self.plan.origin, send).await,
                    Sources::ALL,
                ),
                _ => (send(vec![0]).await, Sources::of_fetch(id)),
            };
            let piece = pieces.pop().unwrap_or_else(|| {
                Err(FetchError::Unavailable {
                    subgraph: self.executor.upstream.name(fetch.subgraph).to_string(),
                    detail: "no answer".into(),
                })
            });
            if let (true, Some(cache), Ok(piece)) = (fetch.mutation, cache, &piece) {
                cache.after_mutation(&root.namespace, piece).await;
            }
            self.record_root(id, fetch, root, piece, by);
        }))
    }

    fn record_root(
        &self,
        id: FetchId,
        fetch: &Fetch,
        root: &RootFetch,
        piece: Result<Piece, FetchError>,
        by: Sources,
    ) {
        let supergraph = &*self.executor.supergraph;
        let mut found = self.found.lock();
        let piece = match piece {
            Ok(piece) => {
                found.note_fresh(&piece);
                piece
            }
            Err(e) => {
                let message = e.to_string();
                match &root.at {
                    None => {
                        for key in &root.keys {
                            found.fail(vec![PathItem::Key(key.to_string())], message.clone());
                        }
                    }
                    Some(at) => {
                        let mut steps = Vec::new();
                        let targets = found.data.targets(
                            at,
                            &self.plan.root_sources,
                            supergraph,
                            &mut steps,
                            0,
                        );
                        for t in targets {
                            found.fail(owned_path(&steps[t.path]), message.clone());
                        }
                    }
                }
                return;
            }
        };
        let Some(value) = piece.value() else {
            found.note(&piece, &[]);
            if piece.errors().is_empty() {
                let name = self.executor.upstream.name(fetch.subgraph).to_string();
                for key in &root.keys {
                    found.fail(
                        vec![PathItem::Key(key.to_string())],
                        format!("subgraph {name} answered without data"),
                    );
                }
            }
            return;
        };
        let index = value.index();
        match &root.at {
            None => {
                found.note(&piece, &[]);
                if let Some(stale_for) = piece.served_stale {
                    // Noted at the root fields, not at the root.
                    found.stale.pop();
                    for key in &root.keys {
                        found
                            .stale
                            .push((vec![PathItem::Key(key.to_string())], stale_for));
                    }
                }
                let tape = found.data.add_tape(piece.tape(), by);
                found.data.add_root(id, Node { tape, index });
            }
            Some(at) => {
                let mut steps = Vec::new();
                let targets =
                    found
                        .data
                        .targets(at, &self.plan.root_sources, supergraph, &mut steps, 0);
                let tape = found.data.add_tape(piece.tape(), by);
                for t in targets {
                    found.note(&piece, &steps[t.path]);
                    if let Some(first) = t.view.first() {
                        found.data.merge(first, Node { tape, index });
                    }
                }
            }
        }
    }

    /// An entity fetch: every distinct representation once (from its own walk, or
    /// from an alike fetch's), through the cache. Hits are recorded at once; the
    /// misses' fetch is the future returned.
    fn entities<'s>(
        &'s self,
        id: FetchId,
        fetch: &'a Fetch,
        groups: &'a [EntityGroup],
        now: Instant,
    ) -> Option<Boxed<'s>> {
        let Walk {
            entities,
            steps,
            representations,
            ..
        } = match self.alike_walk(id) {
            Some(walk) => walk,
            None => {
                let walk = self.walk(id, fetch, groups);
                if self.plan.walks_alike.lends(id) {
                    let (walk, lent) = walk.lend();
                    self.walks.lock().push((id, lent));
                    walk
                } else {
                    walk
                }
            }
        };
        if entities.is_empty() {
            return None;
        }
        let cache = self.executor.cache.as_deref();
        let Some(cache) = cache else {
            return Some(Box::pin(async move {
                let items = entities.iter().map(|e| e.item.clone()).collect();
                let request = self.request(id, representations, items);
                let by = Sources::of_fetch(id);
                if request.in_place() {
                    let answer = request.send_in_place().await;
                    self.found
                        .lock()
                        .entities_in_place(&entities, &steps, answer, by);
                    return;
                }
                let answers = request.send((0..entities.len()).collect()).await;
                // One lock for the fetch's answers, not one per entity.
                let mut found = self.found.lock();
                for (entity, answer) in entities.iter().zip(answers) {
                    found.entity(entity, &steps, answer, by);
                }
            }));
        };
        // What the cache has at once, before any future.
        let mut misses: Vec<(usize, Call)> = Vec::new();
        let mut found = self.found.lock();
        for (i, entity) in entities.iter().enumerate() {
            let group = &groups[entity.item.group as usize];
            let representation =
                std::str::from_utf8(entity.item.representation(&representations)).unwrap_or("");
            let namespace = &group.namespaces[entity.namespace].1;
            let call = cache.entity_call(fetch, group, namespace, representation, self.input);
            let refresher = || self.refetch(id, representations.clone(), vec![entity.item.clone()]);
            match cache.hit_at(&call, self.plan.origin, now, refresher) {
                Some(piece) => found.entity(entity, &steps, Ok(piece), Sources::ALL),
                None => misses.push((i, call)),
            }
        }
        drop(found);
        if misses.is_empty() {
            return None;
        }
        Some(Box::pin(async move {
            let items = misses
                .iter()
                .map(|(i, _)| entities[*i].item.clone())
                .collect();
            let request = self.request(id, representations, items);
            let (indices, calls): (Vec<usize>, Vec<Call>) = misses.into_iter().unzip();
            let answers = cache
                .fetch(&calls, self.plan.origin, move |asked| {
                    request.clone().send(asked)
                })
                .await;
            let mut found = self.found.lock();
            for (i, answer) in indices.into_iter().zip(answers) {
                found.entity(&entities[i], &steps, answer, Sources::ALL);
            }
        }))
    }
}
