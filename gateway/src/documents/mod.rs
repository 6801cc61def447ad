//! The parsed-document cache, bounded in bytes.
//!
//! Parsing is a fifth of the gateway's CPU per request once resolvers are cheap (seen
//! in the TTL-0 flamegraph). Documents are kept by the 128-bit xxh3 hash of their text;
//! variables are not part of the key, so a document sent with new variables is a hit.
//!
//! **Why xxh3 and not SHA-256** (Apollo's choice): `benches/document_key.rs` measures
//! both on the lab's 1-, 100- and 1000-field documents, and xxh3 is many times faster
//! (figures in docs/documents.md). A cryptographic hash would buy resistance to crafted
//! collisions, but the cache does not rely on the hash for correctness: each entry
//! keeps the document's text, and a hit is a hit only when the texts are equal. A
//! collision, crafted or not, costs one parse, never a wrong document. The text is
//! weighed with the entry.
//!
//! **The bound is in bytes, and it holds.** Each entry is weighed by an estimate of
//! its real heap size ([`heap_size`]: every allocation of the syntax tree, with the
//! allocator's chunk overhead), not by the length of its text: a parsed document is
//! many times larger than its text. The store is moka, whose TinyLFU admission keeps a
//! flood of one-off documents (clients inlining literals) from evicting the documents
//! that are asked for again and again.
//!
//! **With each document, its plans.** A plan ([`crate::plan::Plan`]) is compiled per
//! operation and per combination of the values of the variables its
//! `@skip`/`@include` read; it holds every subgraph request text, so a cached
//! document skips planning as well as parsing and validation. An entry never
//! changes once stored: a request that compiles a plan the entry lacks stores a new
//! entry with it, so the weigher always sees everything an entry holds, and the
//! byte bound covers the plans too.
//!
//! **Only documents that validated are kept.** A document enters the cache after its
//! request was executed, so a syntax error is never stored and a document that failed
//! validation is not either: failing documents cannot crowd out good ones, and each
//! one is rejected again (cheaply, since it is usually small) when it is resent.

mod admission;
pub mod cost;
pub mod lexical;
pub mod limits;
mod operation;
pub mod persisted;
pub mod validation;
mod variables;
mod weigh;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use async_graphql_parser::types::ExecutableDocument;

pub use admission::{admit, Refusal};
pub use limits::DocumentLimits;
pub use operation::operation;
pub use variables::check_variables;
pub use weigh::heap_size;

use cache_core::key::PrehashedKeys;

use crate::plan::{Conditions, Plan};

/// The cache key: a 128-bit hash of the document text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DocumentKey(u128);

impl DocumentKey {
    pub fn of(text: &str) -> DocumentKey {
        DocumentKey(xxhash_rust::xxh3::xxh3_128(text.as_bytes()))
    }
}

/// One compiled plan: for which operation, and which `@skip`/`@include` values.
#[derive(Clone)]
pub struct KeptPlan {
    pub operation: Option<Arc<str>>,
    /// The variables the operation's `@skip`/`@include` read.
    pub conditions_of: Arc<Conditions>,
    /// Their values for this plan ([`Conditions::key`]).
    pub conditions: u64,
    pub plan: Arc<Plan>,
    /// The operation's estimated cost ([`cost`]), when it reads no variable.
    pub cost: Option<u64>,
}

/// A cached document: its text (to confirm a hit), its parse and its plans.
#[derive(Clone)]
pub struct CachedDocument {
    pub text: Arc<str>,
    pub doc: Arc<ExecutableDocument>,
    pub plans: Arc<[KeptPlan]>,
}

impl CachedDocument {
    /// The plan for `operation` under `conditions`, if compiled before.
    pub fn plan(&self, operation: Option<&str>, conditions: u64) -> Option<&Arc<Plan>> {
        self.kept(operation, conditions).map(|p| &p.plan)
    }

    /// The plan kept for `operation` under `conditions`, with its cost.
    pub fn kept(&self, operation: Option<&str>, conditions: u64) -> Option<&KeptPlan> {
        self.plans
            .iter()
            .find(|p| p.conditions == conditions && p.operation.as_deref() == operation)
    }

    /// The same document with one more plan.
    pub fn with_plan(&self, kept: KeptPlan) -> CachedDocument {
        let mut plans: Vec<KeptPlan> = self.plans.to_vec();
        plans.push(kept);
        CachedDocument {
            text: self.text.clone(),
            doc: self.doc.clone(),
            plans: plans.into(),
        }
    }

    /// Estimated heap bytes of the entry.
    fn weight(&self) -> usize {
        weigh::entry_size(&self.text, &self.doc)
            + weigh::chunk(self.plans.len() * std::mem::size_of::<KeptPlan>())
            + self
                .plans
                .iter()
                .map(|p| p.plan.heap_size + p.operation.as_ref().map_or(0, |o| 16 + o.len()))
                .sum::<usize>()
    }
}

/// Most plans one document keeps (operations × `@skip`/`@include` combinations); a
/// request beyond them compiles its plan and does not keep it.
const MAX_PLANS: usize = 16;

/// Parsed documents and their plans, bounded by their estimated heap size.
pub struct DocumentCache {
    store: Option<moka::sync::Cache<DocumentKey, CachedDocument, PrehashedKeys>>,
    max_bytes: u64,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: Arc<AtomicU64>,
}

impl DocumentCache {
    /// A cache of at most `max_bytes`; `0` disables it.
    pub fn new(max_bytes: u64) -> DocumentCache {
        let evictions = Arc::new(AtomicU64::new(0));
        let store = (max_bytes > 0).then(|| {
            let counted = evictions.clone();
            moka::sync::Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|_: &DocumentKey, entry: &CachedDocument| {
                    u32::try_from(entry.weight()).unwrap_or(u32::MAX)
                })
                .eviction_listener(move |_, _, cause| {
                    if cause.was_evicted() {
                        counted.fetch_add(1, Relaxed);
                    }
                })
                // The key is already a hash: hashing it again would be wasted work.
                .build_with_hasher(PrehashedKeys)
        });
        DocumentCache {
            store,
            max_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions,
        }
    }

    /// The cached document of `text` (whose key is `key`), counting a hit or a miss.
    /// An entry under the same key for another text (a hash collision) is a miss.
    pub fn get(&self, key: DocumentKey, text: &str) -> Option<CachedDocument> {
        let store = self.store.as_ref()?;
        match store.get(&key) {
            Some(entry) if *entry.text == *text => {
                self.hits.fetch_add(1, Relaxed);
                Some(entry)
            }
            _ => {
                self.misses.fetch_add(1, Relaxed);
                None
            }
        }
    }

    /// Keep `document` (one that parsed and validated) under `key`, replacing what
    /// was there: it is weighed again, plans included.
    pub fn insert(&self, key: DocumentKey, document: CachedDocument) {
        if let Some(store) = &self.store {
            store.insert(key, document);
        }
    }

    /// Keep `document` with one more plan, unless it already keeps the most.
    pub fn add_plan(&self, key: DocumentKey, document: &CachedDocument, kept: KeptPlan) {
        if document.plans.len() < MAX_PLANS {
            self.insert(key, document.with_plan(kept));
        }
    }

    /// Estimated bytes held, after moka's pending maintenance (evictions) has run.
    pub fn bytes(&self) -> u64 {
        match &self.store {
            Some(store) => {
                store.run_pending_tasks();
                store.weighted_size()
            }
            None => 0,
        }
    }

    pub fn entries(&self) -> u64 {
        self.store.as_ref().map_or(0, |s| s.entry_count())
    }

    /// Prometheus text: `gateway_document_cache_{hits,misses,evictions}_total`,
    /// `gateway_document_cache_bytes`, `gateway_document_cache_capacity_bytes`.
    pub fn prometheus(&self) -> String {
        use crate::server::metrics::family;
        let mut out = String::with_capacity(1024);
        let counters = [
            ("hits", "documents found parsed", &self.hits),
            (
                "misses",
                "documents parsed because they were not cached",
                &self.misses,
            ),
            (
                "evictions",
                "documents dropped to stay within the byte bound",
                &*self.evictions,
            ),
        ];
        for (name, help, n) in counters {
            let name = format!("gateway_document_cache_{name}_total");
            family(
                &mut out,
                "counter",
                &name,
                &format!("Parsed-document cache: {help}."),
                [("", n.load(Relaxed))],
            );
        }
        family(
            &mut out,
            "gauge",
            "gateway_document_cache_bytes",
            "Estimated heap bytes held by the parsed-document cache.",
            [("", self.bytes())],
        );
        family(
            &mut out,
            "gauge",
            "gateway_document_cache_capacity_bytes",
            "The parsed-document cache's bound (--doc-cache-bytes).",
            [("", self.max_bytes)],
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(text: &str) -> Arc<Plan> {
        let sdl =
            r#"type Query { me: User } type User @key(fields: "id") { id: ID! name: String }"#;
        let subgraphs = [crate::supergraph::Subgraph {
            name: "user".into(),
            url: "http://user/graphql".into(),
        }];
        let planner = crate::plan::Planner::compose(&subgraphs, &[sdl.into()], false).unwrap();
        Arc::new(planner.compile_text(text, &Default::default()).unwrap())
    }

    #[test]
    fn plans_are_weighed_with_their_document_and_a_new_plan_is_a_new_entry() {
        let cache = DocumentCache::new(1 << 20);
        let text = "{ me { id name } }";
        let key = DocumentKey::of(text);
        let bare = CachedDocument {
            text: Arc::from(text),
            doc: Arc::new(async_graphql_parser::parse_query(text).unwrap()),
            plans: Arc::new([]),
        };
        cache.insert(key, bare.clone());
        let without = cache.bytes();
        let plan = plan_of(text);
        let kept = KeptPlan {
            operation: None,
            conditions_of: Arc::new(Conditions::default()),
            conditions: 0,
            plan: plan.clone(),
            cost: None,
        };
        cache.add_plan(key, &bare, kept);
        let with = cache.bytes();
        assert!(
            with >= without + plan.heap_size as u64,
            "{with} bytes with the plan, {without} without, plan {}",
            plan.heap_size
        );
        let hit = cache.get(key, text).expect("a hit");
        assert!(Arc::ptr_eq(hit.plan(None, 0).unwrap(), &plan));
        assert!(hit.plan(None, 1).is_none());
        assert!(hit.plan(Some("Other"), 0).is_none());
        // Another text under the same key (a collision) is a miss.
        assert!(cache.get(key, "{ me { name } }").is_none());
    }
}
