//! The measured window second by second: responses, errors and latency per second,
//! so that a run shows what its totals hide (a stampede every time a TTL runs out,
//! an outage of a few seconds, a warm-up that never ended).
//!
//! Each worker thread keeps its own [`Timeline`] next to its `Recorder`
//! (`crate::bench::recorder`), bucketed by the second a request *finished* in,
//! counted from the window's start; the threads' timelines are merged at the end like
//! their recorders. Per-second histograms keep 2 significant figures (1 % resolution),
//! enough for a per-second p99 and small enough to keep one per second per thread.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::bench::outcome::Outcome;

/// Largest latency a per-second histogram tracks exactly, in µs (one minute).
const HIGHEST_TRACKED_US: u64 = 60 * 1_000_000;
/// A window longer than this many seconds keeps no timeline past it.
const MAX_SECONDS: usize = 3_600;

/// One thread's (or, merged, the run's) requests per second of the window.
#[derive(Debug, Clone)]
pub struct Timeline {
    origin: Instant,
    seconds: Vec<Bucket>,
}

#[derive(Debug, Clone)]
struct Bucket {
    responses: u64,
    errors: u64,
    latency: Histogram<u64>,
}

impl Bucket {
    fn new() -> Bucket {
        Bucket {
            responses: 0,
            errors: 0,
            latency: Histogram::new_with_bounds(1, HIGHEST_TRACKED_US, 2)
                .expect("constant histogram bounds are valid"),
        }
    }
}

/// One second of the window, as reports carry it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Second {
    /// Seconds since the window's start (this second covers `[second, second + 1)`).
    pub second: u32,
    /// Responses received in it (any status).
    pub requests: u64,
    /// Requests that ended in it without a usable answer (any error class).
    pub errors: u64,
    /// The 99th percentile latency of its responses, in ms (0 without any).
    pub p99_ms: f64,
    /// Requests the subgraphs received in it, when the matrix runner sampled them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_requests: Option<f64>,
}

impl Timeline {
    /// An empty timeline whose second 0 starts at `origin`.
    pub fn new(origin: Instant) -> Timeline {
        Timeline {
            origin,
            seconds: Vec::new(),
        }
    }

    /// Count one request that finished at `finished`.
    pub fn record(&mut self, outcome: Outcome, latency: Duration, finished: Instant) {
        let index = finished.saturating_duration_since(self.origin).as_secs() as usize;
        if index >= MAX_SECONDS {
            return;
        }
        if self.seconds.len() <= index {
            self.seconds.resize_with(index + 1, Bucket::new);
        }
        let bucket = &mut self.seconds[index];
        if outcome != Outcome::Ok {
            bucket.errors += 1;
        }
        if outcome.has_response() {
            bucket.responses += 1;
            let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
            bucket.latency.saturating_record(us.max(1));
        }
    }

    /// Fold another thread's timeline (with the same origin) into this one.
    pub fn merge(&mut self, other: &Timeline) {
        if self.seconds.len() < other.seconds.len() {
            self.seconds.resize_with(other.seconds.len(), Bucket::new);
        }
        for (mine, theirs) in self.seconds.iter_mut().zip(&other.seconds) {
            mine.responses += theirs.responses;
            mine.errors += theirs.errors;
            mine.latency
                .add(&theirs.latency)
                .expect("histograms share bounds");
        }
    }

    /// The first `whole` seconds, as reports carry them (a partial last second would
    /// read as a drop).
    pub fn seconds(&self, whole: usize) -> Vec<Second> {
        (0..whole.min(MAX_SECONDS))
            .map(|i| {
                let bucket = self.seconds.get(i);
                Second {
                    second: i as u32,
                    requests: bucket.map_or(0, |b| b.responses),
                    errors: bucket.map_or(0, |b| b.errors),
                    p99_ms: bucket
                        .filter(|b| !b.latency.is_empty())
                        .map_or(0.0, |b| b.latency.value_at_quantile(0.99) as f64 / 1000.0),
                    upstream_requests: None,
                }
            })
            .collect()
    }
}

/// Peak and mean of a per-second series, and their ratio: how bursty it is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PeakToMean {
    pub peak: f64,
    pub mean: f64,
    /// peak / mean (1 for a flat series); absent when the mean is 0.
    pub ratio: Option<f64>,
}

impl PeakToMean {
    /// Of `values`; `None` when there are none.
    pub fn of(values: impl Iterator<Item = f64>) -> Option<PeakToMean> {
        let values: Vec<f64> = values.collect();
        if values.is_empty() {
            return None;
        }
        let peak = values.iter().copied().fold(f64::MIN, f64::max);
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        Some(PeakToMean {
            peak,
            mean,
            ratio: (mean > 0.0).then(|| peak / mean),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_land_in_the_second_they_finished_in_and_threads_merge() {
        let origin = Instant::now();
        let at = |ms: u64| origin + Duration::from_millis(ms);
        let mut a = Timeline::new(origin);
        let mut b = Timeline::new(origin);
        for i in 0..100 {
            a.record(Outcome::Ok, Duration::from_millis(i % 10 + 1), at(100));
        }
        a.record(Outcome::Ok, Duration::from_millis(500), at(150));
        b.record(Outcome::GraphQl, Duration::from_millis(2), at(2_500));
        b.record(Outcome::Timeout, Duration::from_secs(9), at(2_600));
        a.merge(&b);
        let seconds = a.seconds(4);
        assert_eq!(seconds.len(), 4);
        assert_eq!(
            seconds
                .iter()
                .map(|s| (s.requests, s.errors))
                .collect::<Vec<_>>(),
            [(101, 0), (0, 0), (1, 2), (0, 0)],
            "a timeout is an error without a response"
        );
        assert!((seconds[0].p99_ms - 10.0).abs() < 0.2, "{:?}", seconds[0]);
        assert_eq!(seconds[1].p99_ms, 0.0);
        let spread = PeakToMean::of(seconds.iter().map(|s| s.requests as f64)).unwrap();
        assert_eq!(spread.peak, 101.0);
        assert_eq!(spread.mean, 25.5);
        assert_eq!(spread.ratio, Some(101.0 / 25.5));
        assert!(PeakToMean::of(std::iter::empty()).is_none());
    }
}
