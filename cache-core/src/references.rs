//! References, invalidation patterns and the reference index.
//!
//! A fetched value can carry references: strings such as `User:u1` naming
//! what it was built from. `invalidate` takes patterns: an exact reference,
//! or a prefix ending in `*` (`User:*`).
//!
//! [`ReferenceIndex`] maps references to the keys that carry them, for back
//! ends that keep their entries in this process. It is one ordered map of
//! `(reference, key)` pairs behind a mutex, so an exact reference and a
//! prefix are both a range scan. Each pair remembers which stored entry put
//! it there, so removing an old entry that was replaced never unindexes its
//! successor.
//!
//! `Invalidation` (internal) is what an invalidation leaves on the fetches in flight
//! when it runs: the race check in the cache reads it before storing a
//! fetched value (see the `cache` module).

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::key::CacheKey;

/// A reference carried by a cached value, e.g. `User:u1`. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reference(Arc<str>);

impl Reference {
    /// The reference's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Reference {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Reference {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Reference {
    fn from(text: &str) -> Self {
        Self(Arc::from(text))
    }
}

impl From<String> for Reference {
    fn from(text: String) -> Self {
        Self(Arc::from(text))
    }
}

impl From<&String> for Reference {
    fn from(text: &String) -> Self {
        Self(Arc::from(text.as_str()))
    }
}

impl From<Arc<str>> for Reference {
    fn from(text: Arc<str>) -> Self {
        Self(text)
    }
}

/// What `invalidate` matches references against.
///
/// A pattern ending in `*` matches every reference that starts with the
/// rest (`User:*` matches `User:u1`; `*` alone matches every reference).
/// Any other pattern matches one reference exactly. Entries that carry no
/// reference are only dropped by `delete` and `clear`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum ReferencePattern {
    /// Exactly this reference.
    Exact(Reference),
    /// Every reference starting with this prefix.
    Prefix(Arc<str>),
}

impl ReferencePattern {
    /// Parses `User:u1` (exact) or `User:*` (prefix).
    pub fn parse(text: &str) -> Self {
        match text.strip_suffix('*') {
            Some(prefix) => Self::Prefix(Arc::from(prefix)),
            None => Self::Exact(Reference::from(text)),
        }
    }

    /// Whether `reference` matches.
    pub fn matches(&self, reference: &str) -> bool {
        match self {
            Self::Exact(exact) => exact.as_str() == reference,
            Self::Prefix(prefix) => reference.starts_with(&**prefix),
        }
    }
}

impl fmt::Debug for ReferencePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exact(exact) => write!(f, "{:?}", exact.as_str()),
            Self::Prefix(prefix) => write!(f, "\"{prefix}*\""),
        }
    }
}

/// Anything `invalidate` accepts: one pattern (`"User:*"`) or a collection
/// of them (`["User:u1", "Post:p1"]`, `&["Post:p1"]`, a `Vec<String>`).
pub trait IntoPatterns {
    /// The patterns.
    fn into_patterns(self) -> Vec<ReferencePattern>;
}

impl IntoPatterns for &str {
    fn into_patterns(self) -> Vec<ReferencePattern> {
        vec![ReferencePattern::parse(self)]
    }
}

impl IntoPatterns for String {
    fn into_patterns(self) -> Vec<ReferencePattern> {
        vec![ReferencePattern::parse(&self)]
    }
}

impl IntoPatterns for &String {
    fn into_patterns(self) -> Vec<ReferencePattern> {
        vec![ReferencePattern::parse(self)]
    }
}

impl IntoPatterns for ReferencePattern {
    fn into_patterns(self) -> Vec<ReferencePattern> {
        vec![self]
    }
}

impl<S: AsRef<str>> IntoPatterns for &[S] {
    fn into_patterns(self) -> Vec<ReferencePattern> {
        self.iter()
            .map(|s| ReferencePattern::parse(s.as_ref()))
            .collect()
    }
}

impl<S: AsRef<str>, const N: usize> IntoPatterns for [S; N] {
    fn into_patterns(self) -> Vec<ReferencePattern> {
        self.iter()
            .map(|s| ReferencePattern::parse(s.as_ref()))
            .collect()
    }
}

impl<S: AsRef<str>, const N: usize> IntoPatterns for &[S; N] {
    fn into_patterns(self) -> Vec<ReferencePattern> {
        self.iter()
            .map(|s| ReferencePattern::parse(s.as_ref()))
            .collect()
    }
}

impl<S: AsRef<str>> IntoPatterns for Vec<S> {
    fn into_patterns(self) -> Vec<ReferencePattern> {
        self.iter()
            .map(|s| ReferencePattern::parse(s.as_ref()))
            .collect()
    }
}

impl<S: AsRef<str>> IntoPatterns for &Vec<S> {
    fn into_patterns(self) -> Vec<ReferencePattern> {
        self.iter()
            .map(|s| ReferencePattern::parse(s.as_ref()))
            .collect()
    }
}

/// What an invalidation leaves on each fetch that was in flight when it ran.
#[derive(Debug)]
pub(crate) enum Invalidation {
    /// `clear()`: nothing fetched before it may be stored.
    All,
    /// `delete(key)`: the fetch for that key may not store.
    Key(CacheKey),
    /// `invalidate(patterns)`: a value carrying a matching reference may not
    /// be stored.
    Patterns(Arc<[ReferencePattern]>),
}

impl Invalidation {
    /// Whether this invalidation forbids storing a value fetched for `key`
    /// that carries `references`.
    pub(crate) fn forbids(&self, key: CacheKey, references: &[Reference]) -> bool {
        match self {
            Self::All => true,
            Self::Key(invalidated) => *invalidated == key,
            Self::Patterns(patterns) => references
                .iter()
                .any(|r| patterns.iter().any(|p| p.matches(r.as_str()))),
        }
    }
}

/// Maps references to the keys of the entries that carry them.
///
/// `insert` and `remove` take the entry's id (any number unique per stored
/// entry): `remove` only drops pairs that the same entry inserted.
#[derive(Default)]
pub struct ReferenceIndex {
    pairs: Mutex<BTreeMap<(Reference, CacheKey), u64>>,
}

impl ReferenceIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that entry `id`, stored under `key`, carries `references`.
    pub fn insert(&self, key: CacheKey, id: u64, references: &[Reference]) {
        if references.is_empty() {
            return;
        }
        let mut pairs = self.pairs.lock();
        for reference in references {
            pairs.insert((reference.clone(), key), id);
        }
    }

    /// Forgets entry `id`'s references, unless a later entry under the same
    /// key has re-indexed them.
    pub fn remove(&self, key: CacheKey, id: u64, references: &[Reference]) {
        if references.is_empty() {
            return;
        }
        let mut pairs = self.pairs.lock();
        for reference in references {
            let pair = (reference.clone(), key);
            if pairs.get(&pair) == Some(&id) {
                pairs.remove(&pair);
            }
        }
    }

    /// The keys carrying a reference that matches any of `patterns`, each
    /// once.
    pub fn matching(&self, patterns: &[ReferencePattern]) -> Vec<CacheKey> {
        let pairs = self.pairs.lock();
        let mut keys = Vec::new();
        for pattern in patterns {
            let (start, prefix): (Reference, &str) = match pattern {
                ReferencePattern::Exact(exact) => (exact.clone(), exact.as_str()),
                ReferencePattern::Prefix(prefix) => (Reference::from(&**prefix), &**prefix),
            };
            let exact = matches!(pattern, ReferencePattern::Exact(_));
            let lower = Bound::Included((start, CacheKey::from_u128(0)));
            for ((reference, key), _) in pairs.range((lower, Bound::Unbounded)) {
                let matched = if exact {
                    reference.as_str() == prefix
                } else {
                    reference.as_str().starts_with(prefix)
                };
                if !matched {
                    break;
                }
                keys.push(*key);
            }
        }
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Forgets everything.
    pub fn clear(&self) {
        self.pairs.lock().clear();
    }

    /// How many (reference, key) pairs are indexed.
    pub fn len(&self) -> usize {
        self.pairs.lock().len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
