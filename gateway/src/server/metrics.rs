//! The gateway's counters (requests, subgraph requests, refusals by limit, operations'
//! estimated costs and answer bytes) and request-latency histogram, rendered as
//! Prometheus text.
//!
//! Everything is a relaxed atomic: counters are read only by `/metrics`, which needs
//! no snapshot consistency across them, and the hot path pays one uncontended
//! `fetch_add` per event.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// Upper bounds (seconds) of the request-latency histogram buckets.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The limits a request can be refused by, as `gateway_refused_total` labels them.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    /// The text's tokens or nesting (`--max-tokens`, `--max-depth`).
    Text,
    /// Fields, fragments, root fields, aliases, reserved names (admission).
    Document,
    /// The estimated cost (`--max-cost`).
    Cost,
    /// The plan's subgraph requests (`--max-subgraph-requests`).
    Fetches,
    /// Introspection while it is off.
    Introspection,
    /// The response's bytes (`--max-answer-bytes`).
    Answer,
}

impl Limit {
    const ALL: [Limit; 6] = [
        Limit::Text,
        Limit::Document,
        Limit::Cost,
        Limit::Fetches,
        Limit::Introspection,
        Limit::Answer,
    ];

    fn label(self) -> &'static str {
        match self {
            Limit::Text => "text",
            Limit::Document => "document",
            Limit::Cost => "cost",
            Limit::Fetches => "subgraph_requests",
            Limit::Introspection => "introspection",
            Limit::Answer => "answer_bytes",
        }
    }
}

/// A renderer of more metrics, registered by another layer.
type Section = Box<dyn Fn(&mut String) + Send + Sync>;

pub struct Metrics {
    requests: AtomicU64,
    request_errors: AtomicU64,
    upstream: Vec<(String, AtomicU64, AtomicU64)>,
    latency_buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_micros: AtomicU64,
    /// Requests refused by each [`Limit`].
    refused: [AtomicU64; Limit::ALL.len()],
    /// Executed operations, and the sums of their estimated costs and answer bytes.
    operations: AtomicU64,
    cost_sum: AtomicU64,
    answer_bytes_sum: AtomicU64,
    /// Extra sections (e.g. cache counters) appended by other layers.
    extra: std::sync::RwLock<Vec<Section>>,
}

impl Metrics {
    pub fn new(subgraphs: impl IntoIterator<Item = String>) -> Self {
        Metrics {
            requests: AtomicU64::new(0),
            request_errors: AtomicU64::new(0),
            upstream: subgraphs
                .into_iter()
                .map(|s| (s, AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
            latency_buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            latency_count: AtomicU64::new(0),
            latency_sum_micros: AtomicU64::new(0),
            refused: std::array::from_fn(|_| AtomicU64::new(0)),
            operations: AtomicU64::new(0),
            cost_sum: AtomicU64::new(0),
            answer_bytes_sum: AtomicU64::new(0),
            extra: Default::default(),
        }
    }

    /// A GraphQL request finished after `elapsed`; `failed` when it carried errors.
    pub fn request(&self, elapsed: Duration, failed: bool) {
        self.requests.fetch_add(1, Relaxed);
        if failed {
            self.request_errors.fetch_add(1, Relaxed);
        }
        let secs = elapsed.as_secs_f64();
        if let Some(i) = LATENCY_BUCKETS.iter().position(|&b| secs <= b) {
            self.latency_buckets[i].fetch_add(1, Relaxed);
        }
        self.latency_count.fetch_add(1, Relaxed);
        self.latency_sum_micros
            .fetch_add(elapsed.as_micros() as u64, Relaxed);
    }

    /// A request refused by `limit`.
    pub fn refused(&self, limit: Limit) {
        self.refused[limit as usize].fetch_add(1, Relaxed);
    }

    /// An operation executed (or answered from a stored response) with this estimated
    /// cost and answer size.
    pub fn operation(&self, estimated_cost: u64, answer_bytes: usize) {
        self.operations.fetch_add(1, Relaxed);
        self.cost_sum.fetch_add(estimated_cost, Relaxed);
        self.answer_bytes_sum
            .fetch_add(answer_bytes as u64, Relaxed);
    }

    /// GraphQL requests answered so far (any outcome).
    pub fn requests_answered(&self) -> u64 {
        self.requests.load(Relaxed)
    }

    pub fn upstream_request(&self, subgraph: usize) {
        if let Some((_, n, _)) = self.upstream.get(subgraph) {
            n.fetch_add(1, Relaxed);
        }
    }

    pub fn upstream_error(&self, subgraph: usize) {
        if let Some((_, _, n)) = self.upstream.get(subgraph) {
            n.fetch_add(1, Relaxed);
        }
    }

    /// Render `source`'s metrics (its `render`, Prometheus text) with the rest, for as
    /// long as it lives: the registry holds it weakly, so a dropped cache or server
    /// stops appearing rather than being kept alive.
    pub fn add_source<T: Send + Sync + 'static>(&self, source: &Arc<T>, render: fn(&T) -> String) {
        let source = Arc::downgrade(source);
        let section = move |out: &mut String| {
            if let Some(source) = source.upgrade() {
                out.push_str(&render(&source));
            }
        };
        self.extra
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(Box::new(section));
    }

    pub fn render(&self) -> String {
        let mut out = String::with_capacity(2048);
        family(
            &mut out,
            "counter",
            "gateway_requests_total",
            "GraphQL requests answered.",
            [("", self.requests.load(Relaxed))],
        );
        family(
            &mut out,
            "counter",
            "gateway_request_errors_total",
            "GraphQL requests whose response carried errors.",
            [("", self.request_errors.load(Relaxed))],
        );
        let per_subgraph = |pick: fn(&(String, AtomicU64, AtomicU64)) -> &AtomicU64| {
            self.upstream
                .iter()
                .map(move |u| (format!("subgraph=\"{}\"", u.0), pick(u).load(Relaxed)))
                .collect::<Vec<_>>()
        };
        family(
            &mut out,
            "counter",
            "gateway_upstream_requests_total",
            "HTTP requests sent to each subgraph.",
            per_subgraph(|u| &u.1),
        );
        family(
            &mut out,
            "counter",
            "gateway_upstream_errors_total",
            "Subgraph requests that got no GraphQL response.",
            per_subgraph(|u| &u.2),
        );
        family(
            &mut out,
            "counter",
            "gateway_refused_total",
            "Requests refused by a limit, before any fetch (answer_bytes: while written).",
            Limit::ALL.iter().map(|l| {
                (
                    format!("limit=\"{}\"", l.label()),
                    self.refused[*l as usize].load(Relaxed),
                )
            }),
        );
        family(
            &mut out,
            "counter",
            "gateway_operations_total",
            "Operations answered after planning (executed, or from a stored response).",
            [("", self.operations.load(Relaxed))],
        );
        family(
            &mut out,
            "counter",
            "gateway_operation_cost_sum",
            "The sum of those operations' estimated costs (--max-cost).",
            [("", self.cost_sum.load(Relaxed))],
        );
        family(
            &mut out,
            "counter",
            "gateway_answer_bytes_sum",
            "The sum of those operations' response bytes (--max-answer-bytes).",
            [("", self.answer_bytes_sum.load(Relaxed))],
        );
        let _ = writeln!(
            out,
            "# HELP gateway_request_duration_seconds Time from request received to response ready."
        );
        let _ = writeln!(out, "# TYPE gateway_request_duration_seconds histogram");
        let mut cumulative = 0;
        for (bound, n) in LATENCY_BUCKETS.iter().zip(&self.latency_buckets) {
            cumulative += n.load(Relaxed);
            let _ = writeln!(
                out,
                "gateway_request_duration_seconds_bucket{{le=\"{bound}\"}} {cumulative}"
            );
        }
        let count = self.latency_count.load(Relaxed);
        let _ = writeln!(
            out,
            "gateway_request_duration_seconds_bucket{{le=\"+Inf\"}} {count}"
        );
        let sum = self.latency_sum_micros.load(Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "gateway_request_duration_seconds_sum {sum}");
        let _ = writeln!(out, "gateway_request_duration_seconds_count {count}");
        for render in self.extra.read().unwrap_or_else(|p| p.into_inner()).iter() {
            render(&mut out);
        }
        out
    }
}

/// One metric family in Prometheus text: HELP, TYPE (`counter`, `gauge`), then a
/// sample per label set (`""` for none).
pub(crate) fn family<L: AsRef<str>>(
    out: &mut String,
    kind: &str,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, u64)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        let labels = labels.as_ref();
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {value}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    }
}
