//! The dedupe table: which key has a fetch in flight, who leads it, who
//! waits on it, and what happens when the leader goes away.
//!
//! Concurrency choices:
//! - The table is 16 shards, each a `parking_lot::Mutex` around a `HashMap`
//!   keyed by [`CacheKey`] (already a hash: no re-hashing). A lock is held
//!   only to look up, insert or remove; never across an `.await`.
//! - A [`Flight`] is published once through a `OnceLock` and a tokio
//!   `Notify`; a follower enables its notification before it checks the
//!   outcome, so a publication between the two is never missed.
//! - **One wake per thread.** A flight's followers are grouped by the thread
//!   they wait on. The first of each thread (its *relay*) waits on the
//!   flight; the others wait on their thread's own `Notify`, which the relay
//!   signals once it is woken. A leader on one thread thus wakes each other
//!   thread once, not once per follower: on a current-thread runtime each
//!   wake from another thread costs a system call (the runtime's eventfd)
//!   and a context switch, which the gateway's shards would otherwise pay
//!   per follower. A relay that goes away before the outcome (cancelled)
//!   wakes its thread's followers, and one of them relays in its place.
//! - With no follower, a flight costs one allocation, one insert and one
//!   remove: the leader never clones its value for a flight nobody joined.
//! - A leader that is dropped mid-fetch (cancelled, or its task aborted)
//!   drops its [`LeaderGuard`], which removes the flight and publishes
//!   `Abandoned`. Followers then retry from the top: the first to get
//!   there becomes the new leader and runs its own fetch closure, the
//!   others join it. (Detached mode instead runs the fetch in its own task,
//!   so it outlives its first caller; see the `cache` module.)
//! - Each flight records the invalidation epoch it started in. A caller
//!   only joins a flight of the current epoch: a fetch that started before
//!   an invalidation may return pre-invalidation data, so later callers
//!   start their own (and replace the old flight in the table).
//! - The table keeps a log of the latest invalidations, each with the epoch
//!   it started. Before storing, a leader checks every invalidation logged
//!   after its own epoch against its value's references (the race check).
//!   The log, not the table, is what holds them: a flight replaced in the
//!   table by a newer one for the same key still runs, and must still hear
//!   of the invalidations that come after it started. A flight older than the
//!   log's memory may not store at all.
//! - Each shard counts the stored flights it has retired. A caller reads
//!   that count before its storage lookup; if it changed by the time the
//!   caller would lead a new flight, a flight for some key of the shard
//!   stored its value in between, and the caller looks again instead of
//!   fetching a value that may already be there.

use std::collections::{HashMap, VecDeque};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::error::FetchError;
use crate::key::{CacheKey, PrehashedKeys};
use crate::references::{Invalidation, Reference};

const SHARDS: usize = 16;

/// How a flight ended.
pub(crate) enum Outcome<V> {
    /// The fetch returned.
    Done(Result<V, FetchError>),
    /// The leader went away before the fetch returned.
    Abandoned,
}

/// One fetch in flight for one key.
pub(crate) struct Flight<V> {
    outcome: OnceLock<Outcome<V>>,
    /// Woken by the publication: the relays (and leaders' own waits).
    notify: Notify,
    /// The followers of each thread that has some.
    threads: Mutex<Vec<Arc<ThreadWaiters>>>,
    /// Callers waiting on the outcome: followers count themselves under the
    /// shard lock; a detached leader counts itself before it spawns the
    /// fetch. Either way, before the flight is retired.
    waiters: AtomicUsize,
    /// The invalidation epoch when the flight started.
    epoch: u64,
}

/// The followers of one flight on one thread.
struct ThreadWaiters {
    thread: std::thread::ThreadId,
    /// Woken by the thread's relay once the flight is published (or the relay
    /// went away).
    notify: Notify,
    /// Whether one of them relays: waits on the flight for the others.
    relayed: AtomicBool,
}

/// Held by a relay while it waits on the flight: dropped (woken, or cancelled),
/// it wakes its thread's followers.
struct Relay<'a>(&'a ThreadWaiters);

impl Drop for Relay<'_> {
    fn drop(&mut self) {
        self.0.relayed.store(false, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }
}

impl<V: Clone> Flight<V> {
    fn new(epoch: u64) -> Self {
        Self {
            outcome: OnceLock::new(),
            notify: Notify::new(),
            threads: Mutex::new(Vec::new()),
            waiters: AtomicUsize::new(0),
            epoch,
        }
    }

    /// Publishes the outcome (first call wins) and wakes every waiter.
    pub(crate) fn publish(&self, outcome: Outcome<V>) {
        let _ = self.outcome.set(outcome);
        self.notify.notify_waiters();
    }

    /// Waits for the outcome: as its thread's relay, or woken by the relay.
    pub(crate) async fn wait(&self) -> &Outcome<V> {
        if let Some(outcome) = self.outcome.get() {
            return outcome;
        }
        let here = self.thread_waiters();
        loop {
            {
                let mut notified = pin!(here.notify.notified());
                notified.as_mut().enable();
                if let Some(outcome) = self.outcome.get() {
                    return outcome;
                }
                let relays = here
                    .relayed
                    .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok();
                if !relays {
                    // Woken when the relay is: published, or the relay went away.
                    notified.await;
                    continue;
                }
            }
            let _relay = Relay(&here);
            return self.wait_published().await;
        }
    }

    /// The followers of the calling thread, joined or begun.
    fn thread_waiters(&self) -> Arc<ThreadWaiters> {
        let thread = std::thread::current().id();
        let mut threads = self.threads.lock();
        if let Some(here) = threads.iter().find(|t| t.thread == thread) {
            return Arc::clone(here);
        }
        let here = Arc::new(ThreadWaiters {
            thread,
            notify: Notify::new(),
            relayed: AtomicBool::new(false),
        });
        threads.push(Arc::clone(&here));
        here
    }

    /// Waits on the flight itself.
    async fn wait_published(&self) -> &Outcome<V> {
        loop {
            let mut notified = pin!(self.notify.notified());
            notified.as_mut().enable();
            if let Some(outcome) = self.outcome.get() {
                return outcome;
            }
            notified.await;
        }
    }

    /// Counts one more caller that will wait on this flight.
    pub(crate) fn add_waiter(&self) {
        self.waiters.fetch_add(1, Ordering::Relaxed);
    }

    fn has_waiters(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) > 0
    }
}

struct Shard<V> {
    flights: Mutex<HashMap<CacheKey, Arc<Flight<V>>, PrehashedKeys>>,
    /// Flights that stored a value and left the table.
    retired: AtomicU64,
}

/// What a caller is to do for a key.
pub(crate) enum Claim<V> {
    /// Run the fetch: the caller leads this new flight.
    Lead(Arc<Flight<V>>),
    /// Wait on this flight (already counted as a waiter).
    Follow(Arc<Flight<V>>),
    /// A flight stored a value since the caller looked: look again.
    LookAgain,
}

/// How many invalidations the log remembers. A flight that started before the
/// oldest of them may not store (it may have missed one).
const LOG_LEN: usize = 4096;

/// The latest invalidations, each with the epoch it started.
#[derive(Default)]
struct InvalidationLog {
    entries: VecDeque<(u64, Arc<Invalidation>)>,
    /// The newest epoch dropped from `entries` (0: none).
    forgotten_through: u64,
}

/// The dedupe table.
pub(crate) struct InFlight<V> {
    shards: Box<[Shard<V>]>,
    /// Bumped by every invalidation; read under a shard lock when a flight
    /// starts or is joined.
    epoch: AtomicU64,
    log: Mutex<InvalidationLog>,
}

impl<V: Clone> InFlight<V> {
    pub(crate) fn new() -> Self {
        let shards = (0..SHARDS)
            .map(|_| Shard {
                flights: Mutex::new(HashMap::with_hasher(PrehashedKeys)),
                retired: AtomicU64::new(0),
            })
            .collect();
        Self {
            shards,
            epoch: AtomicU64::new(0),
            log: Mutex::new(InvalidationLog::default()),
        }
    }

    #[inline]
    fn shard(&self, key: CacheKey) -> &Shard<V> {
        // The top bits pick the shard; the map hashes the folded halves.
        &self.shards[(key.as_u128() >> 124) as usize % SHARDS]
    }

    /// The shard's retired count, read before a storage lookup.
    #[inline]
    pub(crate) fn retired(&self, key: CacheKey) -> u64 {
        self.shard(key).retired.load(Ordering::Acquire)
    }

    /// Joins the current flight for `key` or starts one.
    ///
    /// `seen` is the retired count read before the storage lookup, or `None`
    /// if the caller did not look (nothing is ever stored).
    pub(crate) fn claim(&self, key: CacheKey, seen: Option<u64>) -> Claim<V> {
        let shard = self.shard(key);
        let mut flights = shard.flights.lock();
        let epoch = self.epoch.load(Ordering::Acquire);
        if let Some(flight) = flights.get(&key) {
            if flight.epoch == epoch {
                flight.add_waiter();
                return Claim::Follow(Arc::clone(flight));
            }
        }
        if let Some(seen) = seen {
            if shard.retired.load(Ordering::Acquire) != seen {
                return Claim::LookAgain;
            }
        }
        let flight = Arc::new(Flight::new(epoch));
        flights.insert(key, Arc::clone(&flight));
        Claim::Lead(flight)
    }

    /// Starts a background refresh flight for `key`, unless a flight (of any
    /// epoch) is already there.
    pub(crate) fn claim_refresh(&self, key: CacheKey) -> Option<Arc<Flight<V>>> {
        let mut flights = self.shard(key).flights.lock();
        if flights.contains_key(&key) {
            return None;
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        let flight = Arc::new(Flight::new(epoch));
        flights.insert(key, Arc::clone(&flight));
        Some(flight)
    }

    /// Removes `flight` from the table if it is still the one for `key`.
    fn retire(&self, key: CacheKey, flight: &Arc<Flight<V>>, stored: bool) {
        let shard = self.shard(key);
        let mut flights = shard.flights.lock();
        if flights
            .get(&key)
            .is_some_and(|current| Arc::ptr_eq(current, flight))
        {
            flights.remove(&key);
        }
        if stored {
            shard.retired.fetch_add(1, Ordering::Release);
        }
    }

    /// Starts a new epoch, logged with `invalidation`: flights that started
    /// before it are no longer joined, and may not store what it forbids.
    pub(crate) fn invalidate(&self, invalidation: Invalidation) {
        let mut log = self.log.lock();
        let epoch = self.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        log.entries.push_back((epoch, Arc::new(invalidation)));
        if log.entries.len() > LOG_LEN {
            if let Some((dropped, _)) = log.entries.pop_front() {
                log.forgotten_through = dropped;
            }
        }
    }

    /// Whether an invalidation that started after `flight` forbids it to store
    /// a value for `key` carrying `references`.
    pub(crate) fn forbids_store(
        &self,
        flight: &Flight<V>,
        key: CacheKey,
        references: &[Reference],
    ) -> bool {
        let log = self.log.lock();
        if flight.epoch < log.forgotten_through {
            return true;
        }
        log.entries
            .iter()
            .rev()
            .take_while(|(epoch, _)| *epoch > flight.epoch)
            .any(|(_, invalidation)| invalidation.forbids(key, references))
    }
}

/// Owned by whoever runs a flight's fetch. Finishing it publishes the
/// outcome; dropping it unfinished publishes `Abandoned`.
pub(crate) struct LeaderGuard<'a, V: Clone> {
    table: &'a InFlight<V>,
    key: CacheKey,
    flight: &'a Arc<Flight<V>>,
    finished: bool,
    /// The value was handed to the waiters before the flight retired.
    published: bool,
}

impl<'a, V: Clone> LeaderGuard<'a, V> {
    pub(crate) fn new(table: &'a InFlight<V>, key: CacheKey, flight: &'a Arc<Flight<V>>) -> Self {
        Self {
            table,
            key,
            flight,
            finished: false,
            published: false,
        }
    }

    /// Hands `value` to the waiters now, while the flight stays in the table
    /// (callers that join it from here on get the value at once). For a
    /// leader with work left before it retires (strategies' `admit`, the
    /// store), so that its followers do not wait on that work.
    pub(crate) fn publish(&mut self, value: &V) {
        self.flight.publish(Outcome::Done(Ok(value.clone())));
        self.published = true;
    }

    /// Retires the flight and hands `result` to its waiters (unless it was
    /// published before). The value is cloned only if someone is waiting.
    pub(crate) fn finish(mut self, result: Result<&V, &FetchError>, stored: bool) {
        self.finished = true;
        // After `retire` nobody can join, so `has_waiters` is final.
        self.table.retire(self.key, self.flight, stored);
        if !self.published && self.flight.has_waiters() {
            let owned = match result {
                Ok(value) => Ok(value.clone()),
                Err(error) => Err(Arc::clone(error)),
            };
            self.flight.publish(Outcome::Done(owned));
        }
    }
}

impl<V: Clone> Drop for LeaderGuard<'_, V> {
    fn drop(&mut self) {
        if !self.finished {
            self.table.retire(self.key, self.flight, false);
            self.flight.publish(Outcome::Abandoned);
        }
    }
}
