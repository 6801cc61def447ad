//! The canonical encoding: every value tagged with its type and closed where it
//! must be, written into a 256-byte stack buffer and hashed in one pass with xxh3
//! (longer encodings spill into its streaming hasher, which gives the same digest).
//! Map entries are fed in sorted key order; numbers by their value.

use serde_json::{Number, Value};
use xxhash_rust::xxh3::{xxh3_128, Xxh3Default};

use super::{CacheKey, KeyPart};

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

pub(super) const SECTION_NAMESPACE: u8 = 0x20;
pub(super) const SECTION_PARENT: u8 = 0x21;
pub(super) const SECTION_ARGS: u8 = 0x22;
pub(super) const SECTION_SELECTION: u8 = 0x23;
pub(super) const SECTION_LABELLED: u8 = 0x24;

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
    pub(super) fn write_number(&mut self, n: &Number) {
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
    pub(super) fn section(&mut self, tag: u8) {
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
