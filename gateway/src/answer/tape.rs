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

/// The kinds by their number in a node's `head` (the eighth number is never written).
const KINDS: [Kind; 8] = [
    Kind::Null,
    Kind::Bool,
    Kind::Number,
    Kind::PlainString,
    Kind::EscapedString,
    Kind::Array,
    Kind::Object,
    Kind::Null,
];

/// One value of a tape, in 16 bytes: four to a cache line, where the 24 bytes of
/// separate fields fit two and a half. The walks and the writer step through the
/// nodes of every answer, so a tape a third smaller is a third fewer lines to fetch.
#[derive(Debug, Clone, Copy)]
struct Node {
    /// The value's bytes (quotes included for strings, brackets for containers).
    start: u32,
    end: u32,
    /// The index of the first node after this value's subtree.
    next: u32,
    /// Its kind (bits 0–2), and where the key of a value inside an object is: whether
    /// the key has escapes (bit 3), its length between its quotes (bits 5–18) and the
    /// bytes from its end to the value's start (bits 19–31; 2 for `"key":value`). A
    /// key longer or further away than those bits hold sets bit 4, and its span is
    /// kept in the tape's `far_keys`. Any other value's key is the empty span at its
    /// start.
    head: u32,
}

const _: () = assert!(std::mem::size_of::<Node>() == 16);

const KIND_BITS: u32 = 0b111;
const KEY_ESCAPED: u32 = 1 << 3;
const KEY_FAR: u32 = 1 << 4;
const KEY_LEN_SHIFT: u32 = 5;
const KEY_LEN_MAX: u32 = (1 << 14) - 1;
const KEY_GAP_SHIFT: u32 = 19;
const KEY_GAP_MAX: u32 = (1 << 13) - 1;

impl Node {
    /// A node for the value at `start..end` of kind `kind`, with the span of its key
    /// between the quotes and whether it has escapes (`None` outside an object). Also
    /// whether that span is too far to be held in the node (see [`Node::head`]): the
    /// node is marked so, and the span goes to the tape's `far_keys`.
    fn new(
        kind: Kind,
        key: Option<(u32, u32, bool)>,
        start: u32,
        end: u32,
        next: u32,
    ) -> (Node, bool) {
        let (key_start, key_end, escaped) = key.unwrap_or((start, start, false));
        let len = key_end.wrapping_sub(key_start);
        let gap = start.wrapping_sub(key_end);
        let mut head = kind as u32 | if escaped { KEY_ESCAPED } else { 0 };
        let far = len > KEY_LEN_MAX || gap > KEY_GAP_MAX;
        if far {
            head |= KEY_FAR;
        } else {
            head |= len << KEY_LEN_SHIFT | gap << KEY_GAP_SHIFT;
        }
        let node = Node {
            start,
            end,
            next,
            head,
        };
        (node, far)
    }

    #[inline(always)]
    fn kind(&self) -> Kind {
        KINDS[(self.head & KIND_BITS) as usize]
    }

    #[inline(always)]
    fn is(&self, kind: Kind) -> bool {
        self.head & KIND_BITS == kind as u32
    }

    fn key_escaped(&self) -> bool {
        self.head & KEY_ESCAPED != 0
    }
}

/// A parsed JSON text: its bytes and the tape of its values.
#[derive(Debug, Clone)]
pub struct Tape {
    text: Bytes,
    nodes: Vec<Node>,
    /// The key spans that do not fit in their nodes, by node index, ascending: keys
    /// of 16 KiB or more, or 8 KiB or more from a key's end to its value (whitespace).
    /// Empty for any answer a subgraph writes for a query.
    far_keys: Vec<(u32, u32, u32)>,
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
        let (nodes, far_keys) = parser::nodes(&text)?;
        Ok(Tape {
            text,
            nodes,
            far_keys,
        })
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

    /// The key span of `n`, the node at `index`.
    #[inline(always)]
    fn key_span(&self, index: u32, n: &Node) -> (usize, usize) {
        if n.head & KEY_FAR != 0 {
            return self.far_key(index);
        }
        let len = (n.head >> KEY_LEN_SHIFT) & KEY_LEN_MAX;
        let end = n.start.wrapping_sub(n.head >> KEY_GAP_SHIFT);
        (end.wrapping_sub(len) as usize, end as usize)
    }

    #[cold]
    fn far_key(&self, index: u32) -> (usize, usize) {
        match self.far_keys.binary_search_by_key(&index, |k| k.0) {
            Ok(at) => (self.far_keys[at].1 as usize, self.far_keys[at].2 as usize),
            Err(_) => (0, 0),
        }
    }

    /// The key's bytes of `n`, the node at `index` (empty outside an object).
    #[inline(always)]
    fn key_bytes(&self, index: u32, n: &Node) -> &[u8] {
        let (start, end) = self.key_span(index, n);
        self.text.get(start..end).unwrap_or_default()
    }

    /// Whether the key of `n`, the node at `index` (a value inside an object), is
    /// `name`.
    #[inline(always)]
    fn key_is(&self, index: u32, n: &Node, name: &str) -> bool {
        let raw = self.key_bytes(index, n);
        if n.key_escaped() {
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
        self.text.len()
            + self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.far_keys.capacity() * std::mem::size_of::<(u32, u32, u32)>()
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
        self.node().kind()
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
        let raw = self.tape.key_bytes(self.index, n);
        if n.key_escaped() {
            decode_key(raw)
        } else {
            Cow::Borrowed(plain(raw))
        }
    }

    /// Whether this value's key in its parent object is `name`.
    #[inline]
    pub fn key_is(&self, name: &str) -> bool {
        self.tape.key_is(self.index, self.node(), name)
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
        let (next, end) = if n.is(kind) {
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
        if !n.is(Kind::Object) {
            return None;
        }
        let (mut index, mut ordinal) = (self.index + 1, 0);
        while index < n.next {
            let member = nodes.get(index as usize)?;
            if self.tape.key_is(index, member, name) {
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
        (!member.is(Kind::Null) && self.tape.key_is(index, member, name))
            .then(|| self.tape.at(index))
    }

    /// The member at `ordinal` (see [`Value::member_at`]): its tape index and node.
    #[inline]
    fn member_node(&self, ordinal: u32, from: Option<(u32, u32)>) -> Option<(u32, &'t Node)> {
        let nodes = &self.tape.nodes;
        let n = nodes.get(self.index as usize)?;
        if !n.is(Kind::Object) {
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
        // The spans move with the text; a key's place is relative to its value, so
        // only a far key's span is rewritten. The copy's root is in no object.
        let nodes = self.tape.nodes[first..last]
            .iter()
            .enumerate()
            .map(|(i, node)| Node {
                start: node.start - start,
                end: node.end - start,
                next: node.next - first as u32,
                head: match i {
                    0 => node.head & KIND_BITS,
                    _ => node.head,
                },
            })
            .collect();
        let far_keys = self
            .tape
            .far_keys
            .iter()
            .filter(|k| k.0 > first as u32 && k.0 < last as u32)
            .map(|&(index, key_start, key_end)| {
                (index - first as u32, key_start - start, key_end - start)
            })
            .collect();
        Tape {
            text,
            nodes,
            far_keys,
        }
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
