//! Persisted documents: a document named by an id instead of sent as text.
//!
//! Two kinds, looked up in this order:
//! - **Trusted documents** (`--persisted-documents FILE`): a list fixed at startup,
//!   read from Apollo's persisted query manifest or a plain `{"id": "document"}` map.
//!   A request names one by `documentId` (a body member or a GET parameter), or by
//!   `extensions.persistedQuery.sha256Hash` (Apollo's manifest ids are the documents'
//!   SHA-256). Each document is parsed at startup, so a bad file stops the gateway
//!   before it serves, naming the id.
//! - **Automatic persisted queries** (APQ, Apollo's protocol): the client sends
//!   `extensions.persistedQuery = {"version": 1, "sha256Hash": "<hex>"}`. A hash the
//!   gateway does not know is answered with `PersistedQueryNotFound` (code
//!   `PERSISTED_QUERY_NOT_FOUND`), which Apollo's clients read as "send the text";
//!   the hash with its text is checked (the SHA-256 of the text must be the hash, or
//!   the request is refused and nothing is registered), run, and registered once the
//!   document has parsed and validated, so a hash never names a document that fails.
//!   The store is bounded in bytes (`--apq-cache-bytes`, each entry weighed by its
//!   text) and evicts as moka does (TinyLFU); `0` turns APQ off.
//!
//!   With `--storage redis` or `layered`, registrations are also written to that Redis
//!   (kept 24 hours), and a hash this gateway does not hold is looked up there before
//!   it is reported unknown: every gateway of a fleet knows what one was sent, as with
//!   Apollo Router's distributed APQ. A text read from Redis is checked against its
//!   hash before it is used, so a bad entry costs a `PersistedQueryNotFound`, never a
//!   wrong document.
//!
//! With `--require-persisted`, only trusted documents run: a text, or a hash that is
//! not on the list, is refused before parsing (a safelist; APQ registrations are
//! refused too, since they would put any text on it).
//!
//! **What a name saves.** The store keeps each document's text with its
//! parsed-document key ([`DocumentKey`]), so a named document reaches the
//! parsed-document cache without hashing its text again; the text itself is shared
//! with that cache's entry (one `Arc<str>`).
//!
//! Every refusal is a GraphQL error without `data`, with a code in `extensions` that
//! names what was wrong (the codes are Apollo's where Apollo has one).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cache_core::key::PrehashedKeys;
use cache_core::storage::{Entry, RedisStorage, Storage};
use cache_core::CacheKey;
use sha2::{Digest, Sha256};

use super::DocumentKey;

/// How a request names a persisted document (borrowed from its body when it can be).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Naming<'b> {
    /// `extensions.persistedQuery.sha256Hash`, as sent.
    Hash(Cow<'b, str>),
    /// `documentId`, as sent.
    DocumentId(Cow<'b, str>),
}

impl Naming<'_> {
    /// The same, owning its text.
    pub fn into_owned(self) -> Naming<'static> {
        match self {
            Naming::Hash(h) => Naming::Hash(Cow::Owned(h.into_owned())),
            Naming::DocumentId(d) => Naming::DocumentId(Cow::Owned(d.into_owned())),
        }
    }
}

/// A document the store keeps: its text and its parsed-document key.
#[derive(Clone)]
pub struct Kept {
    pub text: Arc<str>,
    pub key: DocumentKey,
}

/// The document a request runs.
pub enum Resolved<'r> {
    /// The text the request carried; with the hash to register once it validates.
    Sent {
        text: &'r str,
        register: Option<[u8; 32]>,
    },
    /// A document the store kept, named by the request.
    Kept(Kept),
}

/// A request refused here: its message and code.
#[derive(Debug)]
pub struct Refused {
    pub code: &'static str,
    pub message: String,
}

impl Refused {
    fn new(code: &'static str, message: impl Into<String>) -> Refused {
        Refused {
            code,
            message: message.into(),
        }
    }

    /// As a GraphQL error, with the code in `extensions`.
    pub fn to_error(&self) -> async_graphql::ServerError {
        let mut error = async_graphql::ServerError::new(self.message.clone(), None);
        let mut extensions = async_graphql::ErrorExtensionValues::default();
        extensions.set("code", self.code);
        error.extensions = Some(extensions);
        error
    }
}

/// The trusted documents of `--persisted-documents`, by id.
#[derive(Default)]
pub struct TrustedDocuments {
    by_id: HashMap<String, Kept>,
}

impl TrustedDocuments {
    /// Read `path`: Apollo's persisted query manifest, or a `{"id": "document"}` map.
    pub fn read(path: &std::path::Path) -> Result<TrustedDocuments, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "--persisted-documents {}: cannot read it: {e}",
                path.display()
            )
        })?;
        TrustedDocuments::parse(&text)
            .map_err(|e| format!("--persisted-documents {}: {e}", path.display()))
    }

    /// The documents of a manifest or map's text; every document must parse.
    pub fn parse(text: &str) -> Result<TrustedDocuments, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
        let serde_json::Value::Object(top) = value else {
            return Err("expected a JSON object: Apollo's persisted query manifest, or a map of id to document".into());
        };
        let mut documents = Vec::new();
        if let Some(format) = top.get("format") {
            if format.as_str() != Some("apollo-persisted-query-manifest") {
                return Err(format!(
                    "\"format\" is {format}; the one known is \"apollo-persisted-query-manifest\""
                ));
            }
            if top.get("version").and_then(|v| v.as_u64()) != Some(1) {
                return Err("the manifest's \"version\" must be 1".into());
            }
            let operations = top
                .get("operations")
                .and_then(|o| o.as_array())
                .ok_or("the manifest has no \"operations\" list")?;
            for (i, operation) in operations.iter().enumerate() {
                let field = |name: &str| {
                    operation
                        .get(name)
                        .and_then(|v| v.as_str())
                        .ok_or_else(|| format!("operations[{i}] has no \"{name}\" string"))
                };
                documents.push((field("id")?.to_owned(), field("body")?.to_owned()));
            }
        } else {
            for (id, document) in top {
                let serde_json::Value::String(body) = document else {
                    return Err(format!("the document of id {id:?} is not a string"));
                };
                documents.push((id, body));
            }
        }
        let mut by_id = HashMap::with_capacity(documents.len());
        for (id, body) in documents {
            if let Err(e) = async_graphql_parser::parse_query(&body) {
                return Err(format!("the document of id {id:?} does not parse: {e}"));
            }
            let kept = Kept {
                key: DocumentKey::of(&body),
                text: Arc::from(body),
            };
            if by_id.insert(id.clone(), kept).is_some() {
                return Err(format!("the id {id:?} is given twice"));
            }
        }
        Ok(TrustedDocuments { by_id })
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    fn get(&self, id: &str) -> Option<&Kept> {
        self.by_id.get(id)
    }
}

/// How the gateway takes persisted documents (`--persisted-documents`,
/// `--require-persisted`, `--apq-cache-bytes`).
#[derive(Clone, Default)]
pub struct PersistedSettings {
    pub trusted: Option<Arc<TrustedDocuments>>,
    /// Run only trusted documents.
    pub require: bool,
    /// The APQ store's bound in bytes; 0: no APQ.
    pub apq_bytes: u64,
}

/// What happened to the requests that named, or were asked to name, a document.
#[derive(Default)]
struct Counters {
    apq_hits: AtomicU64,
    shared_hits: AtomicU64,
    apq_misses: AtomicU64,
    registered: AtomicU64,
    mismatched: AtomicU64,
    trusted: AtomicU64,
    refused: AtomicU64,
}

/// Trusted documents and APQ registrations; see the module docs.
pub struct PersistedDocuments {
    trusted: Option<Arc<TrustedDocuments>>,
    require: bool,
    apq: Option<moka::sync::Cache<[u8; 32], Kept, PrehashedKeys>>,
    apq_bytes: u64,
    /// The fleet's Redis, when the cache's storage is Redis.
    shared: Option<RedisStorage>,
    counters: Counters,
}

/// How long a registration stays in the fleet's Redis.
const SHARED_FOR: Duration = Duration::from_secs(24 * 3600);

/// The Redis key of a registration.
fn shared_key(hash: &[u8; 32]) -> CacheKey {
    let mut bytes = Vec::with_capacity(36);
    bytes.extend_from_slice(b"apq:");
    bytes.extend_from_slice(hash);
    CacheKey::from_bytes(&bytes)
}

/// What an APQ entry weighs: its text, its hash and key, and moka's own entry.
fn weight(kept: &Kept) -> u32 {
    u32::try_from(kept.text.len() + 32 + 16 + 96).unwrap_or(u32::MAX)
}

impl std::fmt::Debug for PersistedSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistedSettings")
            .field("trusted", &self.trusted.as_ref().map(|t| t.len()))
            .field("require", &self.require)
            .field("apq_bytes", &self.apq_bytes)
            .finish()
    }
}

impl PersistedDocuments {
    /// The store of `settings`; registrations are shared through `shared` (the Redis
    /// of `--storage redis|layered`) when given.
    pub fn new(settings: &PersistedSettings, shared: Option<RedisStorage>) -> PersistedDocuments {
        let apq = (settings.apq_bytes > 0).then(|| {
            moka::sync::Cache::builder()
                .max_capacity(settings.apq_bytes)
                .weigher(|_: &[u8; 32], kept: &Kept| weight(kept))
                // The key is a SHA-256 already: hashing it again would be wasted work.
                .build_with_hasher(PrehashedKeys)
        });
        PersistedDocuments {
            trusted: settings.trusted.clone(),
            require: settings.require,
            apq,
            apq_bytes: settings.apq_bytes,
            shared: shared.filter(|_| settings.apq_bytes > 0),
            counters: Counters::default(),
        }
    }

    /// The document a request runs: its own text, or the one its name stands for.
    pub async fn resolve<'r>(
        &self,
        query: Option<&'r str>,
        naming: Option<&Naming<'_>>,
    ) -> Result<Resolved<'r>, Refused> {
        let mut answer = self.lookup(query, naming);
        if let (Err(refused), Some(Naming::Hash(hash))) = (&answer, naming) {
            if refused.code == NOT_FOUND {
                if let Some(kept) = self.fleet_lookup(hash).await {
                    answer = Ok(Resolved::Kept(kept));
                }
            }
        }
        if let Err(refused) = &answer {
            match refused.code {
                NOT_FOUND => &self.counters.apq_misses,
                MISMATCH => &self.counters.mismatched,
                _ => &self.counters.refused,
            }
            .fetch_add(1, Relaxed);
        }
        answer
    }

    fn lookup<'r>(
        &self,
        query: Option<&'r str>,
        naming: Option<&Naming<'_>>,
    ) -> Result<Resolved<'r>, Refused> {
        let trusted = |id: &str| {
            let kept = self.trusted.as_deref()?.get(id)?;
            self.counters.trusted.fetch_add(1, Relaxed);
            Some(Resolved::Kept(kept.clone()))
        };
        match (query, naming) {
            (Some(text), None) => {
                if self.require {
                    return Err(id_required());
                }
                Ok(Resolved::Sent {
                    text,
                    register: None,
                })
            }
            (_, Some(Naming::DocumentId(id))) => {
                if self.trusted.is_none() {
                    return Err(Refused::new(
                        NOT_SUPPORTED,
                        "this gateway has no trusted documents (--persisted-documents): \"documentId\" names nothing",
                    ));
                }
                trusted(id).ok_or_else(|| not_in_list(id))
            }
            (None, Some(Naming::Hash(hash))) => {
                if let Some(found) = trusted(hash) {
                    return Ok(found);
                }
                if self.require {
                    return Err(not_in_list(hash));
                }
                let digest = parse_hash(hash)?;
                let apq = self.apq()?;
                match apq.get(&digest) {
                    Some(kept) => {
                        self.counters.apq_hits.fetch_add(1, Relaxed);
                        Ok(Resolved::Kept(kept))
                    }
                    None => Err(Refused::new(NOT_FOUND, "PersistedQueryNotFound")),
                }
            }
            (Some(text), Some(Naming::Hash(hash))) => {
                if self.require {
                    return Err(id_required());
                }
                let digest = parse_hash(hash)?;
                self.apq()?;
                let actual: [u8; 32] = Sha256::digest(text.as_bytes()).into();
                if actual != digest {
                    return Err(Refused::new(
                        MISMATCH,
                        format!(
                            "provided sha does not match query: the document's SHA-256 is {}, the request's sha256Hash {hash}",
                            hex(&actual)
                        ),
                    ));
                }
                Ok(Resolved::Sent {
                    text,
                    register: Some(digest),
                })
            }
            (None, None) => Err(Refused::new(
                "BAD_REQUEST",
                "the request has no \"query\", \"documentId\" or persisted query hash",
            )),
        }
    }

    fn apq(&self) -> Result<&moka::sync::Cache<[u8; 32], Kept, PrehashedKeys>, Refused> {
        self.apq.as_ref().ok_or_else(|| {
            Refused::new(
                NOT_SUPPORTED,
                "PersistedQueryNotSupported: automatic persisted queries are off (--apq-cache-bytes 0)",
            )
        })
    }

    /// The document the fleet's Redis holds under `hash`, kept here too; `None` when
    /// there is no such Redis, it holds nothing there, or what it holds is not the
    /// hash's text.
    async fn fleet_lookup(&self, hash: &str) -> Option<Kept> {
        let (shared, apq) = (self.shared.as_ref()?, self.apq.as_ref()?);
        let digest = parse_hash(hash).ok()?;
        let stored = shared.get(shared_key(&digest)).await.ok()??;
        let text = std::str::from_utf8(&stored.value).ok()?;
        let actual: [u8; 32] = Sha256::digest(text.as_bytes()).into();
        if actual != digest {
            return None;
        }
        let kept = Kept {
            key: DocumentKey::of(text),
            text: Arc::from(text),
        };
        apq.insert(digest, kept.clone());
        self.counters.shared_hits.fetch_add(1, Relaxed);
        Some(kept)
    }

    /// Register `text` (parsed and validated) under its SHA-256 `hash`, here and in
    /// the fleet's Redis (written in the background, bounded by the Redis command
    /// timeout).
    pub fn register(&self, hash: [u8; 32], text: &Arc<str>, key: DocumentKey) {
        let Some(apq) = &self.apq else {
            return;
        };
        if apq.contains_key(&hash) {
            return;
        }
        self.counters.registered.fetch_add(1, Relaxed);
        let kept = Kept {
            text: text.clone(),
            key,
        };
        apq.insert(hash, kept);
        if let Some(shared) = self.shared.clone() {
            let now = Instant::now();
            let entry = Entry {
                value: bytes::Bytes::copy_from_slice(text.as_bytes()),
                fresh_until: now + SHARED_FOR,
                stale_until: now + SHARED_FOR,
                fetched_in: Duration::ZERO,
                references: Arc::from([]),
                namespace: Arc::from("persisted.apq"),
            };
            tokio::spawn(async move {
                let _ = shared.set(shared_key(&hash), entry, SHARED_FOR).await;
            });
        }
    }

    /// Prometheus text: `gateway_persisted_documents_total{outcome}`,
    /// `gateway_apq_store_{bytes,entries,capacity_bytes}` and
    /// `gateway_trusted_documents`.
    pub fn prometheus(&self) -> String {
        use crate::server::metrics::family;
        let c = &self.counters;
        let mut out = String::with_capacity(1024);
        family(
            &mut out,
            "counter",
            "gateway_persisted_documents_total",
            "Requests that named a persisted document, or were asked to, by what became of them.",
            [
                ("outcome=\"apq_hit\"", c.apq_hits.load(Relaxed)),
                ("outcome=\"apq_fleet_hit\"", c.shared_hits.load(Relaxed)),
                ("outcome=\"apq_not_found\"", c.apq_misses.load(Relaxed)),
                ("outcome=\"apq_registered\"", c.registered.load(Relaxed)),
                ("outcome=\"hash_mismatch\"", c.mismatched.load(Relaxed)),
                ("outcome=\"trusted\"", c.trusted.load(Relaxed)),
                ("outcome=\"refused\"", c.refused.load(Relaxed)),
            ],
        );
        let (bytes, entries) = match &self.apq {
            Some(apq) => {
                apq.run_pending_tasks();
                (apq.weighted_size(), apq.entry_count())
            }
            None => (0, 0),
        };
        let trusted = self.trusted.as_ref().map_or(0, |t| t.len() as u64);
        let gauges = [
            (
                "gateway_apq_store_bytes",
                "Bytes the APQ store holds, by its weigher.",
                bytes,
            ),
            (
                "gateway_apq_store_entries",
                "Documents the APQ store holds.",
                entries,
            ),
            (
                "gateway_apq_store_capacity_bytes",
                "The APQ store's bound (--apq-cache-bytes).",
                self.apq_bytes,
            ),
            (
                "gateway_trusted_documents",
                "Documents read from --persisted-documents.",
                trusted,
            ),
        ];
        for (name, help, value) in gauges {
            family(&mut out, "gauge", name, help, [("", value)]);
        }
        out
    }
}

const NOT_FOUND: &str = "PERSISTED_QUERY_NOT_FOUND";
const NOT_SUPPORTED: &str = "PERSISTED_QUERY_NOT_SUPPORTED";
const MISMATCH: &str = "PERSISTED_QUERY_HASH_MISMATCH";

fn id_required() -> Refused {
    Refused::new(
        "PERSISTED_QUERY_ID_REQUIRED",
        "this gateway runs only trusted documents (--require-persisted): name one by \"documentId\" or extensions.persistedQuery.sha256Hash, without its text",
    )
}

fn not_in_list(id: &str) -> Refused {
    Refused::new(
        "PERSISTED_QUERY_NOT_IN_LIST",
        format!("no trusted document has the id {id:?} (--persisted-documents)"),
    )
}

/// A `sha256Hash`: 64 hexadecimal digits, in either case.
fn parse_hash(hash: &str) -> Result<[u8; 32], Refused> {
    let bad = || {
        Refused::new(
            "PERSISTED_QUERY_HASH_INVALID",
            format!("sha256Hash must be 64 hexadecimal digits, not {hash:?}"),
        )
    };
    let digits = hash.as_bytes();
    if digits.len() != 64 {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, pair) in digits.chunks(2).enumerate() {
        let nibble = |d: u8| (d as char).to_digit(16);
        match (nibble(pair[0]), nibble(pair[1])) {
            (Some(high), Some(low)) => out[i] = (high * 16 + low) as u8,
            _ => return Err(bad()),
        }
    }
    Ok(out)
}

/// Lower-case hexadecimal.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_is_read_in_either_case_and_refused_when_malformed() {
        let digest: [u8; 32] = Sha256::digest(b"{ me { id } }").into();
        let text = hex(&digest);
        assert_eq!(parse_hash(&text).unwrap(), digest);
        assert_eq!(parse_hash(&text.to_uppercase()).unwrap(), digest);
        for bad in ["", "abc", &text[1..], &format!("{}g", &text[1..])] {
            assert_eq!(
                parse_hash(bad).unwrap_err().code,
                "PERSISTED_QUERY_HASH_INVALID"
            );
        }
    }

    #[test]
    fn a_manifest_and_a_map_give_the_same_documents() {
        let manifest = r#"{"format":"apollo-persisted-query-manifest","version":1,
            "operations":[{"id":"a1","name":"Me","type":"query","body":"query Me { me { id } }"}]}"#;
        let map = r#"{"a1":"query Me { me { id } }"}"#;
        for text in [manifest, map] {
            let trusted = TrustedDocuments::parse(text).unwrap();
            assert_eq!(trusted.len(), 1);
            assert_eq!(&*trusted.get("a1").unwrap().text, "query Me { me { id } }");
        }
    }

    #[test]
    fn a_bad_file_is_refused_naming_what_is_wrong() {
        let cases = [
            ("[]", "expected a JSON object"),
            (r#"{"format":"other"}"#, "\"format\" is \"other\""),
            (
                r#"{"format":"apollo-persisted-query-manifest","version":2,"operations":[]}"#,
                "\"version\" must be 1",
            ),
            (
                r#"{"format":"apollo-persisted-query-manifest","version":1,"operations":[{"id":"x"}]}"#,
                "operations[0] has no \"body\"",
            ),
            (r#"{"x":1}"#, "id \"x\" is not a string"),
            (r#"{"x":"{ me { "}"#, "id \"x\" does not parse"),
        ];
        for (text, expected) in cases {
            let error = TrustedDocuments::parse(text).err().unwrap();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
