//! The parsed-document cache: each distinct query text is parsed once, and later
//! requests with the same text start from a copy of the parsed document.
//!
//! async-graphql parses every request's text with a PEG parser (pest). Profiles of the
//! seed query's subgraph requests show that parsing is the largest single cost of a
//! request: about 40% of post-service's CPU on the `_entities` request, whose text is
//! four times as long as a root query's. The gateway sends a handful of distinct texts
//! (variables carry the keys), so nearly every request can skip the parser.
//!
//! The document is handed to async-graphql through `Request::set_parsed_query`, ahead of
//! `Schema::execute`: the schema still checks its recursion depth and directive limits
//! and still validates it against the request's variables, so answers and errors are
//! the same as without the cache. A copy is handed over because execution edits its
//! document (it removes `@skip`ped selections for the request's variables). A text
//! that fails to parse is not kept; async-graphql parses it again and reports the
//! error exactly as it always did.
//!
//! The cache is bounded by `--document-cache-bytes` (moka, TinyLFU admission, LRU
//! eviction). Each entry weighs its text plus the heap of its parsed document, which
//! [`heap`] adds up from the document's shape (`tests/document_weight.rs` holds it to
//! the allocator's figure), plus a fixed [`ENTRY_OVERHEAD`]. Text length alone would not
//! do: a parsed document takes from 2 to over 100 bytes of heap per byte of text,
//! depending on how its text nests.

use std::collections::HashMap;
use std::mem::size_of;
use std::sync::Arc;

use async_graphql::parser::types::{
    BaseType, DocumentOperations, ExecutableDocument, Field, Selection, SelectionSet, Type,
    VariableDefinition,
};
use async_graphql::parser::Positioned;
use async_graphql::Request;
use async_graphql_value::{Name, Value};

use crate::validated::Validated;

/// Bytes per entry beyond the text and the document: the cache's own bookkeeping.
pub const ENTRY_OVERHEAD: u64 = 256;

/// The bytes that caching `doc`, parsed from `query`, holds at most: the text, the
/// document, the validation memo when full, and the fixed overhead.
pub fn weight(query: &str, doc: &ExecutableDocument) -> u32 {
    let bytes = (query.len() + heap(doc) + Validated::MAX_BYTES) as u64 + ENTRY_OVERHEAD;
    bytes.min(u32::MAX as u64) as u32
}

/// A cached document, and the validations it has passed ([`crate::validated`]).
#[derive(Debug)]
pub struct Entry {
    pub doc: ExecutableDocument,
    pub validated: Validated,
}

/// What became of a request's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The document came from the cache.
    Hit,
    /// The text was parsed now, and kept if the cache admitted it.
    Miss,
    /// The cache is off (`--document-cache-bytes 0`), or the text does not parse.
    Skipped,
}

/// Parsed documents by query text.
pub struct Documents {
    cache: Option<moka::sync::Cache<String, Arc<Entry>>>,
}

impl Documents {
    /// A cache holding at most about `max_bytes` (see [`weight`]); 0 disables it.
    pub fn new(max_bytes: u64) -> Documents {
        let cache = (max_bytes > 0).then(|| {
            moka::sync::Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|query: &String, entry: &Arc<Entry>| weight(query, &entry.doc))
                .build()
        });
        Documents { cache }
    }

    /// Give `request` its parsed document, from the cache or parsed now; the cache's
    /// entry for it, if it has one.
    pub fn prepare(&self, request: &mut Request) -> (Lookup, Option<Arc<Entry>>) {
        let Some(cache) = &self.cache else {
            return (Lookup::Skipped, None);
        };
        if let Some(entry) = cache.get(request.query.as_str()) {
            request.set_parsed_query(entry.doc.clone());
            return (Lookup::Hit, Some(entry));
        }
        match async_graphql::parser::parse_query(&request.query) {
            Ok(doc) => {
                request.set_parsed_query(doc.clone());
                let entry = Arc::new(Entry {
                    doc,
                    validated: Validated::default(),
                });
                cache.insert(request.query.clone(), entry.clone());
                (Lookup::Miss, Some(entry))
            }
            Err(_) => (Lookup::Skipped, None),
        }
    }

    /// Entries held and their estimated bytes, after pending evictions have run.
    pub fn size(&self) -> (u64, u64) {
        match &self.cache {
            Some(cache) => {
                cache.run_pending_tasks();
                (cache.entry_count(), cache.weighted_size())
            }
            None => (0, 0),
        }
    }
}

/// The heap bytes that `doc` owns (what its allocations asked for), from its shape:
/// every vector's and map's capacity times its element's size, every name and string.
pub fn heap(doc: &ExecutableDocument) -> usize {
    let operations = match &doc.operations {
        DocumentOperations::Single(op) => op_heap(&op.node),
        DocumentOperations::Multiple(ops) => {
            map(ops)
                + ops
                    .iter()
                    .map(|(k, op)| name(k) + op_heap(&op.node))
                    .sum::<usize>()
        }
    };
    let fragments = doc.fragments.iter().map(|(k, f)| {
        name(k)
            + name(&f.node.type_condition.node.on.node)
            + directives(&f.node.directives)
            + set(&f.node.selection_set.node)
    });
    operations + map(&doc.fragments) + fragments.sum::<usize>()
}

fn op_heap(op: &async_graphql::parser::types::OperationDefinition) -> usize {
    vec(&op.variable_definitions)
        + op.variable_definitions
            .iter()
            .map(|v| variable(&v.node))
            .sum::<usize>()
        + directives(&op.directives)
        + set(&op.selection_set.node)
}

fn variable(v: &VariableDefinition) -> usize {
    name(&v.name.node)
        + ty(&v.var_type.node)
        + directives(&v.directives)
        + v.default_value
            .as_ref()
            .map_or(0, |d| value(&d.node.clone().into_value()))
}

fn ty(t: &Type) -> usize {
    match &t.base {
        BaseType::Named(n) => name(n),
        BaseType::List(inner) => size_of::<Type>() + ty(inner),
    }
}

fn set(s: &SelectionSet) -> usize {
    vec(&s.items)
        + s.items
            .iter()
            .map(|item| match &item.node {
                Selection::Field(f) => field(&f.node),
                Selection::FragmentSpread(f) => {
                    name(&f.node.fragment_name.node) + directives(&f.node.directives)
                }
                Selection::InlineFragment(f) => {
                    f.node
                        .type_condition
                        .as_ref()
                        .map_or(0, |c| name(&c.node.on.node))
                        + directives(&f.node.directives)
                        + set(&f.node.selection_set.node)
                }
            })
            .sum::<usize>()
}

fn field(f: &Field) -> usize {
    f.alias.as_ref().map_or(0, |a| name(&a.node))
        + name(&f.name.node)
        + arguments(&f.arguments)
        + directives(&f.directives)
        + set(&f.selection_set.node)
}

fn arguments(args: &Vec<(Positioned<Name>, Positioned<Value>)>) -> usize {
    vec(args)
        + args
            .iter()
            .map(|(n, v)| name(&n.node) + value(&v.node))
            .sum::<usize>()
}

fn directives(dirs: &Vec<Positioned<async_graphql::parser::types::Directive>>) -> usize {
    vec(dirs)
        + dirs
            .iter()
            .map(|d| name(&d.node.name.node) + arguments(&d.node.arguments))
            .sum::<usize>()
}

fn value(v: &Value) -> usize {
    match v {
        Value::Variable(n) | Value::Enum(n) => name(n),
        Value::String(s) => s.capacity(),
        Value::Binary(b) => b.len(),
        Value::List(items) => vec(items) + items.iter().map(value).sum::<usize>(),
        Value::Object(fields) => {
            // indexmap: a vector of (hash, key, value) and a table of indices.
            fields.capacity() * (size_of::<(usize, Name, Value)>() + size_of::<usize>() + 1)
                + fields
                    .iter()
                    .map(|(k, v)| name(k) + value(v))
                    .sum::<usize>()
        }
        Value::Null | Value::Number(_) | Value::Boolean(_) => 0,
    }
}

/// A `Name` is an `Arc<str>`: two counters and the text.
fn name(n: &Name) -> usize {
    2 * size_of::<usize>() + n.len()
}

fn vec<T>(v: &Vec<T>) -> usize {
    v.capacity() * size_of::<T>()
}

/// A hashbrown table: a slot and a control byte per bucket, plus a group of control
/// bytes.
fn map<K, V>(m: &HashMap<K, V>) -> usize {
    if m.capacity() == 0 {
        return 0;
    }
    let buckets = (m.capacity() * 8 / 7).next_power_of_two();
    buckets * (size_of::<(K, V)>() + 1) + 16
}
