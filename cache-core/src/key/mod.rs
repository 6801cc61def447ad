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
//!
//! The files: this one is the key itself; `encoding` is the canonical encoder
//! ([`KeyHasher`]), `parts` what can be encoded ([`KeyPart`]), `builder` how a call's
//! parts make a key ([`KeyBuilder`], [`KeyParts`], [`KeyFunction`]).

mod builder;
mod encoding;
mod parts;

pub use builder::{CanonicalKey, KeyBuilder, KeyFunction, KeyParts};
pub use encoding::KeyHasher;
pub use parts::KeyPart;

use std::fmt;
use std::hash::BuildHasher;

use xxhash_rust::xxh3::xxh3_128;

/// A cache key: the 128-bit hash of its canonical parts.
///
/// It is `Copy`, and two keys are equal when their hashes are. Its
/// `Display` form is 32 lowercase hex digits, which [`CacheKey::from_hex`]
/// reads back (a remote store can use it as the key's name).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey(pub(super) u128);

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
