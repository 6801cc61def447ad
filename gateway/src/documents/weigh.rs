//! What a parsed document costs in memory: an estimate of every heap allocation of
//! its syntax tree, with the allocator's per-chunk overhead. A parsed document is
//! many times larger than its text, so the document cache weighs this, not the
//! text's length (`tests/document_heap.rs` checks it against a counting allocator).

use std::collections::HashMap;
use std::mem::size_of;

use async_graphql_parser::types::{
    BaseType, Directive, DocumentOperations, ExecutableDocument, Field, OperationDefinition,
    Selection, SelectionSet, Type,
};
use async_graphql_parser::Positioned;
use async_graphql_value::{ConstValue, Name, Value};

/// What one cache entry costs: the document's heap, its `Arc`, its text (in an
/// `Arc<str>`), and moka's own per-entry bookkeeping (key, hash, deque nodes,
/// frequency sketch share).
pub(super) fn entry_size(text: &str, doc: &ExecutableDocument) -> usize {
    const MOKA_ENTRY_OVERHEAD: usize = 160;
    heap_size(doc)
        + chunk(size_of::<ExecutableDocument>() + 16)
        + chunk(16 + text.len())
        + MOKA_ENTRY_OVERHEAD
}

/// The heap bytes of one allocation of `n` bytes under glibc malloc: 8 bytes of header,
/// rounded up to 16, at least 32.
pub(super) fn chunk(n: usize) -> usize {
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

pub(super) fn map_bytes<K, V>(m: &HashMap<K, V>) -> usize {
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
