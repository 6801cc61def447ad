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
}

impl Counters {
    /// The Prometheus text of every counter, labelled with `service`.
    pub fn render(&self, service: &str) -> String {
        let mut out = String::new();
        let mut counter = |name: &str, help: &str, value: &AtomicU64| {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{service=\"{service}\"}} {}\n",
                value.load(Ordering::Relaxed)
            );
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
        out
    }
}
