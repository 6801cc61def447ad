//! What a workload run records beside latency: per operation its requests, errors and
//! latency, and the freshness of every checked read (fresh, stale with its age, wrong).
//!
//! Like [`crate::bench::recorder::Recorder`], each worker thread keeps its own records,
//! touched only by that thread's connections and merged at the end: one
//! [`FreshnessRecorder`] per target URL ([`FreshnessByUrl`]; connection i goes to URL
//! i % n), so that a stale read is charged to the gateway that answered it. The URLs'
//! records merged are the run's, which becomes a [`WorkloadReport`] (the JSON object
//! reports and summaries carry), with each URL's figures in its `per_url`. The oracle
//! stays one for the run: one truth, whichever gateway answers.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::spec::Workload;
use crate::bench::outcome::Outcome;
use crate::bench::recorder::{latency_histogram, LatencySummary};

/// Wrong answers quoted in reports (all are counted).
pub const WRONG_EXAMPLES: usize = 5;

/// One operation's figures in the window.
#[derive(Debug, Clone)]
pub struct OperationRecord {
    pub requests: u64,
    pub errors: u64,
    /// Stale entity reads in this operation's answers.
    pub stale_reads: u64,
    pub latency: Histogram<u64>,
}

/// Everything one thread saw of the workload.
#[derive(Debug, Clone)]
pub struct FreshnessRecorder {
    pub operations: Vec<OperationRecord>,
    /// Entity reads checked in the window.
    pub reads_checked: u64,
    pub stale_reads: u64,
    /// Age of each stale read, µs (from the newest acknowledged write it misses).
    pub stale_age: Histogram<u64>,
    /// How long each stale answer had been out of date, µs (from the first write it misses).
    pub out_of_date: Histogram<u64>,
    /// Wrong answers, warm-up included.
    pub wrong_answers: u64,
    pub wrong_examples: Vec<String>,
    /// Writes answered without errors (acknowledged), and writes that failed, warm-up included.
    pub writes_acked: u64,
    pub writes_failed: u64,
}

impl FreshnessRecorder {
    pub fn new(workload: &Workload) -> FreshnessRecorder {
        FreshnessRecorder {
            operations: workload
                .operations
                .iter()
                .map(|_| OperationRecord {
                    requests: 0,
                    errors: 0,
                    stale_reads: 0,
                    latency: latency_histogram(),
                })
                .collect(),
            reads_checked: 0,
            stale_reads: 0,
            stale_age: latency_histogram(),
            out_of_date: latency_histogram(),
            wrong_answers: 0,
            wrong_examples: Vec::new(),
            writes_acked: 0,
            writes_failed: 0,
        }
    }

    /// One finished request of operation `op` in the window.
    pub fn request(&mut self, op: usize, outcome: Outcome, latency: Duration) {
        let r = &mut self.operations[op];
        if outcome.has_response() {
            r.requests += 1;
            r.latency
                .saturating_record(u64::try_from(latency.as_micros()).unwrap_or(u64::MAX));
        }
        if outcome != Outcome::Ok {
            r.errors += 1;
        }
    }

    pub fn fresh(&mut self, in_window: bool) {
        if in_window {
            self.reads_checked += 1;
        }
    }

    pub fn stale(&mut self, op: usize, in_window: bool, age_ns: u64, out_of_date_ns: u64) {
        if in_window {
            self.reads_checked += 1;
            self.stale_reads += 1;
            self.operations[op].stale_reads += 1;
            self.stale_age.saturating_record((age_ns / 1000).max(1));
            self.out_of_date
                .saturating_record((out_of_date_ns / 1000).max(1));
        }
    }

    pub fn wrong(&mut self, op: &str, what: String) {
        self.wrong_answers += 1;
        if self.wrong_examples.len() < WRONG_EXAMPLES {
            self.wrong_examples.push(format!("{op}: {what}"));
        }
    }

    pub fn merge(&mut self, other: &FreshnessRecorder) {
        for (mine, theirs) in self.operations.iter_mut().zip(&other.operations) {
            mine.requests += theirs.requests;
            mine.errors += theirs.errors;
            mine.stale_reads += theirs.stale_reads;
            mine.latency
                .add(&theirs.latency)
                .expect("histograms share bounds");
        }
        self.reads_checked += other.reads_checked;
        self.stale_reads += other.stale_reads;
        self.stale_age
            .add(&other.stale_age)
            .expect("histograms share bounds");
        self.out_of_date
            .add(&other.out_of_date)
            .expect("histograms share bounds");
        self.wrong_answers += other.wrong_answers;
        for e in &other.wrong_examples {
            if self.wrong_examples.len() < WRONG_EXAMPLES {
                self.wrong_examples.push(e.clone());
            }
        }
        self.writes_acked += other.writes_acked;
        self.writes_failed += other.writes_failed;
    }

    /// stale reads / reads checked; `None` before any read was checked.
    pub fn stale_fraction(&self) -> Option<f64> {
        (self.reads_checked > 0).then(|| self.stale_reads as f64 / self.reads_checked as f64)
    }

    /// Responses in the window, all operations.
    pub fn requests(&self) -> u64 {
        self.operations.iter().map(|o| o.requests).sum()
    }

    /// The report of the merged record; `seconds` is the measured window. `per_url` is
    /// left empty ([`FreshnessByUrl::report`] fills it).
    pub fn report(&self, workload: &Workload, seconds: f64) -> WorkloadReport {
        let total = self.requests();
        WorkloadReport {
            seed: workload.seed,
            reads_checked: self.reads_checked,
            stale_reads: self.stale_reads,
            stale_fraction: self.stale_fraction(),
            stale_age_ms: LatencySummary::from_histogram(&self.stale_age),
            out_of_date_ms: LatencySummary::from_histogram(&self.out_of_date),
            wrong_answers: self.wrong_answers,
            wrong_answer_examples: self.wrong_examples.clone(),
            writes_acked: self.writes_acked,
            writes_failed: self.writes_failed,
            write_rate: workload.write_rate,
            per_url: Vec::new(),
            operations: workload
                .operations
                .iter()
                .zip(&self.operations)
                .map(|(o, r)| {
                    let latency = LatencySummary::from_histogram(&r.latency);
                    OperationReport {
                        name: o.name.clone(),
                        write: o.is_write(),
                        requests: r.requests,
                        share: (total > 0).then(|| r.requests as f64 / total as f64),
                        requests_per_sec: if seconds > 0.0 {
                            r.requests as f64 / seconds
                        } else {
                            0.0
                        },
                        errors: r.errors,
                        stale_reads: r.stale_reads,
                        p50_ms: latency.p50,
                        p99_ms: latency.p99,
                    }
                })
                .collect(),
        }
    }
}

/// One [`FreshnessRecorder`] per target URL, in `--url` order.
#[derive(Debug, Clone)]
pub struct FreshnessByUrl {
    pub urls: Vec<FreshnessRecorder>,
}

impl FreshnessByUrl {
    /// Empty records for `urls` URLs (at least one).
    pub fn new(workload: &Workload, urls: usize) -> FreshnessByUrl {
        FreshnessByUrl {
            urls: (0..urls.max(1))
                .map(|_| FreshnessRecorder::new(workload))
                .collect(),
        }
    }

    /// Add another thread's records, URL by URL.
    pub fn merge(&mut self, other: &FreshnessByUrl) {
        for (mine, theirs) in self.urls.iter_mut().zip(&other.urls) {
            mine.merge(theirs);
        }
    }

    /// The whole run's record: every URL's merged.
    pub fn total(&self) -> FreshnessRecorder {
        let mut all = self.urls[0].clone();
        for other in &self.urls[1..] {
            all.merge(other);
        }
        all
    }

    /// The run's report with each URL's own report in `per_url` (`urls` names them).
    pub fn report(&self, workload: &Workload, seconds: f64, urls: &[String]) -> WorkloadReport {
        let mut report = self.total().report(workload, seconds);
        report.per_url = self
            .urls
            .iter()
            .enumerate()
            .map(|(i, r)| UrlReport {
                url: urls.get(i).cloned().unwrap_or_default(),
                report: r.report(workload, seconds),
            })
            .collect();
        report
    }
}

/// What the answers one URL gave looked like (`workload.per_url[i]`): its URL and the
/// same figures as the run's, of those answers alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UrlReport {
    pub url: String,
    #[serde(flatten)]
    pub report: WorkloadReport,
}

/// A workload's figures over the measured window (`workload` in the bench's JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadReport {
    pub seed: u64,
    /// Entity reads whose freshness was checked (one per entity in each answer).
    pub reads_checked: u64,
    pub stale_reads: u64,
    /// stale_reads / reads_checked.
    pub stale_fraction: Option<f64>,
    /// Of the stale reads: read start − acknowledgement of the newest write it missed.
    pub stale_age_ms: LatencySummary,
    /// Of the stale reads: read start − acknowledgement of the first write it missed.
    pub out_of_date_ms: LatencySummary,
    /// Answers that cannot be right (another user's `me`, another entity's data); warm-up
    /// included. Must be 0.
    pub wrong_answers: u64,
    pub wrong_answer_examples: Vec<String>,
    /// Writes acknowledged and failed, warm-up included.
    pub writes_acked: u64,
    pub writes_failed: u64,
    /// Open-loop writes per second, when writes had their own connections.
    pub write_rate: Option<f64>,
    pub operations: Vec<OperationReport>,
    /// The same figures per target URL, in `--url` order (connection i went to URL i % n).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_url: Vec<UrlReport>,
}

impl WorkloadReport {
    /// Responses in the window, all operations.
    pub fn requests(&self) -> u64 {
        self.operations.iter().map(|o| o.requests).sum()
    }
}

/// One operation of the mix in the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperationReport {
    pub name: String,
    pub write: bool,
    /// Responses in the window.
    pub requests: u64,
    /// Its share of all the workload's responses.
    pub share: Option<f64>,
    pub requests_per_sec: f64,
    /// Requests that were not `Ok` (any error class).
    pub errors: u64,
    /// Stale entity reads in its answers.
    #[serde(default)]
    pub stale_reads: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::check::tests::WORKLOAD;

    #[test]
    fn per_url_records_merge_by_url_and_sum_to_the_run() {
        let w = Workload::from_toml(WORKLOAD).unwrap().unwrap();
        let ms = |n: u64| Duration::from_millis(n);
        // Two threads, each with connections on both URLs.
        let mut a = FreshnessByUrl::new(&w, 2);
        let mut b = FreshnessByUrl::new(&w, 2);
        for _ in 0..3 {
            a.urls[0].request(0, Outcome::Ok, ms(1));
            a.urls[0].fresh(true);
        }
        a.urls[1].request(0, Outcome::Ok, ms(2));
        a.urls[1].stale(0, true, 40_000_000, 50_000_000);
        b.urls[1].request(0, Outcome::Ok, ms(2));
        b.urls[1].fresh(true);
        b.urls[1].stale(0, true, 900_000_000, 1_000_000_000);
        // Outside the window: not counted.
        b.urls[0].fresh(false);
        b.urls[0].writes_acked += 2;
        a.merge(&b);

        let urls = ["http://a/graphql".to_string(), "http://b/graphql".into()];
        let report = a.report(&w, 1.0, &urls);
        let [first, second] = &report.per_url[..] else {
            panic!("two URLs: {:?}", report.per_url)
        };
        assert_eq!(first.url, urls[0]);
        let (first, second) = (&first.report, &second.report);
        assert_eq!(
            (
                first.requests(),
                first.reads_checked,
                first.stale_reads,
                first.writes_acked
            ),
            (3, 3, 0, 2)
        );
        assert_eq!(first.stale_fraction, Some(0.0));
        assert_eq!(
            (second.requests(), second.reads_checked, second.stale_reads),
            (2, 3, 2)
        );
        assert!((second.stale_age_ms.max - 900.0).abs() < 1.0, "{second:?}");
        assert!((second.stale_age_ms.min - 40.0).abs() < 0.1, "{second:?}");
        // The run's figures are the URLs' merged.
        assert_eq!(report.reads_checked, 6);
        assert_eq!(report.stale_reads, 2);
        assert_eq!(report.operations[0].requests, 5);
        assert_eq!(report.writes_acked, 2);
        assert_eq!(report.stale_age_ms, second.stale_age_ms);
    }
}
