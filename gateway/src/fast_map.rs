//! The hash map of the request path's per-request tables.
//!
//! Their keys are small (indices, pointers, short strings) and come from the gateway
//! itself, not from clients, so a fast non-keyed hasher is safe; std's SipHash is
//! built to resist crafted keys, which these never are. The choice is measured in the
//! docs/cpu-and-peers.md ("Allocator and hashing").

/// The tables' hasher: ahash's, with fixed keys (a new map costs nothing to seed).
#[cfg(not(feature = "std-hasher"))]
pub type FastHasher = std::hash::BuildHasherDefault<ahash::AHasher>;

/// The tables' hasher in the `std-hasher` build, for comparison: std's SipHash.
#[cfg(feature = "std-hasher")]
pub type FastHasher = std::collections::hash_map::RandomState;

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = std::collections::HashMap<K, V, FastHasher>;
