//! [`Cache::get_or_fetch_many`]: many calls at once, one fetch for all
//! that miss.
//!
//! A caller that resolves a list of parents (a GraphQL gateway asking one
//! back end for many entities) wants each parent cached under its own key,
//! but the misses fetched together in one request. This is that call:
//!
//! 1. Calls a strategy bypasses, or that the caller marks [`BatchCall::Bypass`],
//!    skip the cache (counted as skips) and join the fetch.
//! 2. The keys whose policy may store are read with one batched storage
//!    read ([`crate::storage::Storage::get_many`]: one `MGET` on Redis).
//!    Fresh values are hits (a strategy may ask for an early refresh of
//!    one); stale ones are served at once, and each gets one background
//!    refresh that fetches that key alone.
//! 3. Every other key is claimed in the dedupe table, as
//!    [`Cache::get_or_fetch`] does: it follows a fetch already in flight
//!    (a dedupe), or leads a new one (a miss).
//! 4. `fetch` runs once, with the indices of the leading and bypassing
//!    calls, while the followers wait on their flights. It answers each
//!    index on its own: one call can fail while the others succeed.
//! 5. Each leader's answer is stored (if the policy, the strategies and
//!    the invalidation race check allow) and handed to its followers,
//!    exactly as a single call's would be, as soon as the fetch answers:
//!    beside this call's own waits, not after them. Two batches that claimed
//!    the same keys in an interleaved order (on two threads) each lead a key
//!    the other follows; settling after one's own waits would deadlock them.
//!
//! A follower whose leader went away (dropped mid-fetch) is retried in a
//! new round, so nobody waits on a fetch nobody runs. Dropping this call's
//! future drops its leaders' guards: their followers take over the same
//! way. The same key twice in one batch is allowed: it is claimed once and
//! the later calls get a copy of the first one's answer.

use std::error::Error as StdError;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use crate::cache::{Answer, Waited};
use crate::error::{CacheError, FetchError};
use crate::inflight::{Claim, Flight, LeaderGuard};
use crate::key::CacheKey;
use crate::namespace::Namespace;
use crate::policy::Fetched;
use crate::stats::Counter;
use crate::storage::{StorageFuture, Stored};
use crate::Cache;

/// One call of a [`Cache::get_or_fetch_many`] batch.
pub enum BatchCall<'a, V> {
    /// Look `key` up in `namespace`; fetch it (deduplicated) if missing.
    Cached {
        key: CacheKey,
        namespace: &'a Namespace<V>,
    },
    /// Fetch without the cache (no lookup, no dedupe, no store), counted
    /// as a skip in `namespace`: for calls the caller knows must not be
    /// cached, such as one carrying a user's credentials.
    Bypass { namespace: &'a Namespace<V> },
}

impl<V> BatchCall<'_, V> {
    fn namespace(&self) -> &Namespace<V> {
        match self {
            BatchCall::Cached { namespace, .. } | BatchCall::Bypass { namespace } => namespace,
        }
    }
}

/// A leader of this batch: the call's index, its key, its flight, and the
/// expired entry it found (for `recover`).
struct Lead<V> {
    index: usize,
    key: CacheKey,
    flight: Arc<Flight<V>>,
    previous: Option<Stored<V>>,
}

/// A call to claim in the dedupe table: its index, key, the retired count
/// read before its storage read (none: it did not read) and the expired
/// entry that read found.
type ToClaim<V> = (usize, CacheKey, Option<u64>, Option<Stored<V>>);

/// A one-key fetch, boxed.
type OneFetch<T> =
    std::pin::Pin<Box<dyn Future<Output = Result<T, Box<dyn StdError + Send + Sync>>> + Send>>;

/// The one-key fetch of call `i`, out of a batch's `fetch`: what a
/// background refresh of that key runs.
fn one_of<F, Fut, T, E>(fetch: F, i: usize) -> impl FnOnce() -> OneFetch<T> + Send + 'static
where
    F: Fn(Vec<usize>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Vec<Result<T, E>>> + Send + 'static,
    T: Send + 'static,
    E: Into<Box<dyn StdError + Send + Sync>> + Send + 'static,
{
    move || {
        Box::pin(async move {
            match fetch(vec![i]).await.into_iter().next() {
                Some(Ok(value)) => Ok(value),
                Some(Err(error)) => Err(error.into()),
                None => Err(Box::new(MissingAnswer) as Box<dyn StdError + Send + Sync>),
            }
        })
    }
}

impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// The fresh value stored under `key`, when the storage can answer at once (the
    /// memory store always can; one that needs a round trip never does), counted as
    /// a hit. `None` otherwise (missing, stale, bypassed by a strategy, or the answer
    /// needs waiting): then nothing is counted, and the call goes through
    /// [`Cache::get_or_fetch_many`] or [`Cache::get_or_fetch`] as usual.
    ///
    /// This lets a caller answer everything that is cached without building a
    /// future per call. `refresher` is asked for a fetch of the key only when a
    /// strategy wants this hit refreshed early (and none is in flight); that
    /// fetch then runs in the background.
    pub fn hit_now<R, F, Fut, T, E>(
        &self,
        key: CacheKey,
        namespace: &Namespace<V>,
        refresher: R,
    ) -> Option<V>
    where
        R: FnOnce() -> F,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Into<Fetched<V>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>> + Send + 'static,
    {
        self.hit_at(key, namespace, Instant::now(), refresher)
    }

    /// [`Cache::hit_now`] with freshness judged at `now`: a caller that looks up
    /// many keys at one moment (every entity of a fetch step, every fetch of a
    /// wave) reads the clock once for all of them. `now` must be a recent reading;
    /// an entry is served when `now` is before its freshness ends.
    pub fn hit_at<R, F, Fut, T, E>(
        &self,
        key: CacheKey,
        namespace: &Namespace<V>,
        now: Instant,
        refresher: R,
    ) -> Option<V>
    where
        R: FnOnce() -> F,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Into<Fetched<V>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>> + Send + 'static,
    {
        let inner = &*self.inner;
        let strategies = !namespace.policy().strategies.is_empty();
        if !namespace.policy().may_store() || (strategies && inner.bypassed(namespace, key, false))
        {
            return None;
        }
        let StorageFuture::Ready(ready) = inner.storage.get(key) else {
            return None;
        };
        let stored = ready.into_inner().ok().flatten()?;
        if now >= stored.fresh_until {
            return None;
        }
        self.fresh_hit(namespace, key, &stored, now, strategies, refresher);
        Some(stored.value)
    }

    /// The values for many calls at once, in order: stored, shared with
    /// fetches in flight, or fetched by one run of `fetch` for all the
    /// calls that need one (see the module docs).
    ///
    /// `fetch` gets the indices (into `calls`) it must answer and returns
    /// one result per index, in the same order; a missing answer counts as
    /// a failure of that call. It is called once per round (a round is
    /// repeated only for calls whose leader went away), and once more per
    /// stale value, for that value's background refresh; so it must be
    /// cloneable and `'static`.
    pub async fn get_or_fetch_many<F, Fut, T, E>(
        &self,
        calls: &[BatchCall<'_, V>],
        fetch: F,
    ) -> Vec<Result<V, CacheError>>
    where
        F: Fn(Vec<usize>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<T, E>>> + Send + 'static,
        T: Into<Fetched<V>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>> + Send + 'static,
    {
        let mut results: Vec<Option<Result<V, CacheError>>> = calls.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = (0..calls.len()).collect();
        while !pending.is_empty() {
            pending = self.round(calls, &pending, &fetch, &mut results).await;
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or(Err(CacheError::Aborted)))
            .collect()
    }

    /// One round over `pending`; returns the calls to try again (their
    /// leader went away, or a flight stored while they looked).
    async fn round<F, Fut, T, E>(
        &self,
        calls: &[BatchCall<'_, V>],
        pending: &[usize],
        fetch: &F,
        results: &mut [Option<Result<V, CacheError>>],
    ) -> Vec<usize>
    where
        F: Fn(Vec<usize>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<T, E>>> + Send + 'static,
        T: Into<Fetched<V>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>> + Send + 'static,
    {
        let inner = &*self.inner;
        let mut direct = Vec::new();
        let mut to_read: Vec<(usize, CacheKey)> = Vec::new();
        let mut to_claim: Vec<ToClaim<V>> = Vec::new();
        for &i in pending {
            match &calls[i] {
                BatchCall::Bypass { namespace } => {
                    namespace.counters().incr(Counter::Skips);
                    direct.push(i);
                }
                BatchCall::Cached { key, namespace } => {
                    if !namespace.policy().strategies.is_empty()
                        && inner.bypassed(namespace, *key, true)
                    {
                        namespace.counters().incr(Counter::Skips);
                        direct.push(i);
                    } else if namespace.policy().may_store() {
                        to_read.push((i, *key));
                    } else {
                        to_claim.push((i, *key, None, None));
                    }
                }
            }
        }
        if !to_read.is_empty() {
            self.read_many(calls, &to_read, fetch, results, &mut to_claim)
                .await;
        }
        let mut again = Vec::new();
        let mut leads = Vec::new();
        let mut follows = Vec::new();
        // A key this batch holds twice is claimed once; the later calls copy the first
        // one's answer. (Claimed twice, the second would follow a flight this very call
        // leads and settles only after its followers are done: it would wait forever.)
        let mut copies: Vec<(usize, usize)> = Vec::new();
        let mut claimed: Vec<(CacheKey, usize)> = Vec::new();
        for (i, key, seen, previous) in to_claim {
            if let Some(&(_, first)) = claimed.iter().find(|(k, _)| *k == key) {
                calls[i].namespace().counters().incr(Counter::Dedupes);
                copies.push((i, first));
                continue;
            }
            claimed.push((key, i));
            let counters = calls[i].namespace().counters();
            match inner.inflight.claim(key, seen) {
                Claim::LookAgain => again.push(i),
                Claim::Follow(flight) => {
                    counters.incr(Counter::Dedupes);
                    follows.push((i, flight));
                }
                Claim::Lead(flight) => {
                    counters.incr(Counter::Misses);
                    leads.push(Lead {
                        index: i,
                        key,
                        flight,
                        previous,
                    });
                }
            }
        }
        // Guards first: if this future is dropped from here on, the
        // followers of these flights take over.
        let guards: Vec<LeaderGuard<'_, V>> = leads
            .iter()
            .map(|lead| LeaderGuard::new(&inner.inflight, lead.key, &lead.flight))
            .collect();
        let mut asked: Vec<usize> = direct.clone();
        asked.extend(leads.iter().map(|lead| lead.index));
        let started = Instant::now();
        // The fetch, then each leader's answer stored and handed to its followers, runs
        // beside this call's own waits, never after them: another call may follow a
        // flight this one leads while this one follows a flight that call leads (two
        // batches that claimed the same keys in an interleaved order, on two threads).
        // Settling only once our own waits were done would make each wait on the other.
        let fetching = (!asked.is_empty()).then(|| fetch(asked));
        let settling = async {
            let answers = match fetching {
                Some(fetching) => fetching.await,
                None => Vec::new(),
            };
            let fetched_in = started.elapsed();
            let mut settled: Vec<(usize, Result<V, CacheError>)> =
                Vec::with_capacity(direct.len() + leads.len());
            let mut answers = answers.into_iter();
            for &i in &direct {
                settled.push((
                    i,
                    match answers.next() {
                        Some(Ok(value)) => Ok(value.into().value),
                        Some(Err(error)) => {
                            calls[i].namespace().counters().incr(Counter::Errors);
                            Err(CacheError::Fetch(Arc::from(error.into())))
                        }
                        None => Err(missing_answer()),
                    },
                ));
            }
            for (lead, guard) in leads.iter().zip(guards) {
                let fetched = match answers.next() {
                    Some(Ok(value)) => Ok(value.into()),
                    Some(Err(error)) => Err(Arc::from(error.into())),
                    None => Err(Arc::new(MissingAnswer) as FetchError),
                };
                let namespace = calls[lead.index].namespace();
                let answer = Answer {
                    fetched,
                    fetched_in,
                };
                let result = inner
                    .settle(
                        namespace,
                        lead.key,
                        &lead.flight,
                        guard,
                        answer,
                        lead.previous.as_ref(),
                    )
                    .await;
                settled.push((lead.index, result));
            }
            settled
        };
        let waiting = futures::future::join_all(follows.iter().map(|(i, flight)| async move {
            (
                *i,
                self.wait(flight, calls[*i].namespace().counters()).await,
            )
        }));
        let (settled, waited) = futures::future::join(settling, waiting).await;
        for (i, result) in settled {
            results[i] = Some(result);
        }
        for (i, outcome) in waited {
            match outcome {
                Waited::Done(result) => results[i] = Some(result),
                Waited::Abandoned => again.push(i),
            }
        }
        for (i, first) in copies {
            match results[first].clone() {
                Some(result) => results[i] = Some(result),
                None => again.push(i),
            }
        }
        again
    }

    /// Reads `to_read` with one storage call: hits and stale serves go to
    /// `results`, the rest to `to_claim` with the retired count read
    /// before the read.
    async fn read_many<F, Fut, T, E>(
        &self,
        calls: &[BatchCall<'_, V>],
        to_read: &[(usize, CacheKey)],
        fetch: &F,
        results: &mut [Option<Result<V, CacheError>>],
        to_claim: &mut Vec<ToClaim<V>>,
    ) where
        F: Fn(Vec<usize>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<T, E>>> + Send + 'static,
        T: Into<Fetched<V>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>> + Send + 'static,
    {
        let inner = &self.inner;
        let keys: Vec<CacheKey> = to_read.iter().map(|(_, key)| *key).collect();
        let seen: Vec<u64> = keys
            .iter()
            .map(|key| inner.inflight.retired(*key))
            .collect();
        let found = match inner.storage.get_many(&keys).await {
            Ok(found) => found,
            Err(error) => {
                tracing::debug!(%error, "cache storage read failed; fetching");
                for (i, _) in to_read {
                    calls[*i]
                        .namespace()
                        .counters()
                        .incr(Counter::StorageErrors);
                }
                Vec::new()
            }
        };
        let mut found = found.into_iter();
        let now = Instant::now();
        for (&(i, key), seen) in to_read.iter().zip(seen) {
            let namespace = calls[i].namespace();
            let strategies = !namespace.policy().strategies.is_empty();
            let mut previous = None;
            if let Some(stored) = found.next().flatten() {
                if now < stored.fresh_until {
                    let refresher = || one_of(fetch.clone(), i);
                    self.fresh_hit(namespace, key, &stored, now, strategies, refresher);
                    results[i] = Some(Ok(stored.value));
                    continue;
                }
                if now < stored.stale_until
                    && self
                        .stale_hit(
                            namespace,
                            key,
                            &stored,
                            strategies,
                            one_of(fetch.clone(), i),
                        )
                        .is_ok()
                {
                    results[i] = Some(Ok(stored.value));
                    continue;
                }
                previous = strategies.then_some(stored);
            }
            to_claim.push((i, key, Some(seen), previous));
        }
    }
}

/// `fetch` returned fewer answers than it was asked for.
#[derive(Debug)]
struct MissingAnswer;

impl std::fmt::Display for MissingAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the batch fetch returned no answer for this call")
    }
}

impl StdError for MissingAnswer {}

fn missing_answer() -> CacheError {
    CacheError::Fetch(Arc::new(MissingAnswer))
}
