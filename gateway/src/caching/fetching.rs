//! Calls resolved through cache-core: a hit looked up at once, or a batch of calls
//! whose hits come back at once, whose calls in flight elsewhere are joined, and whose
//! misses and bypasses go to one run of the executor's fetch (one subgraph request).
//!
//! What cache-core keeps of a fetched piece is made here ([`keep`]): its references,
//! the subgraph's `Cache-Control`, whether the key names the caller. A piece with
//! errors travels as a failure, so it reaches whoever waited for it and is never
//! stored; [`answer`] turns it back into the piece for the executor.

use std::future::Future;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use cache_core::{BatchCall, CacheError, Fetched};

use super::calls::{Call, Keeping};
use super::{references, ResolverCache};
use crate::answer::piece::Piece;
use crate::upstream::FetchError;

impl ResolverCache {
    /// The stored piece for `call` by the operation `origin`, when the storage has it
    /// fresh and can answer at once (counted as a hit, and as a cross-operation hit
    /// when another operation stored it); `None` sends the call to
    /// [`ResolverCache::fetch`].
    /// `refresher` is asked for the call's fetch (as [`ResolverCache::fetch`] takes
    /// it) only when a strategy wants the hit refreshed early; it then runs in the
    /// background. Freshness is judged at `now`, one clock reading the caller takes
    /// for all the calls it looks up at once.
    pub fn hit_at<R, F, Fut>(
        &self,
        call: &Call,
        origin: u64,
        now: Instant,
        refresher: R,
    ) -> Option<Piece>
    where
        R: FnOnce() -> F,
        F: Fn(Vec<usize>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<Piece, FetchError>>> + Send + 'static,
    {
        let key = call.key?;
        let keeping = call.keeping();
        let mut piece =
            self.tiers[call.slot.tier]
                .cache
                .hit_at(key, &call.slot.namespace, now, move || {
                    single(refresher(), keeping)
                })?;
        if piece.origin != origin && piece.origin != 0 {
            call.slot.crossed.hits.fetch_add(1, Relaxed);
        }
        call.slot.stamp(&mut piece);
        Some(piece)
    }

    /// Resolve `calls` of the operation `origin` together: hits at once, calls in
    /// flight elsewhere joined, and one run of `fetch` (given the indices of the calls
    /// it must answer) for every miss and bypass. A piece with errors is handed to
    /// whoever waited for it but never stored. A call answered with a piece another
    /// operation fetched is counted (`in_flight`).
    pub async fn fetch<F, Fut>(
        &self,
        calls: &[Call],
        origin: u64,
        fetch: F,
    ) -> Vec<Result<Piece, FetchError>>
    where
        F: Fn(Vec<usize>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<Piece, FetchError>>> + Send + 'static,
    {
        let mut answers = self.fetch_all(calls, fetch).await;
        for (call, answer) in calls.iter().zip(&mut answers) {
            if let Ok(piece) = answer {
                if piece.origin != origin && piece.origin != 0 {
                    call.slot.crossed.in_flight.fetch_add(1, Relaxed);
                }
                if call.key.is_some() {
                    call.slot.stamp(piece);
                }
            }
        }
        answers
    }

    /// [`ResolverCache::fetch`] without the counting.
    async fn fetch_all<F, Fut>(&self, calls: &[Call], fetch: F) -> Vec<Result<Piece, FetchError>>
    where
        F: Fn(Vec<usize>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<Piece, FetchError>>> + Send + 'static,
    {
        if let [call] = calls {
            // One call (every root field, and many waves): the single-key path.
            return vec![self.fetch_one(call, fetch).await];
        }
        let mut tiers: Vec<usize> = calls.iter().map(|c| c.slot.tier).collect();
        tiers.sort_unstable();
        tiers.dedup();
        if let [tier] = tiers[..] {
            // The usual case: every call in one tier, indices as they are.
            return self.fetch_tier(tier, calls, None, fetch).await;
        }
        let mut results: Vec<Option<Result<Piece, FetchError>>> =
            calls.iter().map(|_| None).collect();
        for tier in tiers {
            // The calls of this tier, by their index in `calls`.
            let mine: Arc<[usize]> = (0..calls.len())
                .filter(|&i| calls[i].slot.tier == tier)
                .collect();
            let subset: Vec<&Call> = mine.iter().map(|&i| &calls[i]).collect();
            let answers = self
                .fetch_tier(tier, &subset, Some(mine.clone()), fetch.clone())
                .await;
            for (&i, answer) in mine.iter().zip(answers) {
                results[i] = Some(answer);
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| answer(Err(CacheError::Aborted))))
            .collect()
    }

    /// [`ResolverCache::fetch`] for one call, through cache-core's single-key path.
    async fn fetch_one<F, Fut>(&self, call: &Call, fetch: F) -> Result<Piece, FetchError>
    where
        F: Fn(Vec<usize>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<Piece, FetchError>>> + Send + 'static,
    {
        let cache = &self.tiers[call.slot.tier].cache;
        let one = single(fetch, call.keeping());
        answer(match call.key {
            Some(key) => cache.get_or_fetch(key, &call.slot.namespace, one).await,
            None => cache.bypass(&call.slot.namespace, one).await,
        })
    }

    /// [`ResolverCache::fetch`] for calls of one tier; `map` turns their indices into
    /// the indices `fetch` knows (none: the same).
    async fn fetch_tier<C, F, Fut>(
        &self,
        tier: usize,
        calls: &[C],
        map: Option<Arc<[usize]>>,
        fetch: F,
    ) -> Vec<Result<Piece, FetchError>>
    where
        C: std::borrow::Borrow<Call>,
        F: Fn(Vec<usize>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<Piece, FetchError>>> + Send + 'static,
    {
        let batch: Vec<BatchCall<'_, Piece>> = calls
            .iter()
            .map(|c| {
                let c = c.borrow();
                match c.key {
                    Some(key) => BatchCall::Cached {
                        key,
                        namespace: &c.slot.namespace,
                    },
                    None => BatchCall::Bypass {
                        namespace: &c.slot.namespace,
                    },
                }
            })
            .collect();
        // Each call's policy references and caller, only when some call needs them.
        let keeping: Option<Arc<[Keeping]>> = calls
            .iter()
            .any(|c| !c.borrow().slot.rule.references.is_empty() || c.borrow().per_caller)
            .then(|| calls.iter().map(|c| c.borrow().keeping()).collect());
        let fetch_tier = move |local: Vec<usize>| {
            let (fetch, map, keeping) = (fetch.clone(), map.clone(), keeping.clone());
            async move {
                let asked = match &map {
                    Some(map) => local.iter().map(|&l| map[l]).collect(),
                    None => local.clone(),
                };
                let pieces = fetch(asked).await;
                local
                    .iter()
                    .zip(pieces)
                    .map(|(&l, piece)| {
                        let (refs, per_caller) = keeping.as_ref().map_or((&[][..], false), |k| {
                            (&k[l].rule.references[..], k[l].per_caller)
                        });
                        keep(piece, refs, per_caller)
                    })
                    .collect::<Vec<_>>()
            }
        };
        self.tiers[tier]
            .cache
            .get_or_fetch_many(&batch, fetch_tier)
            .await
            .into_iter()
            .map(answer)
            .collect()
    }
}

/// A fetch that failed, as cache-core sees it: the subgraph could not be asked, or
/// it answered with errors (the piece then goes to every waiter as it is, and is
/// never stored).
#[derive(Debug)]
enum Failed {
    Upstream(FetchError),
    Answer(Box<Piece>),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Upstream(e) => e.fmt(f),
            Failed::Answer(piece) => match piece.errors().first() {
                Some(e) => write!(f, "the subgraph answered with errors: {}", e.message),
                None => f.write_str("the subgraph answered with errors"),
            },
        }
    }
}

impl std::error::Error for Failed {}

/// A fetched piece as cache-core keeps it: with its references (the entities in it,
/// plus the policy's), the subgraph's `Cache-Control` and whether the key names the
/// caller; a failure when it carries errors.
fn keep(
    fetched: Result<Piece, FetchError>,
    extra: &[String],
    per_caller: bool,
) -> Result<Fetched<Piece>, Failed> {
    let piece = fetched.map_err(Failed::Upstream)?;
    if !piece.errors().is_empty() {
        return Err(Failed::Answer(Box::new(piece)));
    }
    let mut refs = extra.to_vec();
    if let Some(value) = piece.value() {
        references::collect(value, &mut refs);
    }
    let directives = piece.cache_control;
    Ok(Fetched::new(piece)
        .references(refs)
        .cache_control(directives)
        .keyed_by_caller(per_caller))
}

/// One call's fetch as cache-core runs it, boxed.
type OneFetch = std::pin::Pin<Box<dyn Future<Output = Result<Fetched<Piece>, Failed>> + Send>>;

/// The one-call fetch cache-core runs for a call, out of the executor's `fetch`.
fn single<F, Fut>(fetch: F, keeping: Keeping) -> impl FnOnce() -> OneFetch + Send + 'static
where
    F: Fn(Vec<usize>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Vec<Result<Piece, FetchError>>> + Send + 'static,
{
    move || {
        Box::pin(async move {
            let answer = fetch(vec![0]).await.pop().unwrap_or_else(|| {
                Err(FetchError::Unavailable {
                    subgraph: "cache".into(),
                    detail: "the fetch returned no answer".into(),
                })
            });
            keep(answer, &keeping.rule.references, keeping.per_caller)
        })
    }
}

/// What the executor gets for a call: the piece (one with errors included), or why
/// there is none.
fn answer(result: Result<Piece, CacheError>) -> Result<Piece, FetchError> {
    let error = match result {
        Ok(piece) => return Ok(piece),
        Err(error) => error,
    };
    if let CacheError::Fetch(inner) = &error {
        match inner.downcast_ref::<Failed>() {
            Some(Failed::Answer(piece)) => return Ok((**piece).clone()),
            Some(Failed::Upstream(fetch)) => return Err(fetch.clone()),
            None => {}
        }
    }
    Err(FetchError::Unavailable {
        subgraph: "cache".into(),
        detail: error.to_string(),
    })
}
