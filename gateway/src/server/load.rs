//! Load shedding: how many connections and GraphQL requests the gateway holds, how many
//! it may hold, and what it turned away.
//!
//! Past `--max-concurrent-requests` a GraphQL request is answered `503` with
//! `Retry-After` at once, before its body is read; past `--max-connections` a new
//! connection gets the same answer and is closed (see [`crate::server::connections`]). So more
//! load than the gateway can serve costs a cheap refusal each, never a queue that
//! grows without bound: the requests it admits keep their latency, and when the load
//! drops nothing is left queued to work off.
//!
//! Admission is one `fetch_add` on a counter shared by every connection, and its
//! [`Ticket`] one `fetch_sub` when the request is answered (or cancelled).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::server::linger::LingerCount;
use crate::server::metrics::family;

/// Seconds a refused client is asked to wait (`Retry-After`).
pub const RETRY_AFTER_SECS: u64 = 1;

/// The server's limits (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadLimits {
    pub max_connections: usize,
    pub max_requests: usize,
}

impl LoadLimits {
    /// No limit on either.
    pub const NONE: LoadLimits = LoadLimits {
        max_connections: 0,
        max_requests: 0,
    };
}

/// What the server holds now, and what it turned away so far.
#[derive(Debug, Default)]
pub struct Load {
    max_connections: usize,
    max_requests: usize,
    connections: AtomicUsize,
    connections_total: AtomicU64,
    connections_refused: AtomicU64,
    requests: AtomicUsize,
    requests_refused: AtomicU64,
    pub lingering: Arc<LingerCount>,
}

/// A GraphQL request admitted; it leaves the count when dropped.
pub struct Ticket(Arc<Load>);

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.requests.fetch_sub(1, Relaxed);
    }
}

/// A connection being served; it leaves the count when dropped.
pub struct Seat(Arc<Load>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Relaxed);
    }
}

impl Load {
    pub fn new(limits: LoadLimits) -> Load {
        Load {
            max_connections: limits.max_connections,
            max_requests: limits.max_requests,
            ..Load::default()
        }
    }

    /// Admit one GraphQL request, or `None` when as many are in progress as allowed
    /// (counted as refused).
    #[inline]
    pub fn admit_request(self: &Arc<Self>) -> Option<Ticket> {
        let before = self.requests.fetch_add(1, Relaxed);
        if self.max_requests != 0 && before >= self.max_requests {
            self.requests.fetch_sub(1, Relaxed);
            self.requests_refused.fetch_add(1, Relaxed);
            return None;
        }
        Some(Ticket(self.clone()))
    }

    /// Seat one new connection, or `None` when as many are open as allowed (counted as
    /// refused).
    pub fn admit_connection(self: &Arc<Self>) -> Option<Seat> {
        let before = self.connections.fetch_add(1, Relaxed);
        if self.max_connections != 0 && before >= self.max_connections {
            self.connections.fetch_sub(1, Relaxed);
            self.connections_refused.fetch_add(1, Relaxed);
            return None;
        }
        self.connections_total.fetch_add(1, Relaxed);
        Some(Seat(self.clone()))
    }

    /// GraphQL requests in progress now.
    pub fn requests_in_progress(&self) -> usize {
        self.requests.load(Relaxed)
    }

    /// Prometheus text: connections and requests held and refused, sockets lingering,
    /// and the runtime's live tasks.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        family(
            &mut out,
            "gauge",
            "gateway_connections_open",
            "Client connections open now.",
            [("", self.connections.load(Relaxed) as u64)],
        );
        family(
            &mut out,
            "counter",
            "gateway_connections_total",
            "Client connections accepted and served.",
            [("", self.connections_total.load(Relaxed))],
        );
        family(
            &mut out,
            "gauge",
            "gateway_requests_in_progress",
            "GraphQL requests being answered now.",
            [("", self.requests.load(Relaxed) as u64)],
        );
        family(
            &mut out,
            "counter",
            "gateway_shed_total",
            "Answered 503 with Retry-After at once: requests past --max-concurrent-requests, connections past --max-connections.",
            [
                ("reason=\"requests\"", self.requests_refused.load(Relaxed)),
                (
                    "reason=\"connections\"",
                    self.connections_refused.load(Relaxed),
                ),
            ],
        );
        family(
            &mut out,
            "gauge",
            "gateway_lingering_sockets",
            "Closed connections still being read dry (lingering close).",
            [("", self.lingering.now() as u64)],
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            family(
                &mut out,
                "gauge",
                "gateway_tokio_tasks",
                "Tasks alive in the gateway's tokio runtime.",
                [("", runtime.metrics().num_alive_tasks() as u64)],
            );
        }
        out
    }
}

/// The JSON body of a refusal.
pub fn overloaded_body(what: &str) -> String {
    format!(
        r#"{{"errors":[{{"message":"the gateway is overloaded ({what}); retry after {RETRY_AFTER_SECS} s","extensions":{{"code":"OVERLOADED"}}}}]}}"#
    )
}

/// `503` with `Retry-After` for a request past the limit.
pub fn overloaded() -> Response {
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        overloaded_body("too many requests in progress"),
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    response
}

/// The whole HTTP/1.1 answer written to a connection past the limit, before its request
/// is read.
pub fn connection_refusal() -> Vec<u8> {
    let body = overloaded_body("too many connections");
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: {RETRY_AFTER_SECS}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_counts_and_releases() {
        let load = Arc::new(Load::new(LoadLimits {
            max_connections: 1,
            max_requests: 2,
        }));
        let a = load.admit_request().unwrap();
        let _b = load.admit_request().unwrap();
        assert!(load.admit_request().is_none());
        drop(a);
        assert!(load.admit_request().is_some());
        let seat = load.admit_connection().unwrap();
        assert!(load.admit_connection().is_none());
        drop(seat);
        assert!(load.admit_connection().is_some());
        let text = load.prometheus();
        assert!(
            text.contains("gateway_shed_total{reason=\"requests\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("gateway_shed_total{reason=\"connections\"} 1"),
            "{text}"
        );
        let unlimited = Arc::new(Load::new(LoadLimits::NONE));
        let tickets: Vec<_> = (0..1000).map(|_| unlimited.admit_request()).collect();
        assert!(tickets.iter().all(Option::is_some));
    }

    #[test]
    fn the_refusal_is_complete_http() {
        let text = String::from_utf8(connection_refusal()).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        assert!(serde_json::from_str::<serde_json::Value>(body).is_ok());
    }
}
