//! What an answer tells the HTTP caches in front of the gateway (a client's, a CDN's,
//! Varnish): `Cache-Control`, `Vary`, `ETag`, and with `--surrogate-keys` the entity
//! references it holds.
//!
//! **How long.** Execution notes every piece the answer is written from
//! ([`Freshness::note_parts`]). A piece may be kept until the soonest of:
//! - its subgraph's own hint: `s-maxage`, else `max-age`, counted from when the
//!   subgraph's answer arrived (as the `origin-ttl` strategy reads it);
//! - its namespace's TTL in the gateway's resolver cache, when it came through that
//!   cache, counted from the same moment.
//!
//! The answer's `max-age` is the time left until the soonest of its pieces', so an
//! answer is never kept, by the edge and the gateway together, past what its strictest
//! piece allows. A stored answer of the response strategy is bounded by its own entry
//! too, and its `max-age` falls as it ages.
//!
//! **By whom.** `private` when any piece is per caller (its subgraph said `private`,
//! or a policy keys its namespace by a header) or the request carried credentials;
//! `public` otherwise. `Vary` names every header a policy keys by.
//!
//! **Not at all.** `no-store` for a mutation, an answer with errors, an answer with no
//! piece (introspection, `__typename`), and any answer with a piece the gateway could
//! not give a lifetime: no hint and not cached, `no-store` or `no-cache` from its
//! subgraph, read back from Redis (whose age the gateway does not know), or served
//! stale in place of a failed fetch.
//!
//! **ETag** is the xxh3-128 of the body, on every answer that may be kept; a request
//! whose `If-None-Match` names it gets `304` with no body.

use std::time::{Duration, Instant};

use axum::http::HeaderValue;
use cache_core::CacheDirectives;

/// What the pieces of one answer allow, gathered as execution notes them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Freshness {
    /// When the soonest piece stops being fresh.
    until: Option<Instant>,
    /// Some piece may not be kept at all.
    uncacheable: bool,
    /// Some piece is for one caller.
    private: bool,
}

impl Freshness {
    /// Note a subgraph answer read in place (no piece, no cache): its directives and
    /// when it arrived.
    pub fn note_answer(&mut self, directives: Option<CacheDirectives>, received: Instant) {
        self.note_parts(directives, Some(received), None, false);
    }

    /// Note what one part of the answer allows: its subgraph's directives, when its
    /// answer arrived (`None`: unknown, or served stale), how long the resolver cache
    /// keeps it, and whether its key names the caller.
    #[inline]
    pub fn note_parts(
        &mut self,
        directives: Option<CacheDirectives>,
        fetched_at: Option<Instant>,
        kept_for: Option<Duration>,
        per_caller: bool,
    ) {
        let (private, never, hint) = match &directives {
            Some(d) => (
                d.private,
                d.no_store || d.no_cache,
                d.s_maxage.or(d.max_age),
            ),
            None => (false, false, None),
        };
        self.private |= private || per_caller;
        let Some(fetched_at) = fetched_at.filter(|_| !never) else {
            self.uncacheable = true;
            return;
        };
        let lifetime = match (hint, kept_for) {
            (Some(h), Some(k)) => h.min(k),
            (Some(h), None) => h,
            (None, Some(k)) => k,
            (None, None) => {
                self.uncacheable = true;
                return;
            }
        };
        self.end_by(fetched_at + lifetime);
    }

    /// Make `until` the end if it comes sooner than the one noted so far.
    #[inline]
    fn end_by(&mut self, until: Instant) {
        self.until = Some(self.until.map_or(until, |u| u.min(until)));
    }

    /// The same, kept no later than `until` (a stored answer's own entry).
    pub fn bounded_by(mut self, until: Instant) -> Freshness {
        self.end_by(until);
        self
    }
}

/// What an answer may be kept for, decided once it is written.
#[derive(Clone, Debug)]
pub struct Keepable {
    pub freshness: Freshness,
    /// The body's validator, when it may be kept.
    pub etag: Option<HeaderValue>,
    /// Its entity references, for `Surrogate-Key` (`--surrogate-keys`).
    pub surrogate_keys: Option<HeaderValue>,
}

impl Keepable {
    /// Never kept: a mutation, an answer with errors, one no piece gave a lifetime.
    pub fn never() -> Keepable {
        Keepable {
            freshness: Freshness {
                uncacheable: true,
                ..Freshness::default()
            },
            etag: None,
            surrogate_keys: None,
        }
    }

    /// For an answer written from pieces noted in `freshness`: never kept when it is
    /// a mutation's or has errors.
    pub fn of(freshness: Freshness, body: &[u8], never: bool) -> Keepable {
        if never || freshness.uncacheable || freshness.until.is_none() {
            return Keepable::never();
        }
        let etag = Some(etag_of(body));
        Keepable {
            freshness,
            etag,
            surrogate_keys: None,
        }
    }

    /// Whether a cache may keep it at all.
    pub fn may_keep(&self) -> bool {
        !self.freshness.uncacheable && self.freshness.until.is_some()
    }

    /// The `Cache-Control` value at `now`, for a request that did or did not carry
    /// credentials.
    pub fn cache_control(&self, now: Instant, credentials: bool) -> HeaderValue {
        let Some(until) = self.freshness.until.filter(|_| self.may_keep()) else {
            return HeaderValue::from_static("no-store");
        };
        let left = until.saturating_duration_since(now).as_secs();
        cache_control_value(self.freshness.private || credentials, left)
    }

    /// Whether `If-None-Match` names this answer's validator.
    pub fn matches(&self, if_none_match: Option<&HeaderValue>) -> bool {
        let (Some(etag), Some(asked)) = (&self.etag, if_none_match) else {
            return false;
        };
        let Ok(asked) = asked.to_str() else {
            return false;
        };
        let etag = etag.as_bytes();
        asked.trim() == "*"
            || asked
                .split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t.as_bytes() == etag)
    }
}

/// The validator of `body`: its xxh3-128 in hexadecimal, quoted.
fn etag_of(body: &[u8]) -> HeaderValue {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digest = xxhash_rust::xxh3::xxh3_128(body).to_be_bytes();
    let mut text = [b'"'; 34];
    for (pair, byte) in text[1..33].chunks_exact_mut(2).zip(digest) {
        pair[0] = DIGITS[(byte >> 4) as usize];
        pair[1] = DIGITS[(byte & 15) as usize];
    }
    HeaderValue::from_bytes(&text).unwrap_or(HeaderValue::from_static("\"\""))
}

/// `max-age` values whose `Cache-Control` is made once and shared (a clone of a static
/// value costs no allocation); longer ones are written per answer.
const TABLED: u64 = 600;

/// `public, max-age=N` or `private, max-age=N`.
fn cache_control_value(private: bool, max_age: u64) -> HeaderValue {
    static TABLES: std::sync::OnceLock<[Vec<HeaderValue>; 2]> = std::sync::OnceLock::new();
    let write = |scope: &str, n: u64| format!("{scope}, max-age={n}");
    if max_age <= TABLED {
        let tables = TABLES.get_or_init(|| {
            ["public", "private"].map(|scope| {
                (0..=TABLED)
                    .map(|n| HeaderValue::from_static(Box::leak(write(scope, n).into_boxed_str())))
                    .collect()
            })
        });
        return tables[private as usize][max_age as usize].clone();
    }
    let scope = if private { "private" } else { "public" };
    HeaderValue::from_str(&write(scope, max_age)).unwrap_or(HeaderValue::from_static("no-store"))
}

/// Most bytes of a `Surrogate-Key` header: Varnish reads response headers of up to
/// 8 KB by default (`http_resp_hdr_len`); past this the entity keys give way to their
/// types', which still purge everything they held.
const MOST_SURROGATE_BYTES: usize = 4096;

/// The `Surrogate-Key` of an answer holding these entity references (`Type:key`):
/// every reference and every type, space-separated; only the types when the list would
/// pass 4 KB.
pub fn surrogate_keys(references: &[String]) -> Option<HeaderValue> {
    if references.is_empty() {
        return None;
    }
    let mut types: Vec<&str> = references
        .iter()
        .map(|r| r.split_once(':').map_or(r.as_str(), |(t, _)| t))
        .collect();
    types.sort_unstable();
    types.dedup();
    let mut keys: Vec<&str> = references.iter().map(String::as_str).collect();
    keys.sort_unstable();
    keys.dedup();
    let all = keys.iter().map(|k| k.len() + 1).sum::<usize>();
    let mut text = types.join(" ");
    if all + text.len() <= MOST_SURROGATE_BYTES {
        for key in keys {
            text.push(' ');
            text.push_str(key);
        }
    }
    HeaderValue::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surrogate_keys_name_types_and_entities_until_they_grow_too_long() {
        let few = vec!["Post:p1".to_string(), "User:u1".into(), "Post:p1".into()];
        let header = surrogate_keys(&few).unwrap();
        assert_eq!(header.to_str().unwrap(), "Post User Post:p1 User:u1");
        let many: Vec<String> = (0..2000).map(|i| format!("Post:p{i}")).collect();
        assert_eq!(surrogate_keys(&many).unwrap().to_str().unwrap(), "Post");
        assert!(surrogate_keys(&[]).is_none());
    }

    #[test]
    fn if_none_match_names_the_validator_in_a_list_or_weakly() {
        let keepable = Keepable {
            freshness: Freshness::default(),
            etag: Some(HeaderValue::from_static("\"abc\"")),
            surrogate_keys: None,
        };
        for asked in ["\"abc\"", "\"x\", \"abc\"", "W/\"abc\"", "*"] {
            assert!(
                keepable.matches(Some(&HeaderValue::from_static(asked))),
                "{asked}"
            );
        }
        assert!(!keepable.matches(Some(&HeaderValue::from_static("\"abd\""))));
        assert!(!keepable.matches(None));
    }
}
