//! What one worker thread records, and how the threads' records are merged.
//!
//! Latencies go into HDR histograms in microseconds with 3 significant figures (0.1 %
//! resolution at every magnitude). Each thread owns one [`Recorder`], touched only by
//! its own connections, so recording takes no lock; the main thread merges them when
//! the run is over.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::bench::outcome::Outcome;
use crate::bench::timeline::Timeline;

/// Significant figures kept by every latency histogram.
pub const SIGNIFICANT_FIGURES: u8 = 3;
/// Largest latency a histogram tracks exactly, in µs (one hour); larger values saturate.
const HIGHEST_TRACKED_US: u64 = 3_600 * 1_000_000;
/// Most distinct error places a run tallies; the rest go under `(other)`.
const MAX_ERROR_PLACES: usize = 64;

/// A latency histogram in µs with the lab's bounds.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_TRACKED_US, SIGNIFICANT_FIGURES)
        .expect("constant histogram bounds are valid")
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Requests that ended without a usable answer, by class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts {
    /// Connect failures, resets, connections closed before the response was complete.
    pub transport: u64,
    /// No complete response within `--timeout`.
    pub timeouts: u64,
    /// Responses whose status is outside 2xx.
    pub non_2xx: u64,
    /// Of those, `503`s: requests the server shed.
    #[serde(default)]
    pub shed: u64,
    /// 2xx responses whose body carries GraphQL `errors`.
    pub graphql: u64,
}

impl ErrorCounts {
    pub fn total(&self) -> u64 {
        self.transport + self.timeouts + self.non_2xx + self.graphql
    }

    fn add(&mut self, other: &ErrorCounts) {
        self.transport += other.transport;
        self.timeouts += other.timeouts;
        self.non_2xx += other.non_2xx;
        self.shed += other.shed;
        self.graphql += other.graphql;
    }
}

/// Open-loop bookkeeping: the schedule and how well it was kept.
#[derive(Debug, Clone)]
pub struct ScheduleRecord {
    /// Requests whose intended send time fell in the measured window.
    pub scheduled: u64,
    /// Requests actually sent inside the measured window.
    pub sent_in_window: u64,
    /// Latency measured from the actual send (what a closed-loop tool would report).
    pub uncorrected: Histogram<u64>,
    /// How late each send was against its intended time.
    pub send_lag: Histogram<u64>,
}

impl ScheduleRecord {
    pub fn new() -> ScheduleRecord {
        ScheduleRecord {
            scheduled: 0,
            sent_in_window: 0,
            uncorrected: latency_histogram(),
            send_lag: latency_histogram(),
        }
    }
}

impl Default for ScheduleRecord {
    fn default() -> Self {
        ScheduleRecord::new()
    }
}

/// Everything one thread measured in the window.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Response latency in µs. Closed loop: from the send. Open loop: from the intended
    /// send time (corrected for coordinated omission).
    pub latency: Histogram<u64>,
    /// Responses received (any status).
    pub responses: u64,
    /// Of those, 2xx without GraphQL errors: the goodput.
    pub ok: u64,
    /// Latency of those alone (as `latency`): what the requests a server admitted and
    /// served met, without its fast refusals.
    pub ok_latency: Histogram<u64>,
    /// For 2xx answers with GraphQL errors: how many carried an error at each place
    /// ([`crate::bench::outcome::error_paths`]).
    pub error_paths: BTreeMap<String, u64>,
    /// For each of those places, the message of the first error seen there.
    pub error_examples: BTreeMap<String, String>,
    /// Response body bytes received.
    pub body_bytes: u64,
    pub errors: ErrorCounts,
    /// When the last recorded request finished.
    pub last_completion: Option<Instant>,
    /// Present in open-loop runs only.
    pub schedule: Option<ScheduleRecord>,
    /// The window second by second, when the run keeps one ([`Recorder::timed_from`]).
    pub timeline: Option<Timeline>,
}

impl Recorder {
    pub fn new(open_loop: bool) -> Recorder {
        Recorder {
            latency: latency_histogram(),
            responses: 0,
            ok: 0,
            ok_latency: latency_histogram(),
            error_paths: BTreeMap::new(),
            error_examples: BTreeMap::new(),
            body_bytes: 0,
            errors: ErrorCounts::default(),
            last_completion: None,
            schedule: open_loop.then(ScheduleRecord::new),
            timeline: None,
        }
    }

    /// The same recorder, keeping a per-second timeline from `window_start`.
    pub fn timed_from(mut self, window_start: Instant) -> Recorder {
        self.timeline = Some(Timeline::new(window_start));
        self
    }

    /// Record one finished request. `latency` is what goes into the main histogram.
    pub fn record(
        &mut self,
        outcome: Outcome,
        latency: Duration,
        body_bytes: usize,
        finished: Instant,
    ) {
        match outcome {
            Outcome::Ok => {
                self.ok += 1;
                self.ok_latency.saturating_record(micros(latency));
            }
            Outcome::Non2xx => self.errors.non_2xx += 1,
            Outcome::Shed => {
                self.errors.non_2xx += 1;
                self.errors.shed += 1;
            }
            Outcome::GraphQl => self.errors.graphql += 1,
            Outcome::Transport => self.errors.transport += 1,
            Outcome::Timeout => self.errors.timeouts += 1,
        }
        if outcome.has_response() {
            self.responses += 1;
            self.body_bytes += body_bytes as u64;
            self.latency.saturating_record(micros(latency));
        }
        if let Some(timeline) = &mut self.timeline {
            timeline.record(outcome, latency, finished);
        }
        if self.last_completion.is_none_or(|t| finished > t) {
            self.last_completion = Some(finished);
        }
    }

    /// Tally where a 2xx answer with GraphQL errors (`body`) has them.
    pub fn record_error_paths(&mut self, body: &[u8]) {
        for (place, message) in crate::bench::outcome::error_places(body) {
            self.count_error_place(place, 1, &message);
        }
    }

    fn count_error_place(&mut self, place: String, n: u64, message: &str) {
        let key =
            if self.error_paths.len() < MAX_ERROR_PLACES || self.error_paths.contains_key(&place) {
                place
            } else {
                "(other)".to_string()
            };
        if !self.error_examples.contains_key(&key) {
            self.error_examples.insert(key.clone(), message.to_string());
        }
        *self.error_paths.entry(key).or_default() += n;
    }

    /// Open loop: record the uncorrected latency and the send lag of one response.
    pub fn record_schedule(&mut self, uncorrected: Duration, lag: Duration) {
        if let Some(s) = &mut self.schedule {
            s.uncorrected.saturating_record(micros(uncorrected));
            s.send_lag.saturating_record(micros(lag));
        }
    }

    /// Fold another thread's record into this one.
    pub fn merge(&mut self, other: &Recorder) {
        self.latency
            .add(&other.latency)
            .expect("histograms share bounds");
        self.responses += other.responses;
        self.ok += other.ok;
        self.ok_latency
            .add(&other.ok_latency)
            .expect("histograms share bounds");
        for (place, n) in &other.error_paths {
            let message = other.error_examples.get(place).map_or("", String::as_str);
            self.count_error_place(place.clone(), *n, message);
        }
        self.body_bytes += other.body_bytes;
        self.errors.add(&other.errors);
        self.last_completion = match (self.last_completion, other.last_completion) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        match (&mut self.timeline, &other.timeline) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (None, Some(theirs)) => self.timeline = Some(theirs.clone()),
            _ => {}
        }
        if let (Some(mine), Some(theirs)) = (&mut self.schedule, &other.schedule) {
            mine.scheduled += theirs.scheduled;
            mine.sent_in_window += theirs.sent_in_window;
            mine.uncorrected
                .add(&theirs.uncorrected)
                .expect("histograms share bounds");
            mine.send_lag
                .add(&theirs.send_lag)
                .expect("histograms share bounds");
        }
    }
}

/// Latency percentiles in milliseconds, as reports print them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub mean: f64,
    pub stdev: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
}

impl LatencySummary {
    /// Summarise a µs histogram; an empty one gives all zeros.
    pub fn from_histogram(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        LatencySummary {
            mean: h.mean() / 1000.0,
            stdev: h.stdev() / 1000.0,
            min: ms(h.min()),
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p99_9: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_counts_and_histograms() {
        let now = Instant::now();
        let mut a = Recorder::new(false);
        let mut b = Recorder::new(false);
        for ms in 1..=50u64 {
            a.record(Outcome::Ok, Duration::from_millis(ms), 10, now);
        }
        for ms in 51..=100u64 {
            b.record(
                Outcome::Ok,
                Duration::from_millis(ms),
                10,
                now + Duration::from_millis(5),
            );
        }
        b.record(Outcome::GraphQl, Duration::from_millis(1), 3, now);
        b.record(Outcome::Timeout, Duration::from_secs(9), 0, now);
        a.merge(&b);
        assert_eq!(a.responses, 101);
        assert_eq!(a.body_bytes, 1003);
        assert_eq!(
            a.errors,
            ErrorCounts {
                transport: 0,
                timeouts: 1,
                non_2xx: 0,
                shed: 0,
                graphql: 1
            }
        );
        assert_eq!(a.last_completion, Some(now + Duration::from_millis(5)));
        let s = LatencySummary::from_histogram(&a.latency);
        // The timeout is not a latency sample: max stays at 100 ms.
        assert!((s.max - 100.0).abs() < 0.1, "{s:?}");
        assert!((s.p50 - 50.0).abs() < 1.0, "{s:?}");
    }

    #[test]
    fn empty_histogram_summarises_to_zero() {
        assert_eq!(
            LatencySummary::from_histogram(&latency_histogram()),
            LatencySummary::default()
        );
    }
}
