//! The response's `extensions` member: the places answered stale in place of a failed
//! fetch (`staleIfError`, written with the response), and the operation's cost (added
//! per request, when the client sends `extensions: {"cost": true}`, to an answer that
//! may be shared or stored).

use bytes::Bytes;

use super::errors::write_path;
use crate::caching::requests::Answer;
use crate::upstream::PathItem;

/// `,"extensions":{"staleIfError":[…]}` when some places were answered stale:
/// `{"path":["getPost"],"staleSeconds":3.2}` each, with how long past its freshness the
/// entry was. Whether it wrote anything.
pub(super) fn stale(out: &mut Vec<u8>, stale: &[(Vec<PathItem>, std::time::Duration)]) -> bool {
    if stale.is_empty() {
        return false;
    }
    out.extend_from_slice(b",\"extensions\":{\"staleIfError\":[");
    for (i, (path, stale_for)) in stale.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"path\":");
        write_path(out, &[], path);
        out.extend_from_slice(
            format!(",\"staleSeconds\":{:.3}}}", stale_for.as_secs_f64()).as_bytes(),
        );
    }
    out.extend_from_slice(b"]}");
    true
}

/// `answer` with `"cost":{"estimated":…,"max":…,"answerBytes":…}` in its extensions:
/// the estimate the operation was admitted with, `--max-cost` (null when off), and the
/// size of the answer as written (before this member).
pub fn with_cost(answer: &Answer, estimated: u64, max: Option<u64>) -> Bytes {
    let body = &answer.body;
    let max = max.map_or_else(|| "null".to_string(), |m| m.to_string());
    let cost = format!(
        "\"cost\":{{\"estimated\":{estimated},\"max\":{max},\"answerBytes\":{}}}",
        body.len()
    );
    let mut out = Vec::with_capacity(body.len() + cost.len() + 20);
    if answer.extended {
        // `…,"extensions":{…}}`: the member goes into the object before its `}}`.
        out.extend_from_slice(&body[..body.len().saturating_sub(2)]);
        out.push(b',');
        out.extend_from_slice(cost.as_bytes());
        out.extend_from_slice(b"}}");
    } else {
        out.extend_from_slice(&body[..body.len().saturating_sub(1)]);
        out.extend_from_slice(b",\"extensions\":{");
        out.extend_from_slice(cost.as_bytes());
        out.extend_from_slice(b"}}");
    }
    Bytes::from(out)
}
