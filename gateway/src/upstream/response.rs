//! What a subgraph request gives back: its answer as a GraphQL response (the
//! body's tape, where `data` is in it, its errors), or why there is none
//! ([`FetchError`]: unreachable, timed out, the breaker open, an HTTP status without
//! a GraphQL body, a body that is not GraphQL JSON, or one too large).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cache_core::CacheDirectives;
use serde::Deserialize;

use crate::answer::tape::Tape;

/// A subgraph's GraphQL response: the tape of its body, where `data` is in it, and
/// its errors.
#[derive(Debug, Clone)]
pub struct UpstreamResponse {
    pub tape: Arc<Tape>,
    /// The tape index of `data`, when present and not null.
    pub data: Option<u32>,
    pub errors: Vec<UpstreamError>,
    /// The answer's `Cache-Control` directives, if it had the header.
    pub cache_control: Option<CacheDirectives>,
    /// When it arrived (read whole).
    pub received: std::time::Instant,
}

#[derive(Debug, Clone, Deserialize)]
pub struct UpstreamError {
    pub message: String,
    #[serde(default)]
    pub path: Vec<PathItem>,
    /// The subgraph's `extensions` (its `code`, say), passed on to the client.
    #[serde(default)]
    pub extensions: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum PathItem {
    Index(usize),
    Key(String),
}

/// Why a subgraph request produced no GraphQL response.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FetchError {
    #[error("subgraph {subgraph} is unavailable: {detail}")]
    Unavailable { subgraph: String, detail: String },
    #[error("subgraph {subgraph} did not answer within {timeout:?}")]
    Timeout { subgraph: String, timeout: Duration },
    #[error("subgraph {subgraph} could not be reached: no connection within {timeout:?}")]
    ConnectTimeout { subgraph: String, timeout: Duration },
    #[error("subgraph {subgraph} is unavailable: its circuit breaker is open after repeated failures{}", retry_note(.retry_in))]
    BreakerOpen {
        subgraph: String,
        retry_in: Option<Duration>,
    },
    #[error("subgraph {subgraph} answered HTTP {status} without a GraphQL response")]
    Status { subgraph: String, status: u16 },
    #[error("subgraph {subgraph} sent a response that is not GraphQL JSON: {detail}")]
    Malformed { subgraph: String, detail: String },
    #[error("subgraph {subgraph} answered more than {limit} bytes")]
    TooLarge { subgraph: String, limit: usize },
}

fn retry_note(retry_in: &Option<Duration>) -> String {
    match retry_in {
        Some(d) => format!(" (next probe in {:.1} s)", d.as_secs_f64()),
        None => " (a probe is in flight)".into(),
    }
}

/// A subgraph's answer as a GraphQL response: `data` or `errors` must be there.
pub(super) fn parse_response(
    subgraph: &str,
    status: u16,
    body: Bytes,
) -> Result<UpstreamResponse, FetchError> {
    let success = (200..300).contains(&status);
    let malformed = |detail: String| {
        if success {
            FetchError::Malformed {
                subgraph: subgraph.to_string(),
                detail,
            }
        } else {
            FetchError::Status {
                subgraph: subgraph.to_string(),
                status,
            }
        }
    };
    let tape = Tape::parse(body).map_err(|e| malformed(e.to_string()))?;
    let root = tape.root();
    if root.kind() != crate::answer::tape::Kind::Object {
        return Err(malformed("the body is not a JSON object".into()));
    }
    let mut data = None;
    let mut saw_data = false;
    let mut errors = Vec::new();
    for member in root.members() {
        if member.key_is("data") {
            saw_data = !member.is_null();
            data = (!member.is_null()).then(|| member.index());
        } else if member.key_is("errors") && !member.is_null() {
            errors = serde_json::from_slice::<Vec<UpstreamError>>(member.raw())
                .map_err(|e| malformed(format!("errors: {e}")))?;
        }
    }
    if !saw_data && errors.is_empty() {
        return Err(malformed("neither data nor errors".into()));
    }
    Ok(UpstreamResponse {
        tape: Arc::new(tape),
        data,
        errors,
        cache_control: None,
        received: std::time::Instant::now(),
    })
}
