//! The counters a subgraph exports on `/metrics`, in Prometheus text.
//!
//! Plain atomics: every request bumps one or two of them on its own task, and a scrape
//! reads them without a lock.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters exposed on `/metrics`.
#[derive(Debug, Default)]
pub struct Counters {
    /// GraphQL requests received on `/graphql`.
    pub requests: AtomicU64,
    /// GraphQL responses that carried errors.
    pub errors: AtomicU64,
    /// Requests whose parsed document came from the document cache.
    pub document_hits: AtomicU64,
    /// Requests whose text was parsed (the cache is on and did not have it).
    pub document_misses: AtomicU64,
    /// Requests run without validating again: their document, operation and shape of
    /// variables had passed strict validation before.
    pub validations_skipped: AtomicU64,
    /// Requests answered 503 inside an `--outage` window.
    pub outages: AtomicU64,
    /// Requests never answered (`--hang-rate`).
    pub hangs: AtomicU64,
    /// Requests answered with an injected GraphQL error (`--error-rate`).
    pub injected_errors: AtomicU64,
    /// Microseconds of delay held, summed over answers.
    pub delay_micros: AtomicU64,
    /// Requests decoded and not yet answered (hung ones included).
    pub in_progress: AtomicU64,
}

/// Counts one request in progress until dropped (answered, or cancelled with its
/// connection).
pub struct InProgress<'a>(&'a AtomicU64);

impl Drop for InProgress<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Counters {
    /// Count a request in progress for as long as the guard lives.
    pub fn in_progress(&self) -> InProgress<'_> {
        self.in_progress.fetch_add(1, Ordering::Relaxed);
        InProgress(&self.in_progress)
    }

    /// The Prometheus text of every counter and of the document cache's size
    /// (`(entries, estimated bytes)`), labelled with `service`.
    pub fn render(&self, service: &str, documents: (u64, u64)) -> String {
        let mut out = String::new();
        let mut sample = |kind: &str, name: &str, help: &str, value: u64| {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{service=\"{service}\"}} {value}\n",
            );
        };
        let mut counter = |name: &str, help: &str, value: &AtomicU64| {
            sample("counter", name, help, value.load(Ordering::Relaxed))
        };
        counter(
            "subgraph_requests_total",
            "GraphQL requests received on /graphql.",
            &self.requests,
        );
        counter(
            "subgraph_request_errors_total",
            "GraphQL responses that carried errors.",
            &self.errors,
        );
        counter(
            "subgraph_document_cache_hits_total",
            "Requests whose parsed document came from the document cache.",
            &self.document_hits,
        );
        counter(
            "subgraph_document_cache_misses_total",
            "Requests whose text was parsed and offered to the document cache.",
            &self.document_misses,
        );
        counter(
            "subgraph_validations_skipped_total",
            "Requests whose document, operation and shape of variables had passed strict validation before, run without validating again.",
            &self.validations_skipped,
        );
        sample(
            "gauge",
            "subgraph_requests_in_progress",
            "Requests decoded and not yet answered (hung ones included).",
            self.in_progress.load(Ordering::Relaxed),
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            sample(
                "gauge",
                "subgraph_tokio_tasks",
                "Tasks alive in the subgraph's tokio runtime (a soak watches it stay flat).",
                runtime.metrics().num_alive_tasks() as u64,
            );
        }
        sample(
            "gauge",
            "subgraph_document_cache_entries",
            "Parsed documents held.",
            documents.0,
        );
        sample(
            "gauge",
            "subgraph_document_cache_bytes",
            "Estimated bytes the document cache holds (--document-cache-bytes bounds it).",
            documents.1,
        );
        let _ = write!(
            out,
            "# HELP subgraph_injected_faults_total Requests given an injected fault (--outage, --hang-rate, --error-rate).\n\
             # TYPE subgraph_injected_faults_total counter\n"
        );
        for (fault, value) in [
            ("outage", &self.outages),
            ("hang", &self.hangs),
            ("error", &self.injected_errors),
        ] {
            let _ = writeln!(
                out,
                "subgraph_injected_faults_total{{service=\"{service}\",fault=\"{fault}\"}} {}",
                value.load(Ordering::Relaxed)
            );
        }
        let _ = write!(
            out,
            "# HELP subgraph_injected_delay_seconds_total Delay held before answers (--delay-ms and its jitter or distribution).\n\
             # TYPE subgraph_injected_delay_seconds_total counter\n\
             subgraph_injected_delay_seconds_total{{service=\"{service}\"}} {}\n",
            self.delay_micros.load(Ordering::Relaxed) as f64 / 1e6
        );
        out
    }
}
