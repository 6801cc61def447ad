//! JSON as it came over the wire: a tape of a subgraph response's values, pointing
//! into its bytes.
//!
//! The gateway never needs a subgraph's values as values. It copies them into the
//! client's response, reads a few of them (entity keys, `__typename`) and walks the
//! objects between. So a response is parsed once into a [`Tape`]: one flat vector of
//! nodes in document order, each with the byte span of its value and, inside an
//! object, of its key. Leaves are written out by copying their bytes as they came
//! (strings keep their escapes, numbers their spelling), so nothing is decoded and
//! nothing re-encoded. A container knows where its subtree ends, so skipping a value
//! costs nothing.
//!
//! The parser checks everything JSON requires (UTF-8, string escapes, control
//! characters, the number grammar, nothing after the value) and bounds the nesting
//! depth, so a malformed or hostile subgraph answer is an error, never a panic.
//! `tests` compare it with serde_json on generated documents.
//!
//! This module holds the tape and its reads; its `parser` builds a tape's nodes from
//! the bytes.

use std::borrow::Cow;

use bytes::Bytes;

mod parser;
#[cfg(test)]
mod tests;

/// What a JSON value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Number,
    /// A string without escapes (its bytes between the quotes are its value).
    PlainString,
    /// A string with at least one escape.
    EscapedString,
    Array,
    Object,
}

#[derive(Debug, Clone, Copy)]
struct Node {
    kind: Kind,
    /// Whether the key (for values inside an object) contains an escape.
    key_escaped: bool,
    /// The key's bytes between its quotes (values inside an object; else empty).
    key_start: u32,
    key_end: u32,
    /// The value's bytes (quotes included for strings, brackets for containers).
    start: u32,
    end: u32,
    /// The index of the first node after this value's subtree.
    next: u32,
}

/// A parsed JSON text: its bytes and the tape of its values.
#[derive(Debug, Clone)]
pub struct Tape {
    text: Bytes,
    nodes: Vec<Node>,
}

/// Why a text is not JSON.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message} at byte {at}")]
pub struct JsonError {
    message: &'static str,
    at: usize,
}

impl Tape {
    /// Parse `text`, which must hold exactly one JSON value (whitespace around it
    /// allowed).
    pub fn parse(text: Bytes) -> Result<Tape, JsonError> {
        let nodes = parser::nodes(&text)?;
        Ok(Tape { text, nodes })
    }

    /// The top-level value.
    pub fn root(&self) -> Value<'_> {
        Value {
            tape: self,
            index: 0,
        }
    }

    /// The value at tape index `index` (as [`Value::index`] gave it).
    pub fn at(&self, index: u32) -> Value<'_> {
        Value { tape: self, index }
    }

    /// The whole text.
    pub fn text(&self) -> &Bytes {
        &self.text
    }

    /// Whether the key of `n` (a node of this tape inside an object) is `name`.
    #[inline(always)]
    fn key_is(&self, n: &Node, name: &str) -> bool {
        let raw = self.text.get(n.key_start as usize..n.key_end as usize);
        let Some(raw) = raw else { return false };
        if n.key_escaped {
            return decode_key(raw) == name;
        }
        same_bytes(raw, name.as_bytes())
    }

    /// How many values it holds (every value is a node, nested ones included).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Heap bytes held (text and tape), for weighing cache entries.
    pub fn heap_size(&self) -> usize {
        self.text.len() + self.nodes.capacity() * std::mem::size_of::<Node>()
    }
}

/// One value inside a [`Tape`].
#[derive(Clone, Copy)]
pub struct Value<'t> {
    tape: &'t Tape,
    index: u32,
}

impl std::fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.raw()))
    }
}

impl<'t> Value<'t> {
    fn node(&self) -> &'t Node {
        &self.tape.nodes[self.index as usize]
    }

    /// Its position in the tape (stable for the tape's life).
    pub fn index(&self) -> u32 {
        self.index
    }

    pub fn kind(&self) -> Kind {
        self.node().kind
    }

    pub fn is_null(&self) -> bool {
        self.kind() == Kind::Null
    }

    /// The value's JSON text, exactly as it came.
    pub fn raw(&self) -> &'t [u8] {
        let n = self.node();
        &self.tape.text[n.start as usize..n.end as usize]
    }

    /// A string's value (decoded only when it has escapes); `None` for other kinds.
    pub fn as_str(&self) -> Option<Cow<'t, str>> {
        let raw = self.raw();
        match self.kind() {
            Kind::PlainString => Some(Cow::Borrowed(plain(&raw[1..raw.len() - 1]))),
            Kind::EscapedString => serde_json::from_slice::<String>(raw).ok().map(Cow::Owned),
            _ => None,
        }
    }

    /// The key this value has in its parent object (decoded when it has escapes).
    pub fn key(&self) -> Cow<'t, str> {
        let n = self.node();
        let raw = &self.tape.text[n.key_start as usize..n.key_end as usize];
        if n.key_escaped {
            decode_key(raw)
        } else {
            Cow::Borrowed(plain(raw))
        }
    }

    /// Whether this value's key in its parent object is `name`.
    #[inline]
    pub fn key_is(&self, name: &str) -> bool {
        self.tape.key_is(self.node(), name)
    }

    /// An object's members, in order; nothing for other kinds.
    pub fn members(&self) -> Children<'t> {
        self.children(Kind::Object)
    }

    /// An array's items, in order; nothing for other kinds.
    pub fn items(&self) -> Children<'t> {
        self.children(Kind::Array)
    }

    fn children(&self, kind: Kind) -> Children<'t> {
        let n = self.node();
        let (next, end) = if n.kind == kind {
            (self.index + 1, n.next)
        } else {
            (0, 0)
        };
        Children {
            tape: self.tape,
            next,
            end,
        }
    }

    /// The member `name` of an object.
    pub fn get(&self, name: &str) -> Option<Value<'t>> {
        self.find(name).map(|(_, m)| m)
    }

    /// The member `name` of an object, and its position among the members.
    #[inline]
    pub fn find(&self, name: &str) -> Option<(u32, Value<'t>)> {
        // A loop over the nodes themselves: this is the gateway's most frequent read.
        let nodes = &self.tape.nodes;
        let n = nodes.get(self.index as usize)?;
        if n.kind != Kind::Object {
            return None;
        }
        let (mut index, mut ordinal) = (self.index + 1, 0);
        while index < n.next {
            let member = nodes.get(index as usize)?;
            if self.tape.key_is(member, name) {
                return Some((ordinal, self.tape.at(index)));
            }
            index = member.next;
            ordinal += 1;
        }
        None
    }

    /// An object's member at position `ordinal`, whatever its key; `from` is a
    /// member of this object found before (its position and tape index: it must be
    /// a member of this object, not a value nested deeper), to step on from when it
    /// comes first. Skipping a member costs one step, whatever its subtree.
    pub fn member_at(&self, ordinal: u32, from: Option<(u32, u32)>) -> Option<Value<'t>> {
        self.member_node(ordinal, from)
            .map(|(index, _)| self.tape.at(index))
    }

    /// [`Value::member_at`] when that member's key is `name` and its value is not
    /// null; `None` otherwise.
    #[inline]
    pub fn named_member_at(
        &self,
        ordinal: u32,
        from: Option<(u32, u32)>,
        name: &str,
    ) -> Option<Value<'t>> {
        let (index, member) = self.member_node(ordinal, from)?;
        (member.kind != Kind::Null && self.tape.key_is(member, name)).then(|| self.tape.at(index))
    }

    /// The member at `ordinal` (see [`Value::member_at`]): its tape index and node.
    #[inline]
    fn member_node(&self, ordinal: u32, from: Option<(u32, u32)>) -> Option<(u32, &'t Node)> {
        let nodes = &self.tape.nodes;
        let n = nodes.get(self.index as usize)?;
        if n.kind != Kind::Object {
            return None;
        }
        let (mut at, mut index) = match from {
            Some((at, index)) if at <= ordinal && index > self.index && index < n.next => {
                (at, index)
            }
            _ => (0, self.index + 1),
        };
        while index < n.next {
            let member = nodes.get(index as usize)?;
            if at == ordinal {
                return Some((index, member));
            }
            index = member.next;
            at += 1;
        }
        None
    }

    /// A standalone copy of this value: its text and its part of the tape, copied
    /// (so that keeping it does not keep the whole text alive).
    pub fn to_tape(&self) -> Tape {
        let n = *self.node();
        let (start, first, last) = (n.start, self.index as usize, n.next as usize);
        let text = Bytes::copy_from_slice(&self.tape.text[start as usize..n.end as usize]);
        let nodes = self.tape.nodes[first..last]
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let keyed = i > 0 && node.key_end > node.key_start;
                Node {
                    key_start: if keyed { node.key_start - start } else { 0 },
                    key_end: if keyed { node.key_end - start } else { 0 },
                    key_escaped: keyed && node.key_escaped,
                    start: node.start - start,
                    end: node.end - start,
                    next: node.next - first as u32,
                    kind: node.kind,
                }
            })
            .collect();
        Tape { text, nodes }
    }
}

/// The values inside a container, in order.
pub struct Children<'t> {
    tape: &'t Tape,
    next: u32,
    end: u32,
}

impl<'t> Iterator for Children<'t> {
    type Item = Value<'t>;

    fn next(&mut self) -> Option<Value<'t>> {
        if self.next >= self.end {
            return None;
        }
        let value = self.tape.at(self.next);
        self.next = value.node().next;
        Some(value)
    }
}

/// Whether `a` and `b` hold the same bytes. Lengths are compared first (most keys
/// looked at differ in length from the one looked for). Keys are short: up to 16
/// bytes are compared as two words that overlap (or, below 4, byte by byte), with no
/// call to memcmp.
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    fn word<const N: usize>(s: &[u8], at: usize) -> Option<[u8; N]> {
        s.get(at..at + N).and_then(|w| w.try_into().ok())
    }
    let n = a.len();
    if b.len() != n {
        return false;
    }
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => word::<4>(a, 0) == word::<4>(b, 0) && word::<4>(a, n - 4) == word::<4>(b, n - 4),
        8..=16 => word::<8>(a, 0) == word::<8>(b, 0) && word::<8>(a, n - 8) == word::<8>(b, n - 8),
        _ => a == b,
    }
}

/// Bytes the parser found to be UTF-8 without escapes.
fn plain(bytes: &[u8]) -> &str {
    debug_assert!(std::str::from_utf8(bytes).is_ok());
    // SAFETY: every tape's text is UTF-8 (`Tape::parse` checks the whole text first,
    // and `Value::to_tape` copies a value's span of such a text, which starts and
    // ends at ASCII bytes), and a string's bytes between its quotes, like a key's,
    // start and end on character boundaries (quotes are ASCII). Checking again cost
    // a scan of every string read, 2.7% of a deep request's instructions.
    unsafe { std::str::from_utf8_unchecked(bytes) }
}

fn decode_key(raw: &[u8]) -> Cow<'static, str> {
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    Cow::Owned(serde_json::from_slice::<String>(&quoted).unwrap_or_default())
}
