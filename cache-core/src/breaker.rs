//! A circuit breaker without locks: closed, open until a deadline, then half-open with
//! a few probes let through.
//!
//! A caller asks [`Breaker::admit`] before it goes to the network and gets a
//! [`Permit`], or a [`Refused`] saying when to try again. The permit carries the
//! verdict back: [`Permit::succeed`], [`Permit::fail`], or nothing (dropped, as when the
//! caller was cancelled), which frees a probe's slot without judging the backend.
//!
//! - **Closed**: every call goes. The breaker opens after `consecutive_failures`
//!   failures in a row, or (with an [`ErrorRatio`]) when at least `min_calls` calls of
//!   the last window failed in at least `ratio` of cases.
//! - **Open**: every call is refused at once, without touching the network, for
//!   `open_for`.
//! - **Half-open**: then up to `probes` calls go at once; as many successes close the
//!   breaker, one failure opens it again for another `open_for`.
//!
//! This is Envoy's outlier detection (consecutive failures, a success-rate threshold
//! with a minimum volume) and Hystrix's half-open probe, for one backend.
//!
//! Concurrency choices: the state and the open deadline share one `AtomicU64`, so a
//! call in the closed state costs one atomic load to admit, and a success one more load
//! (plus a clock read and a `fetch_add` when the error ratio is watched). Transitions
//! are compare-and-swaps on that word: one caller wins each, and only the winner counts
//! it. The error-ratio window is two fixed buckets (the current and the previous one,
//! weighted by how much of it still overlaps the sliding window), the estimate rate
//! limiters use; a call recorded while the buckets rotate may land in either.
//! Probe permits carry the breaker's generation (its number of trips), so a probe that
//! answers after the breaker moved on cannot close or free a slot of a newer half-open
//! period.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const CLOSED: u64 = 0;
const OPEN: u64 = 1;
const HALF_OPEN: u64 = 2;
const STATE_BITS: u64 = 3;

/// When a breaker opens, and how it closes again.
#[derive(Clone, Debug, PartialEq)]
pub struct BreakerSettings {
    /// Open after this many failures in a row (at least 1).
    pub consecutive_failures: u32,
    /// Also open when the share of failures in a window reaches a ratio.
    pub error_ratio: Option<ErrorRatio>,
    /// How long an open breaker refuses every call before it lets probes through.
    pub open_for: Duration,
    /// Calls let through at once when half-open; as many successes close it (at least 1).
    pub probes: u32,
}

impl Default for BreakerSettings {
    /// 5 failures in a row, no ratio, open for 1 s, one probe.
    fn default() -> Self {
        BreakerSettings {
            consecutive_failures: 5,
            error_ratio: None,
            open_for: Duration::from_secs(1),
            probes: 1,
        }
    }
}

/// Open when at least `min_calls` calls in the last `window` failed in at least `ratio`
/// of cases.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorRatio {
    /// A share from 0 (exclusive) to 1.
    pub ratio: f64,
    pub window: Duration,
    pub min_calls: u32,
}

/// Where a breaker stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `open` or `half_open`.
    pub fn name(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// A call the breaker did not let through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The state that refused it.
    pub state: BreakerState,
    /// How long until the breaker lets a probe through (open), or `None` (half-open:
    /// the probes are out).
    pub retry_in: Option<Duration>,
}

/// A breaker's counters as of one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BreakerStats {
    /// 0 closed, 1 open, 2 half-open.
    pub state: u8,
    /// Transitions to open (trips).
    pub opened: u64,
    /// Transitions to half-open.
    pub half_opened: u64,
    /// Transitions back to closed.
    pub closed: u64,
    /// Calls refused without touching the network.
    pub refused: u64,
}

/// One backend's circuit breaker. `Send + Sync`; share it by reference or `Arc`.
pub struct Breaker {
    settings: BreakerSettings,
    origin: Instant,
    /// The state (low 2 bits) and, when open, the deadline in ms since `origin`.
    word: AtomicU64,
    consecutive: AtomicU32,
    /// Trips so far: the generation probe permits carry.
    generation: AtomicU64,
    probes_out: AtomicU32,
    probe_successes: AtomicU32,
    window: Window,
    half_opened: AtomicU64,
    closed: AtomicU64,
    refused: AtomicU64,
}

/// Leave to go to the backend, and the way to report how it went.
#[must_use = "report the call's outcome with succeed() or fail()"]
pub struct Permit<'a> {
    breaker: &'a Breaker,
    /// The generation of the half-open period this probe belongs to (`None`: not a probe).
    probe: Option<u64>,
    judged: bool,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(settings: BreakerSettings) -> Breaker {
        let settings = BreakerSettings {
            consecutive_failures: settings.consecutive_failures.max(1),
            probes: settings.probes.max(1),
            ..settings
        };
        let width = settings
            .error_ratio
            .map_or(1, |r| (r.window.as_millis() as u64).max(1));
        Breaker {
            settings,
            origin: Instant::now(),
            word: AtomicU64::new(CLOSED),
            consecutive: AtomicU32::new(0),
            generation: AtomicU64::new(0),
            probes_out: AtomicU32::new(0),
            probe_successes: AtomicU32::new(0),
            window: Window::new(width),
            half_opened: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &BreakerSettings {
        &self.settings
    }

    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// Whether a call may go now.
    #[inline]
    pub fn admit(&self) -> Result<Permit<'_>, Refused> {
        let word = self.word.load(Ordering::Acquire);
        if word & STATE_BITS == CLOSED {
            return Ok(Permit {
                breaker: self,
                probe: None,
                judged: false,
            });
        }
        self.admit_slow(word)
    }

    #[cold]
    fn admit_slow(&self, mut word: u64) -> Result<Permit<'_>, Refused> {
        loop {
            match word & STATE_BITS {
                CLOSED => {
                    return Ok(Permit {
                        breaker: self,
                        probe: None,
                        judged: false,
                    })
                }
                OPEN => {
                    let until = word >> 2;
                    let now = self.now_ms();
                    if now < until {
                        self.refused.fetch_add(1, Ordering::Relaxed);
                        return Err(Refused {
                            state: BreakerState::Open,
                            retry_in: Some(Duration::from_millis(until - now)),
                        });
                    }
                    match self.word.compare_exchange(
                        word,
                        HALF_OPEN,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => {
                            self.half_opened.fetch_add(1, Ordering::Relaxed);
                            word = HALF_OPEN;
                        }
                        Err(now_word) => word = now_word,
                    }
                }
                _ => {
                    let generation = self.generation.load(Ordering::Acquire);
                    if self.probes_out.fetch_add(1, Ordering::AcqRel) < self.settings.probes {
                        return Ok(Permit {
                            breaker: self,
                            probe: Some(generation),
                            judged: false,
                        });
                    }
                    self.probes_out.fetch_sub(1, Ordering::AcqRel);
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    return Err(Refused {
                        state: BreakerState::HalfOpen,
                        retry_in: None,
                    });
                }
            }
        }
    }

    /// The state now (an open breaker whose time is up reads as open until a call
    /// moves it to half-open).
    pub fn state(&self) -> BreakerState {
        match self.word.load(Ordering::Acquire) & STATE_BITS {
            CLOSED => BreakerState::Closed,
            OPEN => BreakerState::Open,
            _ => BreakerState::HalfOpen,
        }
    }

    /// The counters now.
    pub fn stats(&self) -> BreakerStats {
        BreakerStats {
            state: (self.word.load(Ordering::Acquire) & STATE_BITS) as u8,
            opened: self.generation.load(Ordering::Relaxed),
            half_opened: self.half_opened.load(Ordering::Relaxed),
            closed: self.closed.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
        }
    }

    /// Open the breaker from `word` (closed or half-open), if nobody moved it since.
    fn trip(&self, word: u64) {
        let until = self
            .now_ms()
            .saturating_add(self.settings.open_for.as_millis() as u64);
        let open = (until.min(u64::MAX >> 2) << 2) | OPEN;
        if self
            .word
            .compare_exchange(word, open, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.probes_out.store(0, Ordering::Release);
            self.probe_successes.store(0, Ordering::Release);
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn success(&self) {
        if self.consecutive.load(Ordering::Relaxed) != 0 {
            self.consecutive.store(0, Ordering::Relaxed);
        }
        if self.settings.error_ratio.is_some() {
            self.window.record(self.now_ms(), false);
        }
    }

    fn failure(&self) {
        let word = self.word.load(Ordering::Acquire);
        let in_a_row = self.consecutive.fetch_add(1, Ordering::AcqRel) + 1;
        let ratio_reached = match self.settings.error_ratio {
            Some(r) => {
                let (calls, failures) = self.window.record(self.now_ms(), true);
                calls >= f64::from(r.min_calls) && failures >= r.ratio * calls
            }
            None => false,
        };
        // A call let through before the breaker opened finds it open: nothing to do.
        if word & STATE_BITS == CLOSED
            && (in_a_row >= self.settings.consecutive_failures || ratio_reached)
        {
            self.trip(word);
        }
    }

    fn probe_success(&self, generation: u64) {
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        let successes = self.probe_successes.fetch_add(1, Ordering::AcqRel) + 1;
        if successes < self.settings.probes {
            return;
        }
        let word = self.word.load(Ordering::Acquire);
        if word & STATE_BITS == HALF_OPEN
            && self
                .word
                .compare_exchange(word, CLOSED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            self.consecutive.store(0, Ordering::Release);
            self.window.reset(self.now_ms());
            self.closed.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn probe_failure(&self, generation: u64) {
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        let word = self.word.load(Ordering::Acquire);
        if word & STATE_BITS == HALF_OPEN {
            self.trip(word);
        }
    }

    fn probe_abandoned(&self, generation: u64) {
        if self.generation.load(Ordering::Acquire) == generation {
            self.probes_out.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Permit<'_> {
    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.probe.is_some()
    }

    /// The backend answered.
    pub fn succeed(mut self) {
        self.judged = true;
        match self.probe {
            None => self.breaker.success(),
            Some(generation) => self.breaker.probe_success(generation),
        }
    }

    /// The backend failed (unreachable, timed out, or a server error).
    pub fn fail(mut self) {
        self.judged = true;
        match self.probe {
            None => self.breaker.failure(),
            Some(generation) => self.breaker.probe_failure(generation),
        }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if let (false, Some(generation)) = (self.judged, self.probe) {
            self.breaker.probe_abandoned(generation);
        }
    }
}

/// Calls and failures in two fixed buckets of `width` ms.
struct Window {
    width: u64,
    /// `now / width` of the current bucket.
    index: AtomicU64,
    calls: AtomicU32,
    failures: AtomicU32,
    previous_calls: AtomicU32,
    previous_failures: AtomicU32,
}

impl Window {
    fn new(width: u64) -> Window {
        Window {
            width,
            index: AtomicU64::new(0),
            calls: AtomicU32::new(0),
            failures: AtomicU32::new(0),
            previous_calls: AtomicU32::new(0),
            previous_failures: AtomicU32::new(0),
        }
    }

    /// Count one call; returns the sliding window's estimate of (calls, failures).
    fn record(&self, now: u64, failed: bool) -> (f64, f64) {
        let index = now / self.width;
        let current = self.index.load(Ordering::Acquire);
        if index != current
            && self
                .index
                .compare_exchange(current, index, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            let (calls, failures) = if index == current + 1 {
                (
                    self.calls.swap(0, Ordering::AcqRel),
                    self.failures.swap(0, Ordering::AcqRel),
                )
            } else {
                self.calls.store(0, Ordering::Release);
                self.failures.store(0, Ordering::Release);
                (0, 0)
            };
            self.previous_calls.store(calls, Ordering::Release);
            self.previous_failures.store(failures, Ordering::Release);
        }
        let calls = self.calls.fetch_add(1, Ordering::AcqRel) + 1;
        let failures = if failed {
            self.failures.fetch_add(1, Ordering::AcqRel) + 1
        } else {
            self.failures.load(Ordering::Acquire)
        };
        // The share of the previous bucket still inside the sliding window.
        let weight = 1.0 - (now % self.width) as f64 / self.width as f64;
        (
            f64::from(calls) + weight * f64::from(self.previous_calls.load(Ordering::Acquire)),
            f64::from(failures)
                + weight * f64::from(self.previous_failures.load(Ordering::Acquire)),
        )
    }

    fn reset(&self, now: u64) {
        self.index.store(now / self.width, Ordering::Release);
        for counter in [
            &self.calls,
            &self.failures,
            &self.previous_calls,
            &self.previous_failures,
        ] {
            counter.store(0, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker(failures: u32, open_for_ms: u64, probes: u32) -> Breaker {
        Breaker::new(BreakerSettings {
            consecutive_failures: failures,
            error_ratio: None,
            open_for: Duration::from_millis(open_for_ms),
            probes,
        })
    }

    #[test]
    fn opens_after_consecutive_failures_and_a_success_resets_the_count() {
        let b = breaker(3, 60_000, 1);
        for _ in 0..2 {
            b.admit().unwrap().fail();
        }
        b.admit().unwrap().succeed();
        for _ in 0..2 {
            b.admit().unwrap().fail();
        }
        assert_eq!(b.state(), BreakerState::Closed);
        b.admit().unwrap().fail();
        assert_eq!(b.state(), BreakerState::Open);
        let refused = b.admit().err().unwrap();
        assert_eq!(refused.state, BreakerState::Open);
        assert!(refused.retry_in.unwrap() > Duration::from_secs(50));
        assert_eq!(
            b.stats(),
            BreakerStats {
                state: 1,
                opened: 1,
                half_opened: 0,
                closed: 0,
                refused: 1
            }
        );
    }

    #[test]
    fn half_open_lets_probes_through_and_their_successes_close_it() {
        let b = breaker(1, 0, 2);
        b.admit().unwrap().fail();
        assert_eq!(b.state(), BreakerState::Open);
        let p1 = b.admit().unwrap();
        let p2 = b.admit().unwrap();
        assert!(p1.is_probe() && p2.is_probe());
        assert_eq!(b.admit().err().unwrap().state, BreakerState::HalfOpen);
        p1.succeed();
        assert_eq!(b.state(), BreakerState::HalfOpen);
        p2.succeed();
        assert_eq!(b.state(), BreakerState::Closed);
        let s = b.stats();
        assert_eq!((s.opened, s.half_opened, s.closed, s.refused), (1, 1, 1, 1));
        assert!(!b.admit().unwrap().is_probe());
    }

    #[test]
    fn a_failed_probe_opens_it_again_and_a_dropped_one_frees_its_slot() {
        let b = breaker(1, 0, 1);
        b.admit().unwrap().fail();
        let probe = b.admit().unwrap();
        assert!(b.admit().is_err(), "one probe at a time");
        drop(probe);
        let probe = b.admit().expect("the slot was freed");
        probe.fail();
        assert_eq!(b.stats().opened, 2);
        // A probe of an older half-open period cannot close a newer one.
        let b = breaker(1, 0, 1);
        b.admit().unwrap().fail();
        let old = b.admit().unwrap();
        b.trip(b.word.load(Ordering::Acquire)); // opened again meanwhile
        let newer = b.admit().unwrap();
        old.succeed();
        assert_eq!(b.state(), BreakerState::HalfOpen);
        newer.succeed();
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn the_error_ratio_opens_it_only_past_the_minimum_volume() {
        let b = Breaker::new(BreakerSettings {
            consecutive_failures: 1000,
            error_ratio: Some(ErrorRatio {
                ratio: 0.5,
                window: Duration::from_secs(60),
                min_calls: 20,
            }),
            open_for: Duration::from_secs(60),
            probes: 1,
        });
        // Alternating: 50% failures, but fewer than 20 calls until the 20th.
        for i in 0..19 {
            let p = b.admit().unwrap();
            if i % 2 == 0 {
                p.fail()
            } else {
                p.succeed()
            }
        }
        assert_eq!(b.state(), BreakerState::Closed, "below the minimum volume");
        // 10 failures of 20 calls: 50%.
        b.admit().unwrap().fail();
        assert_eq!(b.state(), BreakerState::Open);
    }

    #[test]
    fn a_low_error_ratio_keeps_it_closed() {
        let b = Breaker::new(BreakerSettings {
            consecutive_failures: 1000,
            error_ratio: Some(ErrorRatio {
                ratio: 0.5,
                window: Duration::from_secs(60),
                min_calls: 10,
            }),
            open_for: Duration::from_secs(60),
            probes: 1,
        });
        for i in 0..1000 {
            let p = b.admit().unwrap();
            if i % 3 == 0 {
                p.fail()
            } else {
                p.succeed()
            }
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn the_window_weighs_the_previous_bucket_by_its_overlap() {
        let w = Window::new(1000);
        for _ in 0..10 {
            w.record(500, true);
        }
        // Half-way through the next bucket: half of the 10 failures still count.
        let (calls, failures) = w.record(1500, false);
        assert!((calls - 6.0).abs() < 1e-9 && (failures - 5.0).abs() < 1e-9);
        // Two buckets later nothing of them is left.
        let (calls, failures) = w.record(3200, false);
        assert!((calls - 1.0).abs() < 1e-9 && failures == 0.0);
    }

    #[test]
    fn concurrent_callers_trip_it_once() {
        let b = std::sync::Arc::new(breaker(10, 60_000, 1));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        if let Ok(p) = b.admit() {
                            p.fail();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = b.stats();
        assert_eq!(s.opened, 1);
        assert_eq!(s.state, 1);
    }
}
