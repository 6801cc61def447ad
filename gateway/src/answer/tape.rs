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

use std::borrow::Cow;

use bytes::Bytes;

/// Deeper nesting than this is refused (a query's own depth limit is far below it).
const MAX_DEPTH: usize = 512;

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
        // Past its ASCII start (all of a usual answer), checked by the standard
        // library: a split between two ASCII bytes is a character boundary.
        let ascii = ascii_prefix(&text);
        if let Err(e) = std::str::from_utf8(&text[ascii..]) {
            return Err(JsonError {
                message: "invalid UTF-8",
                at: ascii + e.valid_up_to(),
            });
        }
        if text.len() > u32::MAX as usize {
            return Err(JsonError {
                message: "text larger than 4 GiB",
                at: 0,
            });
        }
        let mut parser = Parser {
            bytes: &text,
            at: 0,
            nodes: Vec::with_capacity(text.len() / 8 + 4),
            failure: None,
        };
        parser.skip_ws();
        if parser.value(0, (0, 0, false)).is_err() {
            return Err(parser.failure());
        }
        parser.skip_ws();
        if parser.at != text.len() {
            parser.fail("trailing characters after the value");
            return Err(parser.failure());
        }
        let nodes = parser.nodes;
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

/// A parse stopped at an error, which the parser keeps ([`Parser::failure`]): the
/// stop itself carries nothing, so each value's result is one flag rather than a
/// 24-byte error passed back up through every level.
struct Stop;

/// How many of `bytes`' first bytes are ASCII, in steps of sixteen (the count stops
/// at the sixteen bytes that hold the first byte that is not, or at the last
/// sixteen): one test of a 128-bit word per step, where checking UTF-8 byte by byte
/// takes about one instruction a byte.
fn ascii_prefix(bytes: &[u8]) -> usize {
    const HIGH: u128 = u128::from_le_bytes([0x80; 16]);
    bytes
        .chunks_exact(16)
        .take_while(|chunk| {
            <[u8; 16]>::try_from(*chunk).is_ok_and(|word| u128::from_le_bytes(word) & HIGH == 0)
        })
        .count()
        * 16
}

struct Parser<'b> {
    bytes: &'b [u8],
    at: usize,
    nodes: Vec<Node>,
    /// Why the parse stopped, once it has.
    failure: Option<JsonError>,
}

/// A key's span between its quotes, and whether it has escapes (the key of a
/// value inside an object; the empty span for any other value).
type KeySpan = (u32, u32, bool);

impl Parser<'_> {
    /// Stop at `self.at`, for `message`.
    #[cold]
    fn fail(&mut self, message: &'static str) -> Stop {
        self.failure = Some(JsonError {
            message,
            at: self.at,
        });
        Stop
    }

    /// The error the parse stopped at.
    fn failure(&mut self) -> JsonError {
        self.failure.take().unwrap_or(JsonError {
            message: "invalid JSON",
            at: self.at,
        })
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// Parse one value at `self.at` (whitespace skipped), at nesting depth `depth`,
    /// with its key span if it is an object member. A leaf's node is pushed once,
    /// whole; a container's is pushed first and completed when its end is known.
    /// Inlined into the loops of objects and arrays: only a container costs a call.
    #[inline(always)]
    fn value(&mut self, depth: usize, key: KeySpan) -> Result<(), Stop> {
        let start = self.at;
        let kind = match self.bytes.get(self.at) {
            Some(b'"') => match self.string()? {
                true => Kind::EscapedString,
                false => Kind::PlainString,
            },
            Some(b'{') => return self.container(depth, key, Kind::Object),
            Some(b'[') => return self.container(depth, key, Kind::Array),
            Some(b'-' | b'0'..=b'9') => {
                self.number()?;
                Kind::Number
            }
            Some(b'n') => self.literal(b"null", Kind::Null)?,
            Some(b't') => self.literal(b"true", Kind::Bool)?,
            Some(b'f') => self.literal(b"false", Kind::Bool)?,
            None => return Err(self.fail("unexpected end of input")),
            Some(_) => return Err(self.fail("expected a value")),
        };
        let next = self.nodes.len() as u32 + 1;
        self.nodes.push(Node {
            kind,
            key_escaped: key.2,
            key_start: key.0,
            key_end: key.1,
            start: start as u32,
            end: self.at as u32,
            next,
        });
        Ok(())
    }

    /// An object or an array from its opening bracket, its values at `depth + 1`.
    #[inline(never)]
    fn container(&mut self, depth: usize, key: KeySpan, kind: Kind) -> Result<(), Stop> {
        let index = self.nodes.len();
        self.nodes.push(Node {
            kind,
            key_escaped: key.2,
            key_start: key.0,
            key_end: key.1,
            start: self.at as u32,
            end: 0,
            next: 0,
        });
        match kind {
            Kind::Object => self.object(depth + 1)?,
            _ => self.array(depth + 1)?,
        }
        let (end, next) = (self.at as u32, self.nodes.len() as u32);
        if let Some(node) = self.nodes.get_mut(index) {
            node.end = end;
            node.next = next;
        }
        Ok(())
    }

    fn literal(&mut self, word: &[u8], kind: Kind) -> Result<Kind, Stop> {
        if self.bytes[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(kind)
        } else {
            Err(self.fail("expected a value"))
        }
    }

    /// A string from its opening quote; returns whether it has escapes.
    #[inline(always)]
    fn string(&mut self) -> Result<bool, Stop> {
        self.at += 1;
        let mut escaped = false;
        loop {
            self.skip_plain();
            match self.bytes.get(self.at) {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(escaped);
                }
                Some(b'\\') => {
                    escaped = true;
                    match self.bytes.get(self.at + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.at += 2
                        }
                        Some(b'u') => {
                            let hex = self.bytes.get(self.at + 2..self.at + 6);
                            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                                return Err(self.fail("bad \\u escape"));
                            }
                            self.at += 6;
                        }
                        _ => return Err(self.fail("bad escape")),
                    }
                }
                None => return Err(self.fail("unterminated string")),
                Some(0..=0x1f) => return Err(self.fail("control character in a string")),
                Some(_) => self.at += 1,
            }
        }
    }

    /// Step over the bytes of a string that need no look of their own (all but a
    /// quote, a backslash and a control character) to the first one that does:
    /// sixteen at a time while sixteen are left (SSE2, which every x86-64 has),
    /// then eight at a time ([`Parser::skip_plain_words`]).
    #[inline]
    fn skip_plain(&mut self) {
        #[cfg(target_arch = "x86_64")]
        while let Some(chunk) = self.bytes.get(self.at..self.at + 16) {
            use std::arch::x86_64::{
                __m128i, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8,
                _mm_or_si128, _mm_set1_epi8, _mm_xor_si128,
            };
            // SAFETY: SSE2 is part of the x86-64 baseline, and the load reads the 16
            // bytes of `chunk`, which `get` has shown to be in the slice (an unaligned
            // load: `_mm_loadu_si128` asks no alignment).
            let flagged = unsafe {
                let word = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
                let quote = _mm_cmpeq_epi8(word, _mm_set1_epi8(b'"' as i8));
                let backslash = _mm_cmpeq_epi8(word, _mm_set1_epi8(b'\\' as i8));
                // Below 0x20, unsigned: with the top bit flipped, below 0x20 ^ 0x80
                // as a signed byte.
                let flip = _mm_set1_epi8(i8::MIN);
                let control = _mm_cmplt_epi8(
                    _mm_xor_si128(word, flip),
                    _mm_set1_epi8((0x20 ^ 0x80) as i8),
                );
                _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
            };
            if flagged != 0 {
                self.at += flagged.trailing_zeros() as usize;
                return;
            }
            self.at += 16;
        }
        self.skip_plain_words();
    }

    /// [`Parser::skip_plain`], eight bytes at a time while eight are left.
    ///
    /// Each test is the classic one for a byte in a word (a zero byte after an
    /// exclusive or, a byte below 0x20): it can flag a byte after a true one, through
    /// a borrow, but never one before it, so the lowest byte flagged is the first
    /// that needs a look.
    #[inline]
    fn skip_plain_words(&mut self) {
        const ONES: u64 = u64::from_le_bytes([0x01; 8]);
        const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
        const QUOTES: u64 = ONES * b'"' as u64;
        const BACKSLASHES: u64 = ONES * b'\\' as u64;
        const SPACES: u64 = ONES * 0x20;
        while let Some(&chunk) = self
            .bytes
            .get(self.at..)
            .and_then(|rest| rest.first_chunk::<8>())
        {
            let word = u64::from_le_bytes(chunk);
            let quote = word ^ QUOTES;
            let backslash = word ^ BACKSLASHES;
            let flagged = ((quote.wrapping_sub(ONES) & !quote)
                | (backslash.wrapping_sub(ONES) & !backslash)
                | (word.wrapping_sub(SPACES) & !word))
                & HIGH;
            if flagged != 0 {
                self.at += (flagged.trailing_zeros() / 8) as usize;
                return;
            }
            self.at += 8;
        }
    }

    fn digits(&mut self) -> usize {
        let from = self.at;
        while let Some(b'0'..=b'9') = self.bytes.get(self.at) {
            self.at += 1;
        }
        self.at - from
    }

    fn number(&mut self) -> Result<(), Stop> {
        if self.bytes[self.at] == b'-' {
            self.at += 1;
        }
        match self.bytes.get(self.at) {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.fail("bad number")),
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return Err(self.fail("bad number"));
            }
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.at) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(self.fail("bad number"));
            }
        }
        Ok(())
    }

    /// The values of an array, at `depth`, from its opening bracket to its closing one.
    fn array(&mut self, depth: usize) -> Result<(), Stop> {
        self.at += 1;
        self.skip_ws();
        if self.bytes.get(self.at) == Some(&b']') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            if depth > MAX_DEPTH {
                return Err(self.fail("nested too deeply"));
            }
            self.value(depth, (0, 0, false))?;
            self.skip_ws();
            match self.bytes.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(self.fail("expected , or ] in an array")),
            }
        }
    }

    /// The members of an object, their values at `depth`, from its opening brace to
    /// its closing one.
    fn object(&mut self, depth: usize) -> Result<(), Stop> {
        self.at += 1;
        self.skip_ws();
        if self.bytes.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            if self.bytes.get(self.at) != Some(&b'"') {
                return Err(self.fail("expected a key"));
            }
            let key_start = self.at + 1;
            let escaped = self.string()?;
            let key_end = self.at - 1;
            self.skip_ws();
            if self.bytes.get(self.at) != Some(&b':') {
                return Err(self.fail("expected : after a key"));
            }
            self.at += 1;
            self.skip_ws();
            if depth > MAX_DEPTH {
                return Err(self.fail("nested too deeply"));
            }
            self.value(depth, (key_start as u32, key_end as u32, escaped))?;
            self.skip_ws();
            match self.bytes.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(self.fail("expected , or } in an object")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tape(text: &str) -> Tape {
        Tape::parse(Bytes::copy_from_slice(text.as_bytes())).unwrap()
    }

    /// Rebuild a serde_json value from the tape, decoding as serde_json would.
    fn to_json(v: Value<'_>) -> serde_json::Value {
        match v.kind() {
            Kind::Object => serde_json::Value::Object(
                v.members()
                    .map(|m| (m.key().into_owned(), to_json(m)))
                    .collect(),
            ),
            Kind::Array => serde_json::Value::Array(v.items().map(to_json).collect()),
            _ => serde_json::from_slice(v.raw()).unwrap(),
        }
    }

    proptest! {
        /// Short-key comparison agrees with `==` at every length up to past 16, for
        /// equal strings and for strings that differ in any one byte.
        #[test]
        fn same_bytes_is_equality(a in proptest::collection::vec(any::<u8>(), 0..24), at in any::<usize>(), flip in 1u8..) {
            let mut b = a.clone();
            prop_assert!(same_bytes(&a, &b));
            if !b.is_empty() {
                let i = at % b.len();
                b[i] ^= flip;
                prop_assert!(!same_bytes(&a, &b));
            }
            b.push(0);
            prop_assert_eq!(same_bytes(&a, &b), false);
        }
    }

    #[test]
    fn reads_members_items_and_raw_leaves() {
        let t =
            tape(r#" {"data":{"me":{"id":"u1","n":-1.5e3,"s":"a\"b","l":[1,[],{}],"z":null}}} "#);
        let me = t.root().get("data").unwrap().get("me").unwrap();
        assert_eq!(me.get("id").unwrap().as_str().unwrap(), "u1");
        assert_eq!(me.get("n").unwrap().raw(), b"-1.5e3");
        assert_eq!(me.get("s").unwrap().raw(), br#""a\"b""#);
        assert_eq!(me.get("s").unwrap().as_str().unwrap(), "a\"b");
        assert_eq!(me.get("l").unwrap().items().count(), 3);
        assert!(me.get("z").unwrap().is_null());
        assert!(me.get("missing").is_none());
        let (ordinal, l) = me.find("l").unwrap();
        assert_eq!((ordinal, l.raw()), (3, &b"[1,[],{}]"[..]));
        assert!(me.find("missing").is_none());
    }

    #[test]
    fn members_are_found_by_position_from_the_start_or_from_one_known() {
        let t = tape(r#"{"a":{"x":1,"y":[2,3]},"b":[{"x":4}],"c":5}"#);
        let root = t.root();
        let keys = |v: Option<Value<'_>>| v.map(|v| v.key().into_owned());
        assert_eq!(keys(root.member_at(0, None)).as_deref(), Some("a"));
        assert_eq!(keys(root.member_at(2, None)).as_deref(), Some("c"));
        assert_eq!(keys(root.member_at(3, None)), None);
        let (at, b) = root.find("b").unwrap();
        let from = Some((at, b.index()));
        assert_eq!(keys(root.member_at(2, from)).as_deref(), Some("c"));
        assert_eq!(keys(root.member_at(1, from)).as_deref(), Some("b"));
        // A member known to come after the one asked for: counted from the start.
        assert_eq!(keys(root.member_at(0, from)).as_deref(), Some("a"));
        // An index outside the object: counted from the start.
        assert_eq!(keys(root.member_at(2, Some((1, 0)))).as_deref(), Some("c"));
        let inner = root.get("a").unwrap();
        assert_eq!(keys(inner.member_at(1, None)).as_deref(), Some("y"));
        assert!(b.member_at(0, None).is_none(), "a list has no members");
    }

    #[test]
    fn escaped_keys_compare_by_their_value() {
        let t = tape(r#"{"\u0069d":"u1"}"#);
        assert!(t.root().get("id").is_some());
        assert_eq!(t.root().members().next().unwrap().key(), "id");
    }

    #[test]
    fn a_copied_subtree_stands_alone() {
        let t = tape(r#"{"e0":[{"id":"u1","p":[{"x":1}]},{"id":"u2"}]}"#);
        let second = t.root().get("e0").unwrap().items().next().unwrap();
        let copy = second.to_tape();
        assert_eq!(copy.text().as_ref(), br#"{"id":"u1","p":[{"x":1}]}"#);
        assert_eq!(copy.root().get("id").unwrap().raw(), b"\"u1\"");
        let x = copy.root().get("p").unwrap().items().next().unwrap();
        assert_eq!(x.get("x").unwrap().raw(), b"1");
        assert_eq!(to_json(copy.root()), to_json(second));
    }

    #[test]
    fn malformed_text_is_an_error() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\"}",
            "{\"a\":}",
            "01",
            "1.",
            "-",
            "1e",
            "\"a\nb\"",
            "\"\\x\"",
            "\"\\u12g4\"",
            "nul",
            "[1] 2",
            "{\"a\":1,}",
            "\"abc",
        ] {
            assert!(Tape::parse(Bytes::from(bad)).is_err(), "{bad:?}");
        }
        let deep = "[".repeat(MAX_DEPTH + 2) + &"]".repeat(MAX_DEPTH + 2);
        assert!(Tape::parse(Bytes::from(deep)).is_err());
        assert!(Tape::parse(Bytes::from_static(b"\"\xff\"")).is_err());
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(|n| serde_json::json!(n)),
            (-1e12f64..1e12).prop_map(|n| serde_json::json!(n)),
            ".*".prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::Array),
                prop::collection::btree_map(".*", inner, 0..8)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// The text between a string's quotes: plain runs, escapes good and bad, raw
    /// quotes, control characters (0x1f is one, 0x7f is not) and characters of two to
    /// four bytes, at lengths that cross the parser's sixteen- and eight-byte steps
    /// anywhere.
    fn string_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            8 => "[a-z0-9 ]{1,11}",
            1 => Just("\\\"".to_string()),
            1 => Just("\\\\".to_string()),
            1 => Just("\\n".to_string()),
            1 => Just("\\u00e9".to_string()),
            1 => Just("\\x".to_string()),
            1 => Just("\\u12g4".to_string()),
            1 => Just("\"".to_string()),
            1 => Just("\u{1f}".to_string()),
            1 => Just("\n".to_string()),
            1 => Just("\u{7f}".to_string()),
            1 => Just("é€😀".to_string()),
        ];
        prop::collection::vec(piece, 0..10).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #[test]
        fn strings_are_read_as_serde_json_reads_them(pad in 0usize..16, body in string_text(), key in any::<bool>()) {
            // `pad` shifts where the string starts against the parser's steps.
            let text = if key {
                format!("{{{}\"{}\":1}}", " ".repeat(pad), body)
            } else {
                format!("[{}\"{}\"]", " ".repeat(pad), body)
            };
            let parsed = Tape::parse(Bytes::from(text.clone()));
            let expected = serde_json::from_str::<serde_json::Value>(&text);
            prop_assert_eq!(parsed.is_ok(), expected.is_ok(), "{:?}", text);
            if let (Ok(t), Ok(v)) = (parsed, expected) {
                prop_assert_eq!(to_json(t.root()), v);
            }
        }

        #[test]
        fn every_key_an_object_holds_is_found_at_its_position(value in json_value(), probe in "[a-z_]{0,6}") {
            let text = serde_json::to_string(&value).unwrap();
            let t = Tape::parse(Bytes::from(text)).unwrap();
            let mut objects = vec![t.root()];
            while let Some(v) = objects.pop() {
                objects.extend(v.members().chain(v.items()));
                if v.kind() != Kind::Object {
                    continue;
                }
                for (ordinal, m) in v.members().enumerate() {
                    let key = m.key();
                    let (at, found) = v.find(&key).unwrap();
                    prop_assert_eq!((at as usize, found.index()), (ordinal, m.index()));
                }
                let held = v.members().any(|m| m.key() == probe);
                prop_assert_eq!(v.get(&probe).is_some(), held);
            }
        }

        #[test]
        fn agrees_with_serde_json(value in json_value(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                serde_json::to_string(&value).unwrap()
            };
            let t = Tape::parse(Bytes::from(text.clone())).unwrap();
            // serde_json reads the same text (its float parsing is not exact, so the
            // comparison is with its reading, not with `value`).
            let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(to_json(t.root()), expected);
            prop_assert_eq!(t.root().raw(), text.trim().as_bytes());
        }

        /// A string of ASCII with one byte of any value at any place: the text is
        /// refused as UTF-8 exactly when the standard library refuses it, at the byte
        /// it names, wherever the byte falls against the sixteen-byte steps of the
        /// ASCII check. `tail` then checks that every byte before the ASCII prefix's
        /// end is ASCII, and the sixteen after it hold one that is not.
        #[test]
        fn utf8_is_checked_as_the_standard_library_checks_it(
            len in 0usize..80,
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            tail in prop::collection::vec(any::<u8>(), 0..4),
        ) {
            let mut body = vec![b'a'; len];
            if len > 0 {
                body[at.index(len)] = byte;
            }
            body.extend_from_slice(&tail);
            let mut text = b"\"".to_vec();
            text.extend_from_slice(&body);
            text.push(b'"');
            let ascii = ascii_prefix(&text);
            prop_assert!(text[..ascii].is_ascii());
            if ascii + 16 <= text.len() {
                prop_assert!(!text[ascii..ascii + 16].is_ascii());
            }
            let parsed = Tape::parse(Bytes::from(text.clone()));
            match std::str::from_utf8(&text) {
                Err(e) => {
                    let err = parsed.unwrap_err();
                    prop_assert_eq!(err.message, "invalid UTF-8");
                    prop_assert_eq!(err.at, e.valid_up_to());
                }
                Ok(_) => prop_assert_eq!(
                    parsed.is_ok(),
                    serde_json::from_slice::<serde_json::Value>(&text).is_ok()
                ),
            }
        }

        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let parsed = Tape::parse(Bytes::from(bytes.clone()));
            let expected = serde_json::from_slice::<serde_json::Value>(&bytes).is_ok();
            prop_assert_eq!(parsed.is_ok(), expected);
        }
    }
}
