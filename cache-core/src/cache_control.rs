//! What an origin said about a value's freshness: the directives of an HTTP
//! `Cache-Control` header (RFC 9111 §5.2.2), parsed once into a small copyable
//! value.
//!
//! The cache itself knows nothing of HTTP: a fetch that got such a header may
//! hand its directives to the cache with [`Fetched::cache_control`](crate::Fetched::cache_control),
//! and strategies read them there (the `origin-ttl` strategy turns them into
//! the entry's lifetime). Parsing is lenient as RFC 9111 asks: unknown
//! directives are ignored, and a malformed delta-seconds ignores its directive.

use std::time::Duration;

/// The freshness directives of one `Cache-Control` header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheDirectives {
    /// `max-age=N`: fresh for N seconds.
    pub max_age: Option<Duration>,
    /// `s-maxage=N`: fresh for N seconds in a shared cache (overrides
    /// `max-age` there).
    pub s_maxage: Option<Duration>,
    /// `stale-while-revalidate=N` (RFC 5861).
    pub stale_while_revalidate: Option<Duration>,
    /// `stale-if-error=N` (RFC 5861).
    pub stale_if_error: Option<Duration>,
    /// `no-store`: keep nothing.
    pub no_store: bool,
    /// `no-cache`: may be kept, but never used without revalidation (which
    /// this cache cannot do, so it keeps nothing either).
    pub no_cache: bool,
    /// `private`: for one user only; a shared cache must not keep it.
    pub private: bool,
    /// `public`.
    pub public: bool,
}

impl CacheDirectives {
    /// Parses a header value such as `max-age=60, private`. Never fails:
    /// what it cannot read it ignores.
    pub fn parse(header: &[u8]) -> CacheDirectives {
        let mut out = CacheDirectives::default();
        for directive in header.split(|&b| b == b',') {
            let directive = directive.trim_ascii();
            let (name, value) = match directive.iter().position(|&b| b == b'=') {
                Some(i) => (directive[..i].trim_ascii(), Some(&directive[i + 1..])),
                None => (directive, None),
            };
            let seconds = || value.and_then(delta_seconds);
            let is = |word: &str| name.eq_ignore_ascii_case(word.as_bytes());
            if is("max-age") {
                out.max_age = seconds().or(out.max_age);
            } else if is("s-maxage") {
                out.s_maxage = seconds().or(out.s_maxage);
            } else if is("stale-while-revalidate") {
                out.stale_while_revalidate = seconds().or(out.stale_while_revalidate);
            } else if is("stale-if-error") {
                out.stale_if_error = seconds().or(out.stale_if_error);
            } else if is("no-store") {
                out.no_store = true;
            } else if is("no-cache") {
                out.no_cache = true;
            } else if is("private") {
                out.private = true;
            } else if is("public") {
                out.public = true;
            }
        }
        out
    }

    /// How long a cache may serve the value as fresh: `s-maxage` for a
    /// shared cache when present, else `max-age`; `None` when the origin
    /// gave neither.
    pub fn freshness(&self, shared: bool) -> Option<Duration> {
        if shared {
            self.s_maxage.or(self.max_age)
        } else {
            self.max_age
        }
    }
}

/// `N` or `"N"`, a non-negative integer of seconds (RFC 9111 §1.2.2; values
/// too large for 32 bits are capped, as the RFC allows).
fn delta_seconds(value: &[u8]) -> Option<Duration> {
    let value = value.trim_ascii();
    let value = value
        .strip_prefix(b"\"")
        .and_then(|v| v.strip_suffix(b"\""))
        .unwrap_or(value);
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let seconds = std::str::from_utf8(value)
        .ok()?
        .parse::<u64>()
        .unwrap_or(u64::from(u32::MAX))
        .min(u64::from(u32::MAX));
    Some(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_parse_leniently() {
        let d = CacheDirectives::parse(b"max-age=60, private");
        assert_eq!(d.max_age, Some(Duration::from_secs(60)));
        assert!(d.private && !d.no_store);
        let d = CacheDirectives::parse(b"Max-Age=\"5\" ,S-MAXAGE=30,no-store, x-unknown=1");
        assert_eq!(d.max_age, Some(Duration::from_secs(5)));
        assert_eq!(d.s_maxage, Some(Duration::from_secs(30)));
        assert!(d.no_store);
        assert_eq!(d.freshness(true), Some(Duration::from_secs(30)));
        assert_eq!(d.freshness(false), Some(Duration::from_secs(5)));
        let d = CacheDirectives::parse(b"max-age=-1, max-age=abc, no-cache");
        assert_eq!(d.max_age, None, "malformed values are ignored");
        assert!(d.no_cache);
        let d = CacheDirectives::parse(
            b"max-age=99999999999, stale-while-revalidate=2, stale-if-error=30, public",
        );
        assert_eq!(d.max_age, Some(Duration::from_secs(u64::from(u32::MAX))));
        assert_eq!(d.stale_while_revalidate, Some(Duration::from_secs(2)));
        assert_eq!(d.stale_if_error, Some(Duration::from_secs(30)));
        assert!(d.public);
        assert_eq!(CacheDirectives::parse(b""), CacheDirectives::default());
    }
}
