//! Canonical, fast cache keys.
//!
//! A [`CacheKey`] is the 128-bit xxh3 hash of a canonical binary encoding of
//! structured parts: a namespace such as `Type.field`, the parent's identity,
//! the arguments and the selection.
//!
//! *Canonical* means that equal inputs give equal keys:
//! - JSON objects are fed in sorted key order, whatever order they were built in;
//! - a number hashes by its value, so `1` and `1.0` give the same key;
//! - every value is tagged with its type and closed by an end marker, so `"1"`
//!   and `1`, `["ab"]` and `["a", "b"]`, `[]` and `{}` all give different keys.
//!
//! *Fast* means that the encoding is written into a 256-byte stack buffer and
//! hashed in one pass. Nothing is formatted into a `String`. Encodings longer
//! than the buffer spill into xxh3's streaming hasher, which gives the same
//! digest as hashing the whole encoding at once.
//!
//! Anything can take part in a key by implementing [`KeyPart`]. A
//! [`KeyFunction`] replaces the canonical derivation for a namespace.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;

use serde_json::{Map, Number, Value};
use xxhash_rust::xxh3::{xxh3_128, Xxh3Default};

/// A cache key: the 128-bit hash of its canonical parts.
///
/// It is `Copy`, and two keys are equal when their hashes are. Its
/// `Display` form is 32 lowercase hex digits, which [`CacheKey::from_hex`]
/// reads back (a remote store can use it as the key's name).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey(u128);

impl CacheKey {
    /// Wraps a hash computed elsewhere, e.g. by a custom [`KeyFunction`].
    pub const fn from_u128(raw: u128) -> Self {
        Self(raw)
    }

    /// The 128-bit hash.
    pub const fn as_u128(self) -> u128 {
        self.0
    }

    /// The key of arbitrary bytes, e.g. a key string built by a custom
    /// [`KeyFunction`].
    pub fn from_bytes(bytes: &[u8]) -> Self {
        Self(xxh3_128(bytes))
    }

    /// Reads the 32-hex-digit form written by `Display`.
    pub fn from_hex(text: &str) -> Option<Self> {
        if text.len() != 32 {
            return None;
        }
        u128::from_str_radix(text, 16).ok().map(Self)
    }

    /// Starts a canonical key for `namespace` (e.g. `"Query.user"`).
    #[inline]
    pub fn builder(namespace: &str) -> KeyBuilder {
        KeyBuilder::new(namespace)
    }

    /// The canonical key of `parts` in `namespace`: what [`CanonicalKey`]
    /// derives.
    pub fn canonical(namespace: &str, parts: &KeyParts<'_>) -> Self {
        let mut builder = KeyBuilder::new(namespace);
        if let Some(parent) = parts.parent {
            builder.parent(parent);
        }
        if let Some(args) = parts.args {
            builder.args(args);
        }
        if let Some(selection) = parts.selection {
            builder.selection(selection);
        }
        builder.finish()
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CacheKey({:032x})", self.0)
    }
}

/// A `BuildHasher` for maps keyed by [`CacheKey`]: the key is already a
/// uniform hash, so it folds the two halves instead of hashing again.
#[derive(Clone, Copy, Debug, Default)]
pub struct PrehashedKeys;

impl BuildHasher for PrehashedKeys {
    type Hasher = PrehashedHasher;

    fn build_hasher(&self) -> PrehashedHasher {
        PrehashedHasher(0)
    }
}

/// The hasher built by [`PrehashedKeys`].
#[derive(Clone, Copy, Debug, Default)]
pub struct PrehashedHasher(u64);

impl std::hash::Hasher for PrehashedHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only reached if something other than a `CacheKey` is hashed with it.
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(29) ^ u64::from_le_bytes(word))
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u128(&mut self, n: u128) {
        self.0 ^= (n as u64) ^ ((n >> 64) as u64);
    }
}

// Value tags. Every encoded value starts with one of these; `END` closes
// sequences and maps. Section tags are disjoint from value tags.
const NULL: u8 = 0x01;
const FALSE: u8 = 0x02;
const TRUE: u8 = 0x03;
const INT: u8 = 0x04;
const UINT: u8 = 0x05;
const FLOAT: u8 = 0x06;
const STR: u8 = 0x07;
const SEQ: u8 = 0x08;
const MAP: u8 = 0x09;
const END: u8 = 0x0A;

const SECTION_NAMESPACE: u8 = 0x20;
const SECTION_PARENT: u8 = 0x21;
const SECTION_ARGS: u8 = 0x22;
const SECTION_SELECTION: u8 = 0x23;
const SECTION_LABELLED: u8 = 0x24;

const BUFFER: usize = 256;
/// Map entries sorted on the stack; larger unsorted maps use a `Vec`.
const STACK_ENTRIES: usize = 16;

/// Writes the canonical encoding of values and hashes it.
///
/// [`KeyPart`] implementations call its `write_*` methods. Every method
/// writes one complete, self-delimiting value, so any sequence of calls is
/// unambiguous.
pub struct KeyHasher {
    buf: [u8; BUFFER],
    len: usize,
    spill: Option<Box<Xxh3Default>>,
}

impl Default for KeyHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyHasher {
    /// An empty encoding.
    #[inline]
    pub fn new() -> Self {
        Self {
            buf: [0; BUFFER],
            len: 0,
            spill: None,
        }
    }

    /// The hash of everything written so far (writing may go on after).
    #[inline]
    pub fn finish(&self) -> CacheKey {
        match &self.spill {
            None => CacheKey(xxh3_128(&self.buf[..self.len])),
            Some(stream) => {
                let mut stream = stream.clone();
                stream.update(&self.buf[..self.len]);
                CacheKey(stream.digest128())
            }
        }
    }

    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        if end <= BUFFER {
            self.buf[self.len..end].copy_from_slice(bytes);
            self.len = end;
        } else {
            self.put_spilling(bytes);
        }
    }

    #[inline]
    fn put_byte(&mut self, byte: u8) {
        if self.len < BUFFER {
            self.buf[self.len] = byte;
            self.len += 1;
        } else {
            self.put_spilling(&[byte]);
        }
    }

    #[cold]
    fn put_spilling(&mut self, bytes: &[u8]) {
        let stream = self
            .spill
            .get_or_insert_with(|| Box::new(Xxh3Default::new()));
        stream.update(&self.buf[..self.len]);
        self.len = 0;
        if bytes.len() >= BUFFER {
            stream.update(bytes);
        } else {
            self.buf[..bytes.len()].copy_from_slice(bytes);
            self.len = bytes.len();
        }
    }

    #[inline]
    fn put_len(&mut self, mut n: usize) {
        // LEB128: one byte for lengths under 128.
        if n < 0x80 {
            self.put_byte(n as u8);
            return;
        }
        let mut tmp = [0u8; 10];
        let mut i = 0;
        loop {
            let low = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                tmp[i] = low;
                i += 1;
                break;
            }
            tmp[i] = low | 0x80;
            i += 1;
        }
        self.put(&tmp[..i]);
    }

    /// Writes `null`.
    #[inline]
    pub fn write_null(&mut self) {
        self.put_byte(NULL);
    }

    /// Writes a boolean.
    #[inline]
    pub fn write_bool(&mut self, value: bool) {
        self.put_byte(if value { TRUE } else { FALSE });
    }

    /// Writes an integer.
    #[inline]
    pub fn write_i64(&mut self, value: i64) {
        self.put_byte(INT);
        self.put(&value.to_le_bytes());
    }

    /// Writes an unsigned integer; values that fit in `i64` encode as
    /// [`write_i64`](Self::write_i64) does.
    #[inline]
    pub fn write_u64(&mut self, value: u64) {
        match i64::try_from(value) {
            Ok(signed) => self.write_i64(signed),
            Err(_) => {
                self.put_byte(UINT);
                self.put(&value.to_le_bytes());
            }
        }
    }

    /// Writes a float. Integral values encode as integers (so `1.0` equals
    /// `1`), `-0.0` as `0`, and every NaN alike.
    pub fn write_f64(&mut self, value: f64) {
        const TWO_63: f64 = 9_223_372_036_854_775_808.0;
        const TWO_64: f64 = 18_446_744_073_709_551_616.0;
        if value.fract() == 0.0 {
            if (-TWO_63..TWO_63).contains(&value) {
                return self.write_i64(value as i64);
            }
            if (0.0..TWO_64).contains(&value) {
                return self.write_u64(value as u64);
            }
        }
        let bits = if value.is_nan() {
            f64::NAN.to_bits()
        } else {
            value.to_bits()
        };
        self.put_byte(FLOAT);
        self.put(&bits.to_le_bytes());
    }

    /// Writes a string.
    #[inline]
    pub fn write_str(&mut self, value: &str) {
        self.put_byte(STR);
        self.put_len(value.len());
        self.put(value.as_bytes());
    }

    /// Writes a sequence; order matters.
    pub fn write_seq<I>(&mut self, items: I)
    where
        I: IntoIterator,
        I::Item: KeyPart,
    {
        self.put_byte(SEQ);
        for item in items {
            item.feed(self);
        }
        self.put_byte(END);
    }

    /// Writes a map whatever the order of `entries`: they are fed sorted by
    /// key. Maps of up to 16 entries are sorted on the stack. Duplicate keys
    /// (which JSON objects never have) are kept, in no defined order.
    pub fn write_map<'a, P, I>(&mut self, entries: I)
    where
        P: KeyPart + ?Sized + 'a,
        I: IntoIterator<Item = (&'a str, &'a P)>,
        I::IntoIter: Clone,
    {
        let entries = entries.into_iter();
        self.put_byte(MAP);
        if is_sorted_by_key(entries.clone()) {
            for (key, value) in entries {
                self.write_entry(key, value);
            }
        } else {
            self.write_unsorted(entries);
        }
        self.put_byte(END);
    }

    fn write_unsorted<'a, P, I>(&mut self, entries: I)
    where
        P: KeyPart + ?Sized + 'a,
        I: Iterator<Item = (&'a str, &'a P)> + Clone,
    {
        let mut first = entries.clone();
        let Some(head) = first.next() else {
            return;
        };
        let count = entries.clone().count();
        if count <= STACK_ENTRIES {
            let mut stack = [head; STACK_ENTRIES];
            for (slot, entry) in stack.iter_mut().zip(entries) {
                *slot = entry;
            }
            let sorted = &mut stack[..count];
            sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (key, value) in sorted.iter() {
                self.write_entry(key, *value);
            }
        } else {
            let mut heap: Vec<(&str, &P)> = entries.collect();
            heap.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (key, value) in heap {
                self.write_entry(key, value);
            }
        }
    }

    #[inline]
    fn write_entry<P: KeyPart + ?Sized>(&mut self, key: &str, value: &P) {
        self.write_str(key);
        value.feed(self);
    }

    /// Writes a JSON value canonically.
    #[inline]
    pub fn write_json(&mut self, value: &Value) {
        match value {
            Value::Null => self.write_null(),
            Value::Bool(b) => self.write_bool(*b),
            Value::Number(n) => self.write_number(n),
            Value::String(s) => self.write_str(s),
            Value::Array(items) => self.write_seq(items),
            Value::Object(map) => self.write_map(map.iter().map(|(k, v)| (k.as_str(), v))),
        }
    }

    #[inline]
    fn write_number(&mut self, n: &Number) {
        if let Some(i) = n.as_i64() {
            self.write_i64(i);
        } else if let Some(u) = n.as_u64() {
            self.write_u64(u);
        } else if let Some(f) = n.as_f64() {
            self.write_f64(f);
        } else {
            // Only reachable with serde_json's `arbitrary_precision`: hash
            // the number's text, tagged as a float.
            self.put_byte(FLOAT);
            self.write_str(&n.to_string());
        }
    }

    #[inline]
    fn section(&mut self, tag: u8) {
        self.put_byte(tag);
    }
}

fn is_sorted_by_key<'a, P: ?Sized + 'a>(
    mut entries: impl Iterator<Item = (&'a str, &'a P)>,
) -> bool {
    let Some((mut previous, _)) = entries.next() else {
        return true;
    };
    for (key, _) in entries {
        if key <= previous {
            return false;
        }
        previous = key;
    }
    true
}

/// Something that can be part of a key: it feeds its canonical encoding to a
/// [`KeyHasher`].
///
/// Implemented for JSON values, strings, numbers, booleans, options,
/// sequences and string-keyed maps. Implement it for your own types (wrap a
/// foreign type in a newtype) with the hasher's `write_*` methods; two values
/// that should share cache entries must write the same calls.
pub trait KeyPart {
    /// Writes this value into `hasher`.
    fn feed(&self, hasher: &mut KeyHasher);
}

impl<T: KeyPart + ?Sized> KeyPart for &T {
    fn feed(&self, hasher: &mut KeyHasher) {
        (**self).feed(hasher)
    }
}

impl<T: KeyPart + ?Sized> KeyPart for Box<T> {
    fn feed(&self, hasher: &mut KeyHasher) {
        (**self).feed(hasher)
    }
}

impl<T: KeyPart + ?Sized> KeyPart for Arc<T> {
    fn feed(&self, hasher: &mut KeyHasher) {
        (**self).feed(hasher)
    }
}

impl KeyPart for Value {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_json(self)
    }
}

impl KeyPart for Map<String, Value> {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_map(self.iter().map(|(k, v)| (k.as_str(), v)))
    }
}

impl KeyPart for Number {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_number(self)
    }
}

impl KeyPart for str {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_str(self)
    }
}

impl KeyPart for String {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_str(self)
    }
}

impl KeyPart for bool {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_bool(*self)
    }
}

macro_rules! signed_key_part {
    ($($t:ty),*) => {$(
        impl KeyPart for $t {
            fn feed(&self, hasher: &mut KeyHasher) {
                hasher.write_i64(i64::from(*self))
            }
        }
    )*};
}
signed_key_part!(i8, i16, i32, i64);

macro_rules! unsigned_key_part {
    ($($t:ty),*) => {$(
        impl KeyPart for $t {
            fn feed(&self, hasher: &mut KeyHasher) {
                hasher.write_u64(u64::from(*self))
            }
        }
    )*};
}
unsigned_key_part!(u8, u16, u32, u64);

impl KeyPart for usize {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_u64(*self as u64)
    }
}

impl KeyPart for isize {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_i64(*self as i64)
    }
}

impl KeyPart for f64 {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_f64(*self)
    }
}

impl KeyPart for f32 {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_f64(f64::from(*self))
    }
}

/// `None` encodes as `null`.
impl<T: KeyPart> KeyPart for Option<T> {
    fn feed(&self, hasher: &mut KeyHasher) {
        match self {
            Some(value) => value.feed(hasher),
            None => hasher.write_null(),
        }
    }
}

impl<T: KeyPart> KeyPart for [T] {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_seq(self)
    }
}

impl<T: KeyPart, const N: usize> KeyPart for [T; N] {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_seq(self)
    }
}

impl<T: KeyPart> KeyPart for Vec<T> {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_seq(self)
    }
}

impl<K: AsRef<str>, T: KeyPart> KeyPart for BTreeMap<K, T> {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_map(self.iter().map(|(k, v)| (k.as_ref(), v)))
    }
}

impl<K: AsRef<str>, T: KeyPart, S> KeyPart for HashMap<K, T, S> {
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write_map(self.iter().map(|(k, v)| (k.as_ref(), v)))
    }
}

/// Builds a canonical [`CacheKey`] from its parts.
///
/// ```
/// # use cache_core::CacheKey;
/// # use serde_json::json;
/// let key = CacheKey::builder("User.posts")
///     .parent(&json!({"__typename": "User", "id": "u1"}))
///     .args(&json!({"first": 10}))
///     .selection(&["id", "title"])
///     .finish();
/// # let _ = key;
/// ```
///
/// The methods take `&mut self`, so the 256-byte buffer is never moved
/// while the key is built.
///
/// Each part is written in its own tagged section, so a value given as the
/// parent never collides with the same value given as the arguments, and an
/// absent part differs from a `null` one. Sections are hashed in call order:
/// call them in the same order everywhere (parent, args, selection is the
/// order [`CacheKey::canonical`] uses).
pub struct KeyBuilder {
    hasher: KeyHasher,
}

impl KeyBuilder {
    /// Starts a key for `namespace`.
    #[inline]
    pub fn new(namespace: &str) -> Self {
        let mut hasher = KeyHasher::new();
        hasher.section(SECTION_NAMESPACE);
        hasher.write_str(namespace);
        Self { hasher }
    }

    /// The parent's identity (e.g. `{"__typename": "User", "id": "u1"}`).
    #[inline]
    pub fn parent<P: KeyPart + ?Sized>(&mut self, parent: &P) -> &mut Self {
        self.hasher.section(SECTION_PARENT);
        parent.feed(&mut self.hasher);
        self
    }

    /// The arguments of the call.
    #[inline]
    pub fn args<P: KeyPart + ?Sized>(&mut self, args: &P) -> &mut Self {
        self.hasher.section(SECTION_ARGS);
        args.feed(&mut self.hasher);
        self
    }

    /// The selection (e.g. the requested field names, in query order).
    #[inline]
    pub fn selection<P: KeyPart + ?Sized>(&mut self, selection: &P) -> &mut Self {
        self.hasher.section(SECTION_SELECTION);
        selection.feed(&mut self.hasher);
        self
    }

    /// Any other labelled part (e.g. `("locale", "fr")`).
    #[inline]
    pub fn part<P: KeyPart + ?Sized>(&mut self, label: &str, part: &P) -> &mut Self {
        self.hasher.section(SECTION_LABELLED);
        self.hasher.write_str(label);
        part.feed(&mut self.hasher);
        self
    }

    /// The key.
    #[inline]
    pub fn finish(&self) -> CacheKey {
        self.hasher.finish()
    }
}

/// The parts of a call, handed to a [`KeyFunction`].
#[derive(Clone, Copy, Default)]
pub struct KeyParts<'a> {
    /// The parent's identity, if the call has a parent.
    pub parent: Option<&'a dyn KeyPart>,
    /// The arguments, if any.
    pub args: Option<&'a dyn KeyPart>,
    /// The selection, if any.
    pub selection: Option<&'a dyn KeyPart>,
}

impl<'a> KeyParts<'a> {
    /// No parts.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the parent's identity.
    pub fn parent(mut self, parent: &'a dyn KeyPart) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Sets the arguments.
    pub fn args(mut self, args: &'a dyn KeyPart) -> Self {
        self.args = Some(args);
        self
    }

    /// Sets the selection.
    pub fn selection(mut self, selection: &'a dyn KeyPart) -> Self {
        self.selection = Some(selection);
        self
    }
}

/// Derives a namespace's keys; set one with
/// [`Policy::key_function`](crate::Policy::key_function) to replace the
/// canonical derivation, e.g. to ignore the selection or to key on one
/// argument only.
///
/// Closures `Fn(&str, &KeyParts) -> CacheKey` implement it.
pub trait KeyFunction: Send + Sync + 'static {
    /// The key of `parts` in `namespace`.
    fn key(&self, namespace: &str, parts: &KeyParts<'_>) -> CacheKey;
}

impl<F> KeyFunction for F
where
    F: Fn(&str, &KeyParts<'_>) -> CacheKey + Send + Sync + 'static,
{
    fn key(&self, namespace: &str, parts: &KeyParts<'_>) -> CacheKey {
        self(namespace, parts)
    }
}

/// The default [`KeyFunction`]: [`CacheKey::canonical`].
#[derive(Clone, Copy, Debug, Default)]
pub struct CanonicalKey;

impl KeyFunction for CanonicalKey {
    fn key(&self, namespace: &str, parts: &KeyParts<'_>) -> CacheKey {
        CacheKey::canonical(namespace, parts)
    }
}
