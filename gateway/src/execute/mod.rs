//! Execution: run a [`Plan`] for one request, fetching through the cache seam.
//!
//! The plan's fetches form a tree. Root fields go first, each a request of its own:
//! for a query all at once, each going on to its nested fetches as soon as it is
//! answered; for a mutation one field after another, each followed by its
//! invalidations and its nested fetches, as GraphQL's serial execution requires. When a fetch's answer arrives, it is walked (`collect`) for
//! the objects whose selection needs fields another subgraph owns. Those become the
//! next *wave*: every entity the wave needs from one subgraph goes into one request
//! (one aliased `_entities` field per planned site), whatever fields or positions
//! they come from, so siblings that need the same subgraph share a request. A
//! wave's answers are walked in turn, until nothing is left to fetch.
//!
//! With a cache ([`crate::caching`]) every root field and every entity is looked up
//! under its own key first; only the misses go into the request, and a miss that
//! another request is already fetching is joined instead. Lookups the store answers
//! at once (memory) are made before any future is built, level after level, so a
//! request that is all hits completes in its first poll (a hit a strategy wants
//! refreshed early gets a one-item wave of its own, run in the background by the
//! cache). Without a cache, every
//! fetch goes upstream (identical entities of one wave still share one
//! representation).
//!
//! Nothing here builds a value tree: subgraph answers stay in their [`Tape`]s as
//! [`Piece`]s, recorded per root field and per (site, object); the response writer
//! ([`crate::response`]) reads them in query order. Everything runs in the request's
//! own task (no spawns): waves of different subgraphs are joined futures.
//!
//! [`Tape`]: crate::json::Tape

mod collect;
mod wave;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_graphql::Variables;
use async_graphql_value::{ConstValue, Value as AstValue};
use hyper::header::{HeaderMap, HeaderValue};
use parking_lot::Mutex;

use crate::caching::{Call, ResolverCache};
use crate::fast_map::FastMap;
use crate::piece::Piece;
use crate::plan::{Plan, SiteId};
use crate::supergraph::SubgraphId;
use crate::upstream::Upstream;
use crate::validation::Validator;
pub use collect::object_id;
use collect::EntityCall;
use wave::{Item, Wave};

/// Why a fetch produced no piece: the message reported at the fields it was for.
pub type Failure = Arc<str>;

/// An object's identity within one request: its tape and its index in it.
pub type ObjectId = (usize, u32);

/// What one request brings to execution.
pub struct RequestInput {
    /// The client's `authorization`, forwarded to the subgraphs.
    pub authorization: Option<HeaderValue>,
    /// The client's headers (cache policies may key by them).
    pub headers: HeaderMap,
    /// The client's variables as sent (defaults are in the subgraph requests'
    /// declarations).
    pub variables: serde_json::Map<String, serde_json::Value>,
    /// The same, as async-graphql reads them (introspection).
    pub graphql_variables: Variables,
}

impl RequestInput {
    pub fn variable(&self, name: &str) -> Option<&serde_json::Value> {
        self.variables.get(name)
    }

    /// An argument as written, with its variables' values (null when not sent).
    pub fn resolve(&self, value: &AstValue) -> serde_json::Value {
        let constant = value.clone().into_const_with(|name| {
            Ok::<_, std::convert::Infallible>(
                self.variables
                    .get(name.as_str())
                    .and_then(|v| ConstValue::from_json(v.clone()).ok())
                    .unwrap_or(ConstValue::Null),
            )
        });
        constant
            .ok()
            .and_then(|c| c.into_json().ok())
            .unwrap_or(serde_json::Value::Null)
    }
}

/// Everything execution found: what the response writer reads.
pub struct Outcome {
    /// Per root fetch of the plan.
    pub roots: Vec<Option<Result<Piece, Failure>>>,
    /// Per (site, object): the entity's piece for that object.
    pub sites: FastMap<(SiteId, ObjectId), Result<Piece, Failure>>,
    /// async-graphql's answer to the introspection root fields.
    pub introspection: Option<async_graphql::Response>,
}

/// Runs plans: the subgraph clients, the optional cache, and async-graphql for
/// introspection.
pub struct Executor {
    pub upstream: Arc<Upstream>,
    pub cache: Option<Arc<ResolverCache>>,
    pub validator: Arc<Validator>,
}

/// What the fetches of one request found so far.
struct Found {
    roots: Vec<Option<Result<Piece, Failure>>>,
    sites: FastMap<(SiteId, ObjectId), Result<Piece, Failure>>,
}

type Boxed<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A background refresh's fetch.
type Refetch =
    Pin<Box<dyn Future<Output = Vec<Result<Piece, crate::upstream::FetchError>>> + Send>>;

impl Executor {
    /// Execute `plan` for one request.
    pub async fn run(&self, plan: &Arc<Plan>, input: &Arc<RequestInput>) -> Outcome {
        let found = Mutex::new(Found {
            roots: plan.roots.iter().map(|_| None).collect(),
            sites: FastMap::default(),
        });
        let fetches = async {
            if plan.mutation {
                for i in 0..plan.roots.len() {
                    self.root(plan, i, None, input, &found).await;
                }
                return;
            }
            // What the cache has at once, before any future.
            let mut missing = Vec::new();
            let mut next = Vec::new();
            for (i, root) in plan.roots.iter().enumerate() {
                let call = self.cache.as_ref().map(|c| c.root_call(plan, root, input));
                let hit = match (&self.cache, &call) {
                    (Some(cache), Some(call)) => cache.hit_now(call, || {
                        self.refetch(plan, input, root.subgraph, Item::Root(i))
                    }),
                    _ => None,
                };
                match hit {
                    Some(piece) => record_root(plan, i, Ok(piece), &mut next, &found),
                    None => missing.push((i, call)),
                }
            }
            let next = self.hits(plan, next, input, &found);
            if missing.is_empty() && next.is_empty() {
                return;
            }
            let roots = missing
                .into_iter()
                .map(|(i, call)| self.root(plan, i, call, input, &found));
            futures::future::join(
                futures::future::join_all(roots),
                self.waves(plan, next, input, &found),
            )
            .await;
        };
        let introspection = async {
            match &plan.introspection {
                Some(doc) => Some(
                    self.validator
                        .introspect(doc, &input.graphql_variables)
                        .await,
                ),
                None => None,
            }
        };
        let ((), introspection) = futures::future::join(fetches, introspection).await;
        let found = found.into_inner();
        Outcome {
            roots: found.roots,
            sites: found.sites,
            introspection,
        }
    }

    /// Fetch root field `i` (`call` is the cache's call for it, when a query), then
    /// everything beneath it.
    async fn root(
        &self,
        plan: &Arc<Plan>,
        i: usize,
        call: Option<Call>,
        input: &Arc<RequestInput>,
        found: &Mutex<Found>,
    ) {
        let root = &plan.roots[i];
        // The wave is built only when a fetch goes out (not on a hit or a dedupe).
        let (upstream, wave_plan, wave_input) =
            (self.upstream.clone(), plan.clone(), input.clone());
        let subgraph = root.subgraph;
        let fetch = move |asked: Vec<usize>| {
            let wave = Wave::new(
                upstream.clone(),
                wave_plan.clone(),
                wave_input.clone(),
                subgraph,
                vec![Item::Root(i)],
            );
            Arc::new(wave).fetch(asked)
        };
        let piece = match (&self.cache, call) {
            (Some(cache), Some(call)) => cache.fetch(&[call], fetch).await,
            _ => fetch(vec![0]).await,
        }
        .pop()
        .unwrap_or_else(|| {
            Err(crate::upstream::FetchError::Unavailable {
                subgraph: self.upstream.name(root.subgraph).to_string(),
                detail: "no answer".into(),
            })
        });
        if let (true, Some(cache), Ok(piece)) = (root.mutation, &self.cache, &piece) {
            cache.after_mutation(&root.namespace, piece).await;
        }
        let mut next = Vec::new();
        record_root(
            plan,
            i,
            piece.map_err(|e| e.to_string().into()),
            &mut next,
            found,
        );
        let next = self.hits(plan, next, input, found);
        self.waves(plan, next, input, found).await;
    }

    /// A fetch of `item` alone, as the cache takes it: what a background refresh of
    /// its cached entry runs (boxed: it is built only when a refresh starts).
    fn refetch(
        &self,
        plan: &Arc<Plan>,
        input: &Arc<RequestInput>,
        subgraph: SubgraphId,
        item: Item,
    ) -> impl Fn(Vec<usize>) -> Refetch + Send + Sync + 'static {
        let wave = Arc::new(Wave::new(
            self.upstream.clone(),
            plan.clone(),
            input.clone(),
            subgraph,
            vec![item],
        ));
        move |asked| Box::pin(wave.clone().fetch(asked))
    }

    /// Answer what the cache has at once among `calls`, and among the calls their
    /// answers lead to, level after level; record calls that cannot be made. Returns
    /// the calls that need a fetch, each with its cache call.
    fn hits<'a>(
        &self,
        plan: &'a Arc<Plan>,
        mut calls: Vec<EntityCall<'a>>,
        input: &Arc<RequestInput>,
        found: &Mutex<Found>,
    ) -> Vec<EntityCall<'a>> {
        let mut misses = Vec::new();
        while !calls.is_empty() {
            let mut next = Vec::new();
            for mut call in calls {
                let representation = match &call.representation {
                    Ok(r) => r,
                    Err(failure) => {
                        found
                            .lock()
                            .sites
                            .insert((call.site, call.object), Err(failure.clone()));
                        continue;
                    }
                };
                let Some(cache) = &self.cache else {
                    misses.push(call);
                    continue;
                };
                let site = &plan.sites[call.site as usize];
                let cached = cache.entity_call(plan, site, representation, input);
                let refresher = || {
                    let item = Item::Entity {
                        site: call.site,
                        representation: representation.as_str().into(),
                    };
                    self.refetch(plan, input, site.subgraph, item)
                };
                match cache.hit_now(&cached, refresher) {
                    Some(piece) => {
                        collect::entity_fields(plan, &call, &piece, &mut next);
                        found
                            .lock()
                            .sites
                            .insert((call.site, call.object), Ok(piece));
                    }
                    None => {
                        call.cached = Some(cached);
                        misses.push(call);
                    }
                }
            }
            calls = next;
        }
        misses
    }

    /// Fetch the entities `calls` ask for, one request per subgraph, then whatever
    /// their answers need in turn.
    fn waves<'a>(
        &'a self,
        plan: &'a Arc<Plan>,
        calls: Vec<EntityCall<'a>>,
        input: &'a Arc<RequestInput>,
        found: &'a Mutex<Found>,
    ) -> Boxed<'a> {
        Box::pin(async move {
            if calls.is_empty() {
                return;
            }
            let mut by_subgraph: Vec<(SubgraphId, Vec<EntityCall<'a>>)> = Vec::new();
            for call in calls {
                let subgraph = plan.sites[call.site as usize].subgraph;
                match by_subgraph.iter_mut().find(|(s, _)| *s == subgraph) {
                    Some((_, list)) => list.push(call),
                    None => by_subgraph.push((subgraph, vec![call])),
                }
            }
            futures::future::join_all(
                by_subgraph
                    .into_iter()
                    .map(|(subgraph, calls)| self.wave(plan, subgraph, calls, input, found)),
            )
            .await;
        })
    }

    /// One subgraph's share of a wave: each distinct entity once, then the next waves.
    async fn wave<'a>(
        &'a self,
        plan: &'a Arc<Plan>,
        subgraph: SubgraphId,
        mut calls: Vec<EntityCall<'a>>,
        input: &'a Arc<RequestInput>,
        found: &'a Mutex<Found>,
    ) {
        // Distinct (site, representation) pairs become the wave's items (the
        // representations were all built: `hits` recorded the failures).
        let mut items: Vec<Item> = Vec::new();
        let mut cached: Vec<Call> = Vec::new();
        let mut firsts: Vec<usize> = Vec::new();
        let mut item_of: Vec<usize> = Vec::with_capacity(calls.len());
        {
            let mut index: FastMap<(SiteId, &str), usize> = FastMap::default();
            for (c, call) in calls.iter_mut().enumerate() {
                let representation = call.representation.as_deref().unwrap_or_default();
                let at = *index.entry((call.site, representation)).or_insert_with(|| {
                    items.push(Item::Entity {
                        site: call.site,
                        representation: representation.into(),
                    });
                    if let Some(c) = call.cached.take() {
                        cached.push(c);
                    }
                    firsts.push(c);
                    items.len() - 1
                });
                item_of.push(at);
            }
        }
        let n = items.len();
        let wave = Arc::new(Wave::new(
            self.upstream.clone(),
            plan.clone(),
            input.clone(),
            subgraph,
            items,
        ));
        let answers = match &self.cache {
            Some(cache) if cached.len() == n => {
                cache
                    .fetch(&cached, move |asked| wave.clone().fetch(asked))
                    .await
            }
            _ => wave.fetch((0..n).collect()).await,
        };
        let pieces: Vec<Result<Piece, Failure>> = answers
            .into_iter()
            .map(|a| a.map_err(|e| Failure::from(e.to_string())))
            .collect();
        // What the answers need next: each distinct entity is walked once.
        let mut next = Vec::new();
        for (&first, piece) in firsts.iter().zip(&pieces) {
            if let Ok(piece) = piece {
                collect::entity_fields(plan, &calls[first], piece, &mut next);
            }
        }
        {
            let mut found = found.lock();
            for (call, &item) in calls.iter().zip(&item_of) {
                found
                    .sites
                    .insert((call.site, call.object), pieces[item].clone());
            }
        }
        let next = self.hits(plan, next, input, found);
        self.waves(plan, next, input, found).await;
    }
}

/// Record root field `i`'s answer, and push the entity calls beneath it.
fn record_root<'a>(
    plan: &'a Plan,
    i: usize,
    piece: Result<Piece, Failure>,
    next: &mut Vec<EntityCall<'a>>,
    found: &Mutex<Found>,
) {
    if let (Ok(piece), Some(children)) =
        (&piece, &plan.root.fields[plan.roots[i].out_field].children)
    {
        if let Some(value) = piece.value() {
            collect::calls(plan, piece.tape(), value, children, next);
        }
    }
    found.lock().roots[i] = Some(piece);
}
