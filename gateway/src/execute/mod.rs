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
//! [`Tape`]: crate::answer::tape::Tape

pub mod data;
mod rewrites;
mod subgraph_request;

use std::future::Future;
use std::hash::BuildHasher;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use smallvec::SmallVec;

use crate::answer::piece::Piece;
use crate::caching::{Call, ResolverCache};
use crate::documents::validation::Validator;
use crate::fast_map::{FastHasher, FastMap};
use crate::plan::{EntityGroup, Fetch, FetchId, FetchKind, Plan, RootFetch, Sources, Step};
use crate::server::request::RequestInput;
use crate::supergraph::Supergraph;
use crate::upstream::{FetchError, PathItem, Upstream, UpstreamError};
use data::{owned_path, Data, Node, PathStep, Target};
use subgraph_request::{InPlace, Item, SubgraphRequest};

/// An error found during execution, at its place in the response.
#[derive(Debug, Clone)]
pub struct FoundError {
    pub path: Vec<PathItem>,
    pub message: String,
    pub extensions: Option<serde_json::Value>,
    /// A fetch that failed for the object or root field at `path` (rather than a
    /// subgraph's own error): the response reports it at each field it leaves
    /// without a value.
    pub failed_fetch: bool,
}

/// Everything execution found: what the response writer reads.
pub struct Outcome {
    pub data: Data,
    pub errors: Vec<FoundError>,
    /// Places answered from an entry the cache served in place of a failed fetch
    /// (`stale-if-error`), with how long past its freshness it was.
    pub stale: Vec<(Vec<PathItem>, Duration)>,
    /// async-graphql's answer to the introspection root fields.
    pub introspection: Option<async_graphql::Response>,
}

/// Runs plans: the subgraph clients, the optional cache, and async-graphql for
/// introspection.
#[derive(Clone)]
pub struct Executor {
    pub upstream: Arc<Upstream>,
    pub cache: Option<Arc<ResolverCache>>,
    pub validator: Arc<Validator>,
    pub supergraph: Arc<Supergraph>,
}

/// What the fetches of one request found so far.
#[derive(Default)]
struct Found {
    data: Data,
    errors: Vec<FoundError>,
    stale: Vec<(Vec<PathItem>, Duration)>,
}

impl Found {
    /// Record `piece`'s errors (paths relative to `at`) and its staleness.
    fn note(&mut self, piece: &Piece, at: &[PathStep<'_>]) {
        self.note_errors(piece.errors(), at);
        if let Some(stale_for) = piece.served_stale {
            self.stale.push((owned_path(at), stale_for));
        }
    }

    /// Record a subgraph's `errors` (paths relative to `at`).
    fn note_errors(&mut self, errors: &[UpstreamError], at: &[PathStep<'_>]) {
        for e in errors {
            let mut path = owned_path(at);
            path.extend(e.path.iter().cloned());
            self.errors.push(FoundError {
                path,
                message: e.message.clone(),
                extensions: e.extensions.clone(),
                failed_fetch: false,
            });
        }
    }

    /// Record the answer for `entity`, whose targets' places are spans of `steps`,
    /// from the fetches `by` ([`Sources::ALL`] for a cache's answer).
    fn entity(
        &mut self,
        entity: &Entity,
        steps: &[PathStep<'_>],
        answer: Result<Piece, FetchError>,
        by: Sources,
    ) {
        match answer {
            Err(e) => {
                let message = e.to_string();
                for (_, path) in &entity.targets {
                    self.fail(owned_path(&steps[path.clone()]), message.clone());
                }
            }
            Ok(piece) => {
                for (_, path) in &entity.targets {
                    self.note(&piece, &steps[path.clone()]);
                }
                if let Some(value) = piece.value() {
                    let index = value.index();
                    let tape = self.data.add_tape(piece.tape(), by);
                    for (target, _) in &entity.targets {
                        self.data.merge(*target, Node { tape, index });
                    }
                }
            }
        }
    }

    /// An entity fetch's answer read in place: for each entity, in order, what
    /// [`Found::entity`] records for its piece, the answer's tape kept once.
    fn entities_in_place(
        &mut self,
        entities: &[Entity],
        steps: &[PathStep<'_>],
        answer: Result<InPlace, FetchError>,
        by: Sources,
    ) {
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                for entity in entities {
                    self.entity(entity, steps, Err(e.clone()), by);
                }
                return;
            }
        };
        let mut tape = None;
        let mut errors = answer.errors.iter().peekable();
        for (i, (entity, value)) in entities.iter().zip(&answer.values).enumerate() {
            if let Some((_, found)) = errors.next_if(|(at, _)| *at == i) {
                for (_, path) in &entity.targets {
                    self.note_errors(found, &steps[path.clone()]);
                }
            }
            if let Some(index) = *value {
                let tape = *tape.get_or_insert_with(|| self.data.add_tape(&answer.tape, by));
                for (target, _) in &entity.targets {
                    self.data.merge(*target, Node { tape, index });
                }
            }
        }
    }

    fn fail(&mut self, path: Vec<PathItem>, message: String) {
        self.errors.push(FoundError {
            path,
            message,
            extensions: None,
            failed_fetch: true,
        });
    }
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

/// The objects an entity fetch's walk found at its one path, kept for a later fetch
/// whose path goes on from there ([`crate::plan::WalksAlike::on`]).
struct Kept<'a> {
    targets: SmallVec<[Target; 1]>,
    /// Their places ([`Target::path`] is a span of these).
    steps: Arc<Vec<PathStep<'a>>>,
    /// The data's count of changes they were found at ([`Data::changes`]).
    changes: u64,
}

/// What an entity fetch's walk found: its distinct representations with the objects
/// each is for, the places of those objects, and the representations' text.
struct Walk<'a> {
    entities: Held<Entity>,
    steps: Held<PathStep<'a>>,
    representations: Bytes,
    /// The data's count of changes it was made at ([`Data::changes`]).
    changes: u64,
}

impl<'a> Walk<'a> {
    /// This walk, its parts shared from now on with the copy lent to fetches that
    /// walk alike.
    fn lend(self) -> (Walk<'a>, Lent<'a>) {
        let lent = Lent {
            entities: self.entities.into_shared(),
            steps: self.steps.into_shared(),
            representations: self.representations,
            changes: self.changes,
        };
        (lent.walk(), lent)
    }
}

/// A walk kept for the fetches that walk alike.
struct Lent<'a> {
    entities: Arc<Vec<Entity>>,
    steps: Arc<Vec<PathStep<'a>>>,
    representations: Bytes,
    changes: u64,
}

impl<'a> Lent<'a> {
    fn walk(&self) -> Walk<'a> {
        Walk {
            entities: Held::Shared(self.entities.clone()),
            steps: Held::Shared(self.steps.clone()),
            representations: self.representations.clone(),
            changes: self.changes,
        }
    }
}

/// A part of a walk: its fetch's own (as most are: no allocation for sharing), or
/// shared with fetches that walk alike.
enum Held<T> {
    Own(Vec<T>),
    Shared(Arc<Vec<T>>),
}

impl<T> Held<T> {
    fn into_shared(self) -> Arc<Vec<T>> {
        match self {
            Held::Own(parts) => Arc::new(parts),
            Held::Shared(parts) => parts,
        }
    }
}

impl<T> std::ops::Deref for Held<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self {
            Held::Own(parts) => parts,
            Held::Shared(parts) => parts,
        }
    }
}

/// One distinct representation of an entity fetch, and the objects it is for.
struct Entity {
    item: Item,
    /// Its cache namespace (by its type): an index in its group's namespaces (alike
    /// fetches' groups have the same types in the same order).
    namespace: usize,
    /// The objects it is for (most entities are for one: held inline), each with its
    /// place in the response as a span of the fetch's steps ([`Data::targets`]).
    targets: SmallVec<[(Node, Range<usize>); 1]>,
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
            Ok(piece) => piece,
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

    /// The walk of an earlier fetch that fetch `id` walks alike
    /// ([`crate::plan::WalksAlike`]), when nothing was added to the data since it was
    /// made: a walk of its own would find the same.
    fn alike_walk(&self, id: FetchId) -> Option<Walk<'a>> {
        let like = self.plan.walks_alike.like(id)?;
        let walks = self.walks.lock();
        let (_, walk) = walks.iter().find(|(fetch, _)| *fetch == like)?;
        (walk.changes == self.found.lock().data.changes()).then(|| walk.walk())
    }

    /// Walk the data gathered so far to the objects of `groups`' paths, and write
    /// each one's representation: the distinct ones, each with the objects it is
    /// for.
    ///
    /// The fetch's representations are written one after another into one buffer
    /// (an item is a span of it), and its targets' places into one list of steps: a
    /// fetch of hundreds of entities allocates for neither per entity. Both start
    /// with the room the fetch's last request used ([`crate::plan::FetchRoom`]), and
    /// so does each path's list of targets.
    ///
    /// A fetch whose one path goes on from an earlier fetch's walks on from the
    /// objects that fetch found, when nothing was added to the data since
    /// ([`crate::plan::WalksAlike::on`]); a fetch that a later one walks on from keeps
    /// its objects for it.
    fn walk(&self, id: FetchId, fetch: &'a Fetch, groups: &'a [EntityGroup]) -> Walk<'a> {
        let supergraph = &*self.executor.supergraph;
        let mut entities: Vec<Entity> = Vec::with_capacity(4);
        let mut steps: Vec<PathStep<'a>> = Vec::with_capacity(fetch.room.steps.get());
        let mut text: Vec<u8> = Vec::with_capacity(fetch.room.text.get());
        let mut most_targets = 0;
        let changes;
        let mut keep = None;
        {
            let found = self.found.lock();
            changes = found.data.changes();
            // Locked only by a fetch that may walk on (most walk from the root).
            let on = self.plan.walks_alike.on(id);
            let kept = on.map(|_| self.kept.lock());
            let on = on.zip(kept.as_deref()).and_then(|((from, len), kept)| {
                let (_, kept) = kept
                    .iter()
                    .find(|(fetch, k)| *fetch == from && k.changes == changes)?;
                Some((kept, len))
            });
            // Distinct representations per group, by a digest of their text: most
            // fetches have one object, so the index is built only once a second
            // one comes. A digest names a candidate, compared in full.
            let digest = |bytes: &[u8]| FastHasher::default().hash_one(bytes);
            let mut index: Option<FastMap<(u32, u64), usize>> = None;
            for (g, group) in groups.iter().enumerate() {
                let g = g as u32;
                for path in &group.paths {
                    let room = fetch.room.targets.get();
                    let targets = match on {
                        // The fetch's one path: from the earlier fetch's objects.
                        Some((kept, len)) => found.data.targets_from(
                            (&kept.targets, &kept.steps),
                            &path[len..],
                            supergraph,
                            &mut steps,
                            room,
                        ),
                        None => found.data.targets(
                            path,
                            &self.plan.root_sources,
                            supergraph,
                            &mut steps,
                            room,
                        ),
                    };
                    most_targets = most_targets.max(targets.len());
                    entities.reserve(targets.len());
                    // Room for a typical representation (`__typename` and a key) each,
                    // when the last request left no measure of it: reserving past
                    // that measure (targets share representations) made the
                    // allocator copy the whole buffer to a larger one every time.
                    if text.capacity() == 0 {
                        text.reserve(targets.len() * 48);
                    }
                    for target in &targets {
                        let Some(primary) = target.view.first() else {
                            continue;
                        };
                        let start = text.len();
                        let Some(typename) = found.data.representation(
                            &target.view,
                            &group.requires,
                            supergraph,
                            &mut text,
                        ) else {
                            continue;
                        };
                        if !group.input_rewrites.is_empty() {
                            let rewritten = rewrites::apply_to_text(
                                &group.input_rewrites,
                                &text[start..],
                                supergraph,
                            );
                            text.truncate(start);
                            text.extend_from_slice(&rewritten);
                        }
                        let written = &text[start..];
                        let same = |e: &Entity| {
                            e.item.group == g && e.item.representation(&text) == written
                        };
                        // Worked out once, for the look-up and the entry.
                        let key = index.as_ref().map(|_| (g, digest(written)));
                        let known = match (&index, key) {
                            (Some(index), Some(key)) => match index.get(&key) {
                                Some(&at) if same(&entities[at]) => Some(at),
                                // Another representation with the same digest: look
                                // through them all.
                                Some(_) => entities.iter().position(same),
                                None => None,
                            },
                            _ => entities.iter().position(same),
                        };
                        let at = match known {
                            Some(at) => {
                                text.truncate(start);
                                at
                            }
                            None => {
                                let item = Item {
                                    group: g,
                                    span: start as u32..text.len() as u32,
                                };
                                if let (Some(index), Some(key)) = (&mut index, key) {
                                    index.entry(key).or_insert(entities.len());
                                } else if entities.len() >= 8 {
                                    // Room for every target of this path at once.
                                    let mut built = FastMap::with_capacity_and_hasher(
                                        entities.capacity(),
                                        Default::default(),
                                    );
                                    for (i, e) in entities.iter().enumerate() {
                                        let key =
                                            (e.item.group, digest(e.item.representation(&text)));
                                        built.entry(key).or_insert(i);
                                    }
                                    built.entry((g, digest(written))).or_insert(entities.len());
                                    index = Some(built);
                                }
                                let namespace =
                                    group.namespace_index(typename.as_deref().unwrap_or(""));
                                entities.push(Entity {
                                    item,
                                    namespace,
                                    targets: SmallVec::new(),
                                });
                                entities.len() - 1
                            }
                        };
                        entities[at].targets.push((primary, target.path.clone()));
                    }
                    // The fetch's one path (no other fetch is walked on from).
                    if self.plan.walks_alike.keeps(id) {
                        keep = Some(targets);
                    }
                }
            }
        }
        fetch.room.steps.note(steps.len());
        fetch.room.text.note(text.len());
        fetch.room.targets.note(most_targets);
        let steps = match keep {
            Some(targets) => {
                let steps = Arc::new(steps);
                let kept = Kept {
                    targets,
                    steps: steps.clone(),
                    changes,
                };
                self.kept.lock().push((id, kept));
                Held::Shared(steps)
            }
            None => Held::Own(steps),
        };
        Walk {
            entities: Held::Own(entities),
            steps,
            representations: Bytes::from(text),
            changes,
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
