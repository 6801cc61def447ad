//! What can take part in a key: [`KeyPart`], and its implementations for JSON
//! values, strings, numbers, booleans, options, sequences and string-keyed maps.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Map, Number, Value};

use super::KeyHasher;

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
