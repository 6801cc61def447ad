//! How long values live: [`Ttl`], [`Policy`] and [`Fetched`].
//!
//! A [`Policy`] holds a namespace's `ttl` and `stale` durations, each fixed
//! or computed from the fetched value (as async-cache-dedupe allows), an
//! optional [`KeyFunction`], and the namespace's [`Strategy`] list. The
//! cache has a default policy; a namespace can carry its own (see
//! [`Cache::namespace_with`](crate::Cache::namespace_with)).
//!
//! A fetch returns a [`Fetched`]: the value, the references it carries, if
//! the fetch knows better than the policy its own ttl and stale, and what
//! the origin said about the value (its `Cache-Control` directives, whether
//! the key names one caller) for strategies to read.
//!
//! For one stored value the durations are resolved in this order: the
//! [`Fetched`] override, else the policy (fixed or computed), then each
//! strategy's [`admit`](crate::Strategy::admit) may change them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::cache_control::CacheDirectives;
use crate::key::KeyFunction;
use crate::references::Reference;
use crate::strategy::{NamedStrategy, Strategy};

/// A duration that is fixed or computed from the value.
pub enum Ttl<V> {
    /// The same for every value.
    Fixed(Duration),
    /// Computed from each fetched value.
    Computed(Arc<dyn Fn(&V) -> Duration + Send + Sync>),
}

impl<V> Ttl<V> {
    /// A duration computed from each value.
    pub fn from_fn(f: impl Fn(&V) -> Duration + Send + Sync + 'static) -> Self {
        Self::Computed(Arc::new(f))
    }

    /// The duration for `value`.
    pub fn resolve(&self, value: &V) -> Duration {
        match self {
            Self::Fixed(duration) => *duration,
            Self::Computed(f) => f(value),
        }
    }

    fn is_zero(&self) -> bool {
        matches!(self, Self::Fixed(d) if d.is_zero())
    }
}

impl<V> Clone for Ttl<V> {
    fn clone(&self) -> Self {
        match self {
            Self::Fixed(duration) => Self::Fixed(*duration),
            Self::Computed(f) => Self::Computed(Arc::clone(f)),
        }
    }
}

impl<V> From<Duration> for Ttl<V> {
    fn from(duration: Duration) -> Self {
        Self::Fixed(duration)
    }
}

impl<V> fmt::Debug for Ttl<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fixed(duration) => write!(f, "{duration:?}"),
            Self::Computed(_) => f.write_str("computed"),
        }
    }
}

/// A namespace's caching policy.
///
/// - `ttl`: how long a stored value is fresh. `0` keeps nothing: only
///   callers that overlap one fetch share its result.
/// - `stale`: how long after `ttl` the value may still be served at once
///   while one background refresh runs.
/// - `key_function`: replaces the canonical key derivation for
///   [`Namespace::key`](crate::Namespace::key).
/// - `strategies`: the hooks every call in the namespace goes through, in
///   order (see [`crate::strategy`]).
pub struct Policy<V> {
    pub(crate) ttl: Ttl<V>,
    pub(crate) stale: Ttl<V>,
    pub(crate) key_function: Option<Arc<dyn KeyFunction>>,
    pub(crate) strategies: Arc<[NamedStrategy<V>]>,
}

impl<V> Policy<V> {
    /// `ttl = 0`, `stale = 0`, no strategy: deduplicate only.
    pub fn new() -> Self {
        Self {
            ttl: Ttl::Fixed(Duration::ZERO),
            stale: Ttl::Fixed(Duration::ZERO),
            key_function: None,
            strategies: Arc::new([]),
        }
    }

    /// Adds `strategy` after the ones already there, named after its type.
    pub fn strategy(self, strategy: impl Strategy<V>) -> Self {
        self.named_strategy(NamedStrategy::unnamed(strategy))
    }

    /// Adds a named strategy after the ones already there.
    pub fn named_strategy(mut self, strategy: NamedStrategy<V>) -> Self {
        let mut list = self.strategies.to_vec();
        list.push(strategy);
        self.strategies = list.into();
        self
    }

    /// Replaces the strategy list.
    pub fn strategies(mut self, strategies: impl IntoIterator<Item = NamedStrategy<V>>) -> Self {
        self.strategies = strategies.into_iter().collect();
        self
    }

    /// The strategies, in the order they run.
    pub fn get_strategies(&self) -> &[NamedStrategy<V>] {
        &self.strategies
    }

    /// A fixed ttl.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Ttl::Fixed(ttl);
        self
    }

    /// A ttl computed from each fetched value.
    pub fn ttl_fn(mut self, f: impl Fn(&V) -> Duration + Send + Sync + 'static) -> Self {
        self.ttl = Ttl::from_fn(f);
        self
    }

    /// A fixed stale window.
    pub fn stale(mut self, stale: Duration) -> Self {
        self.stale = Ttl::Fixed(stale);
        self
    }

    /// A stale window computed from each fetched value.
    pub fn stale_fn(mut self, f: impl Fn(&V) -> Duration + Send + Sync + 'static) -> Self {
        self.stale = Ttl::from_fn(f);
        self
    }

    /// Derives this namespace's keys with `key_function`.
    pub fn key_function(mut self, key_function: impl KeyFunction) -> Self {
        self.key_function = Some(Arc::new(key_function));
        self
    }

    /// The ttl.
    pub fn get_ttl(&self) -> &Ttl<V> {
        &self.ttl
    }

    /// The stale window.
    pub fn get_stale(&self) -> &Ttl<V> {
        &self.stale
    }

    /// Whether anything under this policy can ever be stored: false for a
    /// fixed `ttl = 0` with a fixed `stale = 0` and no strategy. Calls under
    /// such a policy never touch the storage (they only deduplicate), and
    /// [`Fetched`] overrides are ignored there: use a computed ttl to let
    /// some values live.
    ///
    /// With a strategy the storage is read and written even at `ttl = 0`:
    /// a strategy's [`admit`](crate::Strategy::admit) may give a value a
    /// lifetime of its own (`origin-ttl` keeps what the origin allows) or
    /// keep it for [`recover`](crate::Strategy::recover) (`stale-if-error`).
    #[inline]
    pub fn may_store(&self) -> bool {
        !(self.ttl.is_zero() && self.stale.is_zero() && self.strategies.is_empty())
    }
}

impl<V> Default for Policy<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> Clone for Policy<V> {
    fn clone(&self) -> Self {
        Self {
            ttl: self.ttl.clone(),
            stale: self.stale.clone(),
            key_function: self.key_function.clone(),
            strategies: Arc::clone(&self.strategies),
        }
    }
}

impl<V> fmt::Debug for Policy<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("ttl", &self.ttl)
            .field("stale", &self.stale)
            .field("custom_key", &self.key_function.is_some())
            .field("strategies", &self.strategies)
            .finish()
    }
}

/// What a fetch returns: the value, its references, optional overrides of
/// the policy's durations, and what the origin said about the value.
///
/// ```
/// # use cache_core::Fetched;
/// # use std::time::Duration;
/// let fetched = Fetched::new("Ada")
///     .references(["User:u1", "Org:o1"])
///     .ttl(Duration::from_secs(30));
/// assert_eq!(fetched.get_references().len(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct Fetched<V> {
    pub(crate) value: V,
    pub(crate) references: Vec<Reference>,
    pub(crate) ttl: Option<Duration>,
    pub(crate) stale: Option<Duration>,
    pub(crate) cache_control: Option<CacheDirectives>,
    pub(crate) keyed_by_caller: bool,
}

impl<V> Fetched<V> {
    /// A value with no references, under the policy's durations.
    pub fn new(value: V) -> Self {
        Self {
            value,
            references: Vec::new(),
            ttl: None,
            stale: None,
            cache_control: None,
            keyed_by_caller: false,
        }
    }

    /// The `Cache-Control` directives the origin sent with the value (read
    /// by strategies such as `origin-ttl`; the cache itself ignores them).
    pub fn cache_control(mut self, directives: Option<CacheDirectives>) -> Self {
        self.cache_control = directives;
        self
    }

    /// Says that the call's key names one caller (it includes the caller's
    /// credentials), so a value the origin marked `private` may be kept
    /// under it without reaching another user.
    pub fn keyed_by_caller(mut self, yes: bool) -> Self {
        self.keyed_by_caller = yes;
        self
    }

    /// The origin's `Cache-Control` directives, if the fetch passed them.
    pub fn get_cache_control(&self) -> Option<&CacheDirectives> {
        self.cache_control.as_ref()
    }

    /// Whether the call's key names one caller.
    pub fn is_keyed_by_caller(&self) -> bool {
        self.keyed_by_caller
    }

    /// Adds references (e.g. `["User:u1"]`).
    pub fn references<R: Into<Reference>>(
        mut self,
        references: impl IntoIterator<Item = R>,
    ) -> Self {
        self.references
            .extend(references.into_iter().map(Into::into));
        self
    }

    /// Adds one reference.
    pub fn reference(mut self, reference: impl Into<Reference>) -> Self {
        self.references.push(reference.into());
        self
    }

    /// Overrides the policy's ttl for this value.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Overrides the policy's stale window for this value.
    pub fn stale(mut self, stale: Duration) -> Self {
        self.stale = Some(stale);
        self
    }

    /// The value.
    pub fn value(&self) -> &V {
        &self.value
    }

    /// The references.
    pub fn get_references(&self) -> &[Reference] {
        &self.references
    }

    /// The ttl override, if any.
    pub fn get_ttl(&self) -> Option<Duration> {
        self.ttl
    }

    /// The stale override, if any.
    pub fn get_stale(&self) -> Option<Duration> {
        self.stale
    }

    /// The value, dropping the rest.
    pub fn into_value(self) -> V {
        self.value
    }
}

impl<V> From<V> for Fetched<V> {
    fn from(value: V) -> Self {
        Self::new(value)
    }
}
