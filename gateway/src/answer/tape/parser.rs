//! The parser: a subgraph answer's bytes to the nodes of its [`Tape`], in one pass,
//! checking everything JSON requires.
//!
//! UTF-8 is checked first, sixty-four bytes a step while the text is ASCII and by
//! the standard library after that. Then one recursive descent writes a node per value
//! in document order: a leaf whole, a container first and completed once its end is
//! known. Leaves and strings are read inside the loops of objects and arrays, so only
//! a container costs a call, and a string's plain bytes are skipped sixteen at a time.
//! Whitespace is looked for only where the byte the grammar expects next is not there.
//! Errors stop the parse where they are found, and the parser keeps the first one.

use super::{JsonError, Kind, Node};

/// Deeper nesting than this is refused (a query's own depth limit is far below it).
pub(super) const MAX_DEPTH: usize = 512;

/// The nodes of `text`, which must hold exactly one JSON value (whitespace around it
/// allowed).
pub(super) fn nodes(text: &[u8]) -> Result<Vec<Node>, JsonError> {
    // Past its ASCII start (all of a usual answer), checked by the standard
    // library: a split between two ASCII bytes is a character boundary.
    let ascii = ascii_prefix(text);
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
        bytes: text,
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
    Ok(parser.nodes)
}

/// A parse stopped at an error, which the parser keeps ([`Parser::failure`]): the
/// stop itself carries nothing, so each value's result is one flag rather than a
/// 24-byte error passed back up through every level.
struct Stop;

/// How many of `bytes`' first bytes are ASCII, in steps of sixteen (the count stops
/// at the sixteen bytes that hold the first byte that is not, or at the last
/// sixteen). Sixty-four bytes a step while they are all ASCII, one test of four
/// 128-bit words taken together, then sixteen at a time. Checking UTF-8 byte by byte
/// takes about one instruction a byte; a test per sixteen bytes still cost about 1.4%
/// of the gateway's CPU on the deep query (perf), most of it the loop's own steps.
pub(super) fn ascii_prefix(bytes: &[u8]) -> usize {
    const HIGH: u128 = u128::from_le_bytes([0x80; 16]);
    let word = |chunk: &[u8]| <[u8; 16]>::try_from(chunk).map_or(HIGH, u128::from_le_bytes);
    let mut at = 0;
    while let Some(block) = bytes.get(at..).and_then(|rest| rest.first_chunk::<64>()) {
        let any = block
            .chunks_exact(16)
            .fold(0, |any, chunk| any | word(chunk));
        if any & HIGH != 0 {
            break;
        }
        at += 64;
    }
    at + bytes[at..]
        .chunks_exact(16)
        .take_while(|chunk| word(chunk) & HIGH == 0)
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

    /// The byte at `self.at`, past any whitespace. Whitespace is looked for only when
    /// the byte there is not one `expected` says is next (any byte above a space will
    /// do): answers seldom have any, so between two tokens the parser usually tests
    /// the one byte it needs to see anyway.
    #[inline(always)]
    fn next_of(&mut self, expected: impl Fn(u8) -> bool) -> Option<u8> {
        match self.bytes.get(self.at) {
            Some(&b) if expected(b) => Some(b),
            _ => {
                self.skip_ws();
                self.bytes.get(self.at).copied()
            }
        }
    }

    /// [`Parser::value`] for a value that whitespace comes before. Out of line: the
    /// usual answer never needs it.
    #[inline(never)]
    fn value_past_ws(&mut self, depth: usize, key: KeySpan) -> Result<(), Stop> {
        self.skip_ws();
        self.value(depth, key)
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
            Some(b' ' | b'\n' | b'\r' | b'\t') => return self.value_past_ws(depth, key),
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
        if self.next_of(|b| b > b' ') == Some(b']') {
            self.at += 1;
            return Ok(());
        }
        loop {
            if depth > MAX_DEPTH {
                self.skip_ws();
                return Err(self.fail("nested too deeply"));
            }
            self.value(depth, (0, 0, false))?;
            match self.next_of(|b| b == b',' || b == b']') {
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
        if self.next_of(|b| b > b' ') == Some(b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            if self.next_of(|b| b == b'"') != Some(b'"') {
                return Err(self.fail("expected a key"));
            }
            let key_start = self.at + 1;
            let escaped = self.string()?;
            let key_end = self.at - 1;
            if self.next_of(|b| b == b':') != Some(b':') {
                return Err(self.fail("expected : after a key"));
            }
            self.at += 1;
            if depth > MAX_DEPTH {
                self.skip_ws();
                return Err(self.fail("nested too deeply"));
            }
            self.value(depth, (key_start as u32, key_end as u32, escaped))?;
            match self.next_of(|b| b == b',' || b == b'}') {
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
