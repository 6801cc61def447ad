//! The parsed-document cache, bounded in bytes.
//!
//! Parsing is a fifth of the gateway's CPU per request once resolvers are cheap (seen
//! in the TTL-0 flamegraph). Documents are kept by the 128-bit xxh3 hash of their text;
//! variables are not part of the key, so a document sent with new variables is a hit.
//!
//! **Why xxh3 and not SHA-256** (Apollo's choice): `benches/document_key.rs` measures
//! both on the lab's 1-, 100- and 1000-field documents, and xxh3 is many times faster
//! (figures in the README). A cryptographic hash would buy resistance to crafted
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
//! **Only documents that validated are kept.** A document enters the cache after its
//! request was executed, so a syntax error is never stored and a document that failed
//! validation is not either: failing documents cannot crowd out good ones, and each
//! one is rejected again (cheaply, since it is usually small) when it is resent.
//! (async-graphql validates every request itself; the dynamic schema has no way to
//! hand it an already validated document, so what is cached is the parse.)

use std::collections::HashMap;
use std::mem::size_of;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use async_graphql_parser::types::{
    BaseType, Directive, DocumentOperations, ExecutableDocument, Field, OperationDefinition,
    Selection, SelectionSet, Type,
};
use async_graphql_parser::{Pos, Positioned};
use async_graphql_value::{ConstValue, Name, Value};

use crate::supergraph::{Kind, Supergraph};

/// The cache key: a 128-bit hash of the document text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DocumentKey(u128);

impl DocumentKey {
    pub fn of(text: &str) -> DocumentKey {
        DocumentKey(xxhash_rust::xxh3::xxh3_128(text.as_bytes()))
    }
}

/// One cached document: its text (to confirm a hit), its parse and its plans.
#[derive(Clone)]
struct Entry {
    text: Arc<str>,
    doc: Arc<ExecutableDocument>,
    plans: Arc<DocumentPlans>,
}

/// What the cache hands back for a document: its parse and its plans.
#[derive(Clone)]
pub struct CachedDocument {
    pub doc: Arc<ExecutableDocument>,
    pub plans: Arc<DocumentPlans>,
}

/// A root field's subgraph request, as the planner rendered it.
#[derive(Debug)]
pub struct RenderedRoot {
    /// The whole query text sent to the owner.
    pub query: String,
    /// Where the field's sub-selection starts in `query` (part of the cache key).
    pub selection_start: usize,
}

/// The per-document plan: the subgraph request of each root field, rendered once
/// and reused by every later request for the same document.
///
/// Only operations without variables use it (with variables, a rendered request may
/// depend on their values: arguments, `@skip(if: $x)`). It is filled while the
/// document's first request executes, *before* the document enters the cache, and
/// frozen when it does: so the weigher sees everything it will ever hold, and the
/// byte bound covers the plans too.
#[derive(Debug, Default)]
pub struct DocumentPlans {
    roots: std::sync::RwLock<HashMap<(Pos, usize), Arc<RenderedRoot>>>,
    frozen: std::sync::atomic::AtomicBool,
}

impl DocumentPlans {
    /// The rendered request of the root field at `pos` for subgraph `subgraph`.
    pub fn root(&self, pos: Pos, subgraph: usize) -> Option<Arc<RenderedRoot>> {
        let roots = self.roots.read().unwrap_or_else(|p| p.into_inner());
        roots.get(&(pos, subgraph)).cloned()
    }

    /// Keep a rendered request, unless the plans are already in the cache.
    pub fn remember(&self, pos: Pos, subgraph: usize, rendered: Arc<RenderedRoot>) {
        if self.frozen.load(Relaxed) {
            return;
        }
        let mut roots = self.roots.write().unwrap_or_else(|p| p.into_inner());
        roots.insert((pos, subgraph), rendered);
    }

    fn freeze(&self) {
        self.frozen.store(true, Relaxed);
    }

    /// Estimated heap bytes.
    fn heap_size(&self) -> usize {
        let roots = self.roots.read().unwrap_or_else(|p| p.into_inner());
        map_bytes(&roots)
            + roots
                .values()
                .map(|r| chunk(size_of::<RenderedRoot>() + 16) + chunk(r.query.capacity()))
                .sum::<usize>()
    }
}

/// Parsed documents, bounded by their estimated heap size.
pub struct DocumentCache {
    store: Option<moka::sync::Cache<DocumentKey, Entry>>,
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
                .weigher(|_: &DocumentKey, entry: &Entry| {
                    let size = entry_size(&entry.text, &entry.doc) + entry.plans.heap_size();
                    u32::try_from(size).unwrap_or(u32::MAX)
                })
                .eviction_listener(move |_, _, cause| {
                    if cause.was_evicted() {
                        counted.fetch_add(1, Relaxed);
                    }
                })
                .build()
        });
        DocumentCache {
            store,
            max_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions,
        }
    }

    /// The cached parse of `text` (whose key is `key`), counting a hit or a miss. An
    /// entry under the same key for another text (a hash collision) is a miss.
    pub fn get(&self, key: DocumentKey, text: &str) -> Option<CachedDocument> {
        let store = self.store.as_ref()?;
        match store.get(&key) {
            Some(entry) if *entry.text == *text => {
                self.hits.fetch_add(1, Relaxed);
                Some(CachedDocument {
                    doc: entry.doc,
                    plans: entry.plans,
                })
            }
            _ => {
                self.misses.fetch_add(1, Relaxed);
                None
            }
        }
    }

    /// Keep `doc`, the parse of `text` (a document that parsed and validated), with
    /// the plans its first request rendered. The plans are frozen from now on.
    pub fn insert(&self, key: DocumentKey, text: &str, document: CachedDocument) {
        if let Some(store) = &self.store {
            document.plans.freeze();
            store.insert(
                key,
                Entry {
                    text: Arc::from(text),
                    doc: document.doc,
                    plans: document.plans,
                },
            );
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
        use crate::metrics::family;
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

/// What one cache entry costs: the document's heap, its `Arc`, its text (in an
/// `Arc<str>`), and moka's own per-entry bookkeeping (key, hash, deque nodes,
/// frequency sketch share).
fn entry_size(text: &str, doc: &ExecutableDocument) -> usize {
    const MOKA_ENTRY_OVERHEAD: usize = 160;
    heap_size(doc)
        + chunk(size_of::<ExecutableDocument>() + 16)
        + chunk(16 + text.len())
        + MOKA_ENTRY_OVERHEAD
}

/// The heap bytes of one allocation of `n` bytes under glibc malloc: 8 bytes of header,
/// rounded up to 16, at least 32.
fn chunk(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        ((n + 8 + 15) & !15).max(32)
    }
}

fn vec_bytes<T>(v: &Vec<T>) -> usize {
    chunk(v.capacity() * size_of::<T>())
}

fn name_bytes(n: &Name) -> usize {
    // `Name` is an `Arc<str>`: two counters, then the text.
    chunk(16 + n.len())
}

fn map_bytes<K, V>(m: &HashMap<K, V>) -> usize {
    if m.capacity() == 0 {
        return 0;
    }
    // hashbrown: a power-of-two number of buckets (7/8 usable), one control byte each.
    let buckets = (m.capacity() * 8 / 7).next_power_of_two();
    chunk(buckets * (size_of::<(K, V)>() + 1) + 16)
}

/// An estimate of the heap bytes a parsed document owns.
pub fn heap_size(doc: &ExecutableDocument) -> usize {
    let mut total = 0;
    match &doc.operations {
        DocumentOperations::Single(op) => total += operation(&op.node),
        DocumentOperations::Multiple(ops) => {
            total += map_bytes(ops);
            for (name, op) in ops {
                total += name_bytes(name) + operation(&op.node);
            }
        }
    }
    total += map_bytes(&doc.fragments);
    for (name, fragment) in &doc.fragments {
        let f = &fragment.node;
        total += name_bytes(name) + name_bytes(&f.type_condition.node.on.node);
        total += directives(&f.directives) + selection_set(&f.selection_set.node);
    }
    total
}

fn operation(op: &OperationDefinition) -> usize {
    let mut total = vec_bytes(&op.variable_definitions) + directives(&op.directives);
    for var in &op.variable_definitions {
        let v = &var.node;
        total += name_bytes(&v.name.node) + ty(&v.var_type.node) + directives(&v.directives);
        total += v.default_value.as_ref().map_or(0, |d| const_value(&d.node));
    }
    total + selection_set(&op.selection_set.node)
}

fn ty(t: &Type) -> usize {
    match &t.base {
        BaseType::Named(n) => name_bytes(n),
        BaseType::List(inner) => chunk(size_of::<Type>()) + ty(inner),
    }
}

fn selection_set(set: &SelectionSet) -> usize {
    let mut total = vec_bytes(&set.items);
    for item in &set.items {
        total += match &item.node {
            Selection::Field(f) => field(&f.node),
            Selection::FragmentSpread(s) => {
                name_bytes(&s.node.fragment_name.node) + directives(&s.node.directives)
            }
            Selection::InlineFragment(i) => {
                let cond = i
                    .node
                    .type_condition
                    .as_ref()
                    .map_or(0, |c| name_bytes(&c.node.on.node));
                cond + directives(&i.node.directives) + selection_set(&i.node.selection_set.node)
            }
        };
    }
    total
}

fn field(f: &Field) -> usize {
    let mut total = name_bytes(&f.name.node) + f.alias.as_ref().map_or(0, |a| name_bytes(&a.node));
    total += arguments(&f.arguments) + directives(&f.directives);
    total + selection_set(&f.selection_set.node)
}

fn arguments(args: &Vec<(Positioned<Name>, Positioned<Value>)>) -> usize {
    vec_bytes(args)
        + args
            .iter()
            .map(|(n, v)| name_bytes(&n.node) + value(&v.node))
            .sum::<usize>()
}

fn directives(dirs: &Vec<Positioned<Directive>>) -> usize {
    vec_bytes(dirs)
        + dirs
            .iter()
            .map(|d| name_bytes(&d.node.name.node) + arguments(&d.node.arguments))
            .sum::<usize>()
}

fn value(v: &Value) -> usize {
    match v {
        Value::Variable(n) | Value::Enum(n) => name_bytes(n),
        Value::String(s) => chunk(s.capacity()),
        Value::Binary(b) => chunk(b.len()),
        Value::List(items) => vec_bytes(items) + items.iter().map(value).sum::<usize>(),
        Value::Object(map) => {
            index_map(map.len(), size_of::<(Name, Value)>())
                + map
                    .iter()
                    .map(|(k, v)| name_bytes(k) + value(v))
                    .sum::<usize>()
        }
        Value::Null | Value::Number(_) | Value::Boolean(_) => 0,
    }
}

fn const_value(v: &ConstValue) -> usize {
    match v {
        ConstValue::Enum(n) => name_bytes(n),
        ConstValue::String(s) => chunk(s.capacity()),
        ConstValue::Binary(b) => chunk(b.len()),
        ConstValue::List(items) => vec_bytes(items) + items.iter().map(const_value).sum::<usize>(),
        ConstValue::Object(map) => {
            index_map(map.len(), size_of::<(Name, ConstValue)>())
                + map
                    .iter()
                    .map(|(k, v)| name_bytes(k) + const_value(v))
                    .sum::<usize>()
        }
        ConstValue::Null | ConstValue::Number(_) | ConstValue::Boolean(_) => 0,
    }
}

/// indexmap: a vector of (hash, key, value) entries plus a table of indices.
fn index_map(len: usize, pair: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let buckets = (len * 8 / 7).next_power_of_two();
    chunk(len * (pair + 8)) + chunk(buckets * (size_of::<usize>() + 1) + 16)
}

/// Why a document is refused before async-graphql sees it.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal(pub String);

/// Checks async-graphql cannot make cheaply: the number of fields once fragments are
/// expanded (nested spreads double it at each level, and async-graphql's own count
/// walks every expansion, so a 1 KB document could keep a core busy for seconds),
/// the number of root fields (each is one subgraph request), and aliases that would
/// collide with the planner's reserved `_gw_k_` key aliases.
pub fn admit(
    doc: &ExecutableDocument,
    max_fields: usize,
    max_root_fields: usize,
) -> Result<(), Refusal> {
    let mut counter = FieldCounter {
        doc,
        memo: HashMap::new(),
    };
    for (_, op) in doc.operations.iter() {
        let op = &op.node;
        let total = counter.count(&op.selection_set.node);
        if total > max_fields as u64 {
            return Err(Refusal(format!(
                "the operation selects {total} fields (fragments expanded); the limit is {max_fields}"
            )));
        }
        let roots = counter.roots(&op.selection_set.node, 0);
        if roots > max_root_fields as u64 {
            return Err(Refusal(format!(
                "the operation has {roots} root fields; the limit is {max_root_fields}"
            )));
        }
        reserved_aliases(&op.selection_set.node)?;
    }
    for (_, fragment) in &doc.fragments {
        reserved_aliases(&fragment.node.selection_set.node)?;
    }
    Ok(())
}

struct FieldCounter<'d> {
    doc: &'d ExecutableDocument,
    /// Expanded size per fragment; `None` while it is being counted (a cycle, which
    /// async-graphql rejects itself, counts 0 here).
    memo: HashMap<&'d str, Option<u64>>,
}

impl<'d> FieldCounter<'d> {
    fn count(&mut self, set: &'d SelectionSet) -> u64 {
        let mut total: u64 = 0;
        for item in &set.items {
            let n = match &item.node {
                Selection::Field(f) => 1u64.saturating_add(self.count(&f.node.selection_set.node)),
                Selection::InlineFragment(i) => self.count(&i.node.selection_set.node),
                Selection::FragmentSpread(s) => self.fragment(s.node.fragment_name.node.as_str()),
            };
            total = total.saturating_add(n);
        }
        total
    }

    fn fragment(&mut self, name: &'d str) -> u64 {
        match self.memo.get(name) {
            Some(Some(n)) => return *n,
            Some(None) => return 0,
            None => {}
        }
        let Some(fragment) = self.doc.fragments.get(name) else {
            return 0;
        };
        self.memo.insert(name, None);
        let n = self.count(&fragment.node.selection_set.node);
        self.memo.insert(name, Some(n));
        n
    }

    /// Fields at the top level of `set`, through fragments (bounded against cycles).
    fn roots(&self, set: &'d SelectionSet, depth: usize) -> u64 {
        if depth > 64 {
            return 0;
        }
        set.items
            .iter()
            .map(|item| match &item.node {
                Selection::Field(_) => 1,
                Selection::InlineFragment(i) => self.roots(&i.node.selection_set.node, depth + 1),
                Selection::FragmentSpread(s) => self
                    .doc
                    .fragments
                    .get(&s.node.fragment_name.node)
                    .map_or(0, |f| self.roots(&f.node.selection_set.node, depth + 1)),
            })
            .fold(0u64, u64::saturating_add)
    }
}

fn reserved_aliases(set: &SelectionSet) -> Result<(), Refusal> {
    for item in &set.items {
        match &item.node {
            Selection::Field(f) => {
                if let Some(alias) = &f.node.alias {
                    if alias.node.starts_with(crate::supergraph::KEY_ALIAS_PREFIX) {
                        return Err(Refusal(format!(
                            "the alias {} is reserved: aliases starting with {} belong to the gateway",
                            alias.node,
                            crate::supergraph::KEY_ALIAS_PREFIX
                        )));
                    }
                }
                reserved_aliases(&f.node.selection_set.node)?;
            }
            Selection::InlineFragment(i) => reserved_aliases(&i.node.selection_set.node)?,
            Selection::FragmentSpread(_) => {}
        }
    }
    Ok(())
}

/// Check that every variable `op` declares has a value (sent, or its default) that
/// fits its declared type, as input coercion requires; the error names the variable.
/// Variables sent but not declared are ignored, as the spec's coercion does. For a
/// cached document this is the part of validation that changes per request.
pub fn check_variables(
    op: &OperationDefinition,
    variables: &async_graphql::Variables,
    sg: &Supergraph,
) -> Result<(), Refusal> {
    for def in &op.variable_definitions {
        let def = &def.node;
        let ty = &def.var_type.node;
        let value = variables
            .get(&def.name.node)
            .or_else(|| def.default_value.as_ref().map(|d| &d.node));
        let ok = match value {
            Some(v) => fits(v, ty, sg),
            None => ty.nullable,
        };
        if !ok {
            let got = value.map_or("nothing".to_string(), |v| v.to_string());
            return Err(Refusal(format!(
                "variable ${} of type {ty} got {got}",
                def.name.node
            )));
        }
    }
    Ok(())
}

fn fits(value: &ConstValue, ty: &Type, sg: &Supergraph) -> bool {
    if matches!(value, ConstValue::Null) {
        return ty.nullable;
    }
    match &ty.base {
        BaseType::List(inner) => match value {
            ConstValue::List(items) => items.iter().all(|v| fits(v, inner, sg)),
            single => fits(single, inner, sg), // input coercion of a single value
        },
        BaseType::Named(name) => match (name.as_str(), value) {
            ("Int", ConstValue::Number(n)) => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
            ("Float", ConstValue::Number(_)) => true,
            ("String", ConstValue::String(_)) => true,
            ("Boolean", ConstValue::Boolean(_)) => true,
            ("ID", ConstValue::String(_)) => true,
            ("ID", ConstValue::Number(n)) => n.is_i64() || n.is_u64(),
            (other, v) => match sg.types.get(other).map(|t| &t.kind) {
                Some(Kind::Enum(values)) => match v {
                    ConstValue::String(s) => values.iter().any(|e| e == s),
                    ConstValue::Enum(n) => values.iter().any(|e| e.as_str() == n.as_str()),
                    _ => false,
                },
                Some(Kind::InputObject(fields)) => match v {
                    ConstValue::Object(map) => {
                        map.keys()
                            .all(|k| fields.iter().any(|f| f.name == k.as_str()))
                            && fields.iter().all(|f| match map.get(f.name.as_str()) {
                                Some(v) => fits(v, &f.ty, sg),
                                None => f.ty.nullable || f.default.is_some(),
                            })
                    }
                    _ => false,
                },
                Some(Kind::Scalar) => true,
                _ => false,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(query: &str) -> Arc<RenderedRoot> {
        Arc::new(RenderedRoot {
            query: query.to_string(),
            selection_start: 1,
        })
    }

    #[test]
    fn plans_are_weighed_and_frozen_when_cached() {
        let cache = DocumentCache::new(1 << 20);
        let text = "{ me { id } }";
        let doc = Arc::new(async_graphql_parser::parse_query(text).unwrap());
        let plans = Arc::new(DocumentPlans::default());
        let pos = Pos { line: 1, column: 3 };
        plans.remember(pos, 0, rendered(&"x".repeat(4000)));
        let key = DocumentKey::of(text);
        cache.insert(
            key,
            text,
            CachedDocument {
                doc: doc.clone(),
                plans: plans.clone(),
            },
        );
        // The 4000-byte rendered request is part of the entry's weight.
        assert!(cache.bytes() as usize > entry_size(text, &doc) + 4000);
        let hit = cache.get(key, text).expect("a hit");
        assert_eq!(hit.plans.root(pos, 0).unwrap().query.len(), 4000);
        // Frozen: nothing more can grow an entry after it was weighed.
        hit.plans
            .remember(Pos { line: 1, column: 9 }, 0, rendered("y"));
        assert!(hit.plans.root(Pos { line: 1, column: 9 }, 0).is_none());
        // Another text under the same key (a collision) is a miss.
        assert!(cache.get(key, "{ me { name } }").is_none());
    }
}
