//! Namespaces: a name such as `Type.field`, its counters and its policy.
//!
//! A [`Namespace`] is a cheap handle (one `Arc`) that a caller makes once,
//! with [`Cache::namespace`](crate::Cache::namespace) or
//! [`Cache::namespace_with`](crate::Cache::namespace_with), and passes to
//! every call. It carries its counters, so counting needs no lookup, and its
//! [`Policy`], so namespaces of one cache can have different ttls while
//! sharing one storage and one dedupe table. Handles of the same name share
//! the same counters.

use std::fmt;
use std::sync::Arc;

use crate::key::{CacheKey, KeyBuilder, KeyParts};
use crate::policy::Policy;
use crate::stats::Counters;

struct NamespaceInner<V> {
    name: Arc<str>,
    counters: Arc<Counters>,
    policy: Policy<V>,
}

/// A namespace of one cache: its name, counters and policy.
pub struct Namespace<V> {
    inner: Arc<NamespaceInner<V>>,
}

impl<V> Clone for Namespace<V> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<V> fmt::Debug for Namespace<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Namespace")
            .field("name", &self.inner.name)
            .field("policy", &self.inner.policy)
            .finish()
    }
}

impl<V> Namespace<V> {
    pub(crate) fn new(name: Arc<str>, counters: Arc<Counters>, policy: Policy<V>) -> Self {
        Self {
            inner: Arc::new(NamespaceInner {
                name,
                counters,
                policy,
            }),
        }
    }

    /// The name, e.g. `Query.user`.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The policy calls in this namespace follow.
    pub fn policy(&self) -> &Policy<V> {
        &self.inner.policy
    }

    /// The key of `parts` in this namespace: the policy's key function if
    /// it has one, the canonical key otherwise.
    pub fn key(&self, parts: &KeyParts<'_>) -> CacheKey {
        match &self.inner.policy.key_function {
            Some(key_function) => key_function.key(&self.inner.name, parts),
            None => CacheKey::canonical(&self.inner.name, parts),
        }
    }

    /// A canonical key builder for this namespace (it ignores any custom
    /// key function: use [`key`](Self::key) to honour it).
    pub fn key_builder(&self) -> KeyBuilder {
        KeyBuilder::new(&self.inner.name)
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.inner.counters
    }

    pub(crate) fn shared_name(&self) -> &Arc<str> {
        &self.inner.name
    }
}
