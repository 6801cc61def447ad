//! The edge cache in front of the gateway (`--edge-purge URL`): after a mutation, and
//! on `POST /invalidate`, the gateway tells it which of its kept answers to drop.
//!
//! The edge keeps answers by what their `Cache-Control` allows and knows them by
//! their `Surrogate-Key` (`--surrogate-keys`): `Post Post:p1 User User:u1`. A purge is
//! one `PURGE` request to the edge's URL with a `Surrogate-Key` header naming the keys
//! to drop, or `*` for everything: the protocol of the lab's committed VCL
//! (`local-varnish/lab.vcl`), which bans every kept answer naming one of them.
//!
//! **What is purged.**
//! - After a mutation: the entities its answer holds (`Post:p1`), as the gateway's own
//!   caches drop them. The purge is sent before the mutation's response, so that the
//!   caller's next read through the edge is fresh.
//! - On `/invalidate`: references as keys (`Post:*` as the type `Post`), types as
//!   themselves, and a namespace or `all` as everything (the edge, like the response
//!   store, does not index answers by field).
//! - A key the VCL cannot take safely (other than letters, digits and `_:.@-`) is
//!   purged by its type, and a list past 4 KB by its types alone: never less than asked.
//!
//! **A purge against a read in flight.** Varnish's ban drops only what it kept before
//! the ban: an answer whose execution began before a mutation and ends after its purge
//! would be kept afterwards, stale, for its whole lifetime. So every purge moves an
//! epoch first ([`EdgePurge::epoch`]), and an answer whose execution saw the epoch move
//! goes out `no-store`.
//!
//! **Bounded.** One request, under a 2 s deadline; a failure is logged and counted
//! (`gateway_edge_purges_total{outcome="failed"}`): the mutation still answers, and
//! `/invalidate` answers 503 naming the edge.

use std::sync::atomic::{
    AtomicU64,
    Ordering::{AcqRel, Acquire, Relaxed},
};
use std::time::Duration;

use super::invalidation::Target;

/// How long one purge may take.
const PURGE_DEADLINE: Duration = Duration::from_secs(2);
/// Most bytes of a purge's `Surrogate-Key` before it falls back to the types.
const MOST_KEY_BYTES: usize = 4096;

/// What a purge drops at the edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EdgeKeys {
    /// Every kept answer naming one of these keys.
    Keys(Vec<String>),
    /// Everything.
    All,
}

impl EdgeKeys {
    /// The keys of answers holding these entity references (`Type:key`, `Type:*`).
    pub fn of_references<S: AsRef<str>>(references: &[S]) -> EdgeKeys {
        let mut keys: Vec<String> = references
            .iter()
            .map(|r| {
                let r = r.as_ref();
                let type_name = r.split_once(':').map_or(r, |(t, _)| t);
                match r.split_once(':') {
                    Some((_, key)) if key != "*" && safe(r) => r.to_string(),
                    _ => type_name.to_string(),
                }
            })
            .collect();
        keys.sort_unstable();
        keys.dedup();
        if keys.iter().map(|k| k.len() + 1).sum::<usize>() > MOST_KEY_BYTES {
            keys = keys
                .iter()
                .map(|k| k.split_once(':').map_or(k.as_str(), |(t, _)| t).to_string())
                .collect();
            keys.sort_unstable();
            keys.dedup();
        }
        EdgeKeys::Keys(keys)
    }

    /// What an invalidation from outside drops at the edge.
    pub fn of_target(target: &Target) -> EdgeKeys {
        match target {
            Target::References(references) => EdgeKeys::of_references(references),
            Target::Types(types) => EdgeKeys::of_references(types),
            Target::Namespaces(_) | Target::All => EdgeKeys::All,
        }
    }

    /// The purge's `Surrogate-Key` header.
    fn header(&self) -> String {
        match self {
            EdgeKeys::Keys(keys) => keys.join(" "),
            EdgeKeys::All => "*".to_string(),
        }
    }
}

/// Whether the VCL's ban can take `key` as it is.
fn safe(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_:.@-".contains(&b))
}

/// The edge's purge endpoint, and what its purges came to.
#[derive(Debug)]
pub struct EdgePurge {
    url: reqwest::Url,
    http: reqwest::Client,
    sent: AtomicU64,
    failed: AtomicU64,
    /// Purges begun: moved before each is sent.
    epoch: AtomicU64,
}

impl EdgePurge {
    /// A purger of the edge at `url` (`http://127.0.0.1:6081/`); the refusal names
    /// the flag.
    pub fn new(url: &str) -> Result<EdgePurge, String> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| format!("--edge-purge: {url:?} is not a URL ({e})"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(format!(
                "--edge-purge: {url:?} is not an http(s) URL with a host"
            ));
        }
        let http = reqwest::Client::builder()
            .timeout(PURGE_DEADLINE)
            .build()
            .map_err(|e| format!("--edge-purge: no HTTP client: {e}"))?;
        Ok(EdgePurge {
            url: parsed,
            http,
            sent: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
        })
    }

    /// How many purges have begun: an answer that saw this change while it was
    /// executed is not kept at the edge.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Acquire)
    }

    /// Ask the edge to drop `keys`; nothing is sent for an empty list.
    pub async fn purge(&self, keys: &EdgeKeys) -> Result<(), String> {
        if matches!(keys, EdgeKeys::Keys(k) if k.is_empty()) {
            return Ok(());
        }
        self.epoch.fetch_add(1, AcqRel);
        let method = reqwest::Method::from_bytes(b"PURGE").expect("PURGE is a method");
        let sent = self
            .http
            .request(method, self.url.clone())
            .header("surrogate-key", keys.header())
            .send()
            .await;
        let outcome = match sent {
            Ok(answer) if answer.status().is_success() => Ok(()),
            Ok(answer) => Err(format!(
                "the edge at {} answered the purge with {}",
                self.url,
                answer.status()
            )),
            Err(e) => Err(format!("the edge at {} was not reached: {e}", self.url)),
        };
        match &outcome {
            Ok(()) => self.sent.fetch_add(1, Relaxed),
            Err(e) => {
                tracing::warn!("edge purge failed: {e}");
                self.failed.fetch_add(1, Relaxed)
            }
        };
        outcome
    }

    /// Prometheus text: `gateway_edge_purges_total{outcome}`.
    pub fn prometheus(&self) -> String {
        let mut out = String::with_capacity(256);
        crate::server::metrics::family(
            &mut out,
            "counter",
            "gateway_edge_purges_total",
            "PURGE requests sent to the edge cache (--edge-purge), by outcome.",
            [
                ("outcome=\"ok\"", self.sent.load(Relaxed)),
                ("outcome=\"failed\"", self.failed.load(Relaxed)),
            ],
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_become_keys_and_odd_ones_their_types() {
        let keys = EdgeKeys::of_references(&["Post:p1", "Post:p1", "User:*", "Odd:a b\"c"]);
        assert_eq!(
            keys,
            EdgeKeys::Keys(vec!["Odd".into(), "Post:p1".into(), "User".into()])
        );
        assert_eq!(keys.header(), "Odd Post:p1 User");
        let many: Vec<String> = (0..1000).map(|i| format!("Post:p{i}")).collect();
        assert_eq!(
            EdgeKeys::of_references(&many),
            EdgeKeys::Keys(vec!["Post".into()])
        );
        assert_eq!(
            EdgeKeys::of_target(&Target::Namespaces(vec!["Query.x".into()])),
            EdgeKeys::All
        );
        assert_eq!(EdgeKeys::All.header(), "*");
    }

    #[test]
    fn a_bad_url_names_the_flag() {
        for bad in ["not a url", "ftp://127.0.0.1/", "unix:/tmp/x"] {
            let error = EdgePurge::new(bad).expect_err(bad);
            assert!(error.starts_with("--edge-purge"), "{error}");
        }
        assert!(EdgePurge::new("http://127.0.0.1:6081/").is_ok());
    }
}
