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
}

impl Counters {
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
        out
    }
}
