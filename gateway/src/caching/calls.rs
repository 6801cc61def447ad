//! How a fetch becomes a cache call: its namespace's slot (the cache handle, the
//! policy's rule, the cross-operation counters), made once per namespace and shared,
//! and its key.
//!
//! A root field is keyed by its namespace, its arguments (those the policy picks) and
//! its sub-selection; an entity by its namespace, its representation and the
//! selection. Both add the values of the variables the selection uses and of the
//! headers the policy keys by. A call by a caller with credentials the key does not
//! include bypasses the cache.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use cache_core::{CacheKey, KeyParts, Namespace, Policy};

use super::{build_strategies, FieldPolicy, ResolverCache, StorageKind};
use crate::answer::piece::Piece;
use crate::plan::{EntityGroup, Fetch, Plan, RootFetch};
use crate::server::request::RequestInput;

/// One namespace's cache handle and rule, made once per namespace and shared (a
/// call holds it by one reference count).
pub(super) struct Slot {
    /// Which of the [`Tier`]s holds this namespace's entries.
    pub(super) tier: usize,
    pub(super) namespace: Namespace<Piece>,
    pub(super) rule: Arc<FieldPolicy>,
    /// Whether the key includes the caller's `authorization` (then calls carrying it
    /// are cached per caller instead of skipped).
    keyed_by_caller: bool,
    /// How long an entry is kept (the namespace's TTL; `None` when the policy skips
    /// it): what the answer's `Cache-Control` counts on.
    pub(super) kept_for: Option<Duration>,
    /// The key holds a request header: an answer with such a piece is per caller.
    pub(super) per_caller: bool,
    /// Calls of this namespace answered with a piece another operation fetched.
    pub(super) crossed: Crossed,
}

/// One namespace's calls answered with another operation's piece.
#[derive(Default)]
pub(super) struct Crossed {
    /// By a stored entry.
    pub(super) hits: AtomicU64,
    /// By a fetch another operation had in flight (or stored meanwhile).
    pub(super) in_flight: AtomicU64,
}

/// One fetch as the cache sees it: where it is counted and stored, its key
/// (`None`: it bypasses the cache), and whether that key names the caller.
pub struct Call {
    pub(super) slot: Arc<Slot>,
    pub(super) key: Option<CacheKey>,
    pub(super) per_caller: bool,
}

/// What the cache must know of a call's fetched piece, beyond the piece: the
/// policy's extra references and whether the key names the caller.
#[derive(Clone)]
pub(super) struct Keeping {
    pub(super) rule: Arc<FieldPolicy>,
    pub(super) per_caller: bool,
}

impl Slot {
    /// Mark a piece that came through this namespace's entries: how long the cache
    /// keeps it, and whether its key names the caller.
    pub(super) fn stamp(&self, piece: &mut Piece) {
        piece.kept_for = self.kept_for;
        piece.per_caller |= self.per_caller;
    }
}

impl Call {
    pub(super) fn keeping(&self) -> Keeping {
        Keeping {
            rule: self.slot.rule.clone(),
            per_caller: self.per_caller,
        }
    }
}

impl ResolverCache {
    pub(super) fn slot(&self, name: &str) -> Arc<Slot> {
        if let Some(slot) = self
            .slots
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
        {
            return slot.clone();
        }
        let mut rule = self
            .settings
            .policies
            .policy
            .get(name)
            .cloned()
            .unwrap_or_default();
        if self.settings.namespace_references {
            // Every entry of the field carries its name, for `POST /invalidate`.
            rule.references.push(format!(
                "{}{name}",
                super::invalidation::NAMESPACE_REFERENCE
            ));
        }
        let rule = Arc::new(rule);
        // A field's own list was checked when the policy file loaded.
        let strategies = match &rule.strategies {
            Some(specs) => build_strategies(specs, name).unwrap_or_else(|e| {
                tracing::warn!("{e}");
                Vec::new()
            }),
            None => self.settings.strategies.clone(),
        };
        let ttl = rule.ttl.map_or(self.settings.ttl, Duration::from_secs_f64);
        let policy = Policy::new()
            .ttl(ttl)
            .stale(
                rule.stale
                    .map_or(self.settings.stale, Duration::from_secs_f64),
            )
            .strategies(strategies);
        let kind = rule
            .storage
            .as_deref()
            .and_then(|s| StorageKind::parse(s).ok());
        let tier = kind
            .and_then(|k| self.tiers.iter().position(|t| t.kind == k))
            .unwrap_or(0);
        let keyed_by_caller = rule
            .key
            .headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("authorization"));
        let slot = Arc::new(Slot {
            tier,
            namespace: self.tiers[tier].cache.namespace_with(name, policy),
            keyed_by_caller,
            kept_for: (!rule.skip).then_some(ttl),
            per_caller: !rule.key.headers.is_empty(),
            rule,
            crossed: Crossed::default(),
        });
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        slots.entry(Arc::from(name)).or_insert(slot).clone()
    }

    /// Whether a call of `slot` by this request must bypass the cache: the policy
    /// skips the field, or the caller sent credentials the key does not include.
    fn bypassed(slot: &Slot, input: &RequestInput) -> bool {
        slot.rule.skip || (input.authorization.is_some() && !slot.keyed_by_caller)
    }

    /// A call of `slot` by this request under `key`.
    fn call(slot: Arc<Slot>, key: Option<CacheKey>, input: &RequestInput) -> Call {
        let per_caller = key.is_some() && slot.keyed_by_caller && input.authorization.is_some();
        Call {
            slot,
            key,
            per_caller,
        }
    }

    /// The call for root field `root` (fetch `fetch` of `plan`): keyed by its
    /// namespace, its arguments (those the policy picks) and its sub-selection, with
    /// the values of the variables it uses and of the headers the policy names.
    pub fn root_call(
        &self,
        _plan: &Plan,
        fetch: &Fetch,
        root: &RootFetch,
        input: &RequestInput,
    ) -> Call {
        let slot = self.slot(&root.namespace);
        if Self::bypassed(&slot, input) {
            return Self::call(slot, None, input);
        }
        let constant = fetch.variables.is_empty() && slot.rule.key.headers.is_empty();
        if constant {
            if let Some(&key) = root.constant_key.get() {
                return Self::call(slot, Some(CacheKey::from_u128(key)), input);
            }
        }
        let args: serde_json::Map<String, serde_json::Value> = root
            .args
            .iter()
            .filter(|(name, _)| {
                slot.rule
                    .key
                    .args
                    .as_ref()
                    .is_none_or(|only| only.iter().any(|a| a == name.as_str()))
            })
            .filter_map(|(name, value)| Some((name.to_string(), input.resolve(value)?)))
            .collect();
        let selection = self.selection_part(&slot, &root.selection, &fetch.variables, input);
        let key = slot
            .namespace
            .key(&KeyParts::new().args(&args).selection(&selection.as_ref()));
        if constant {
            let _ = root.constant_key.set(key.as_u128());
        }
        Self::call(slot, Some(key), input)
    }

    /// The call for an entity of `group` (of fetch `fetch`), in `namespace` (its
    /// type's, [`EntityGroup::namespace`]), whose representation (its `__typename`, key fields and `@requires` inputs,
    /// as JSON) is `representation`: two callers whose required inputs differ never
    /// share an entry.
    pub fn entity_call(
        &self,
        fetch: &Fetch,
        group: &EntityGroup,
        namespace: &str,
        representation: &str,
        input: &RequestInput,
    ) -> Call {
        let slot = self.slot(namespace);
        if Self::bypassed(&slot, input) {
            return Self::call(slot, None, input);
        }
        let selection = self.selection_part(&slot, &group.selection, &fetch.variables, input);
        let key = slot.namespace.key(
            &KeyParts::new()
                .parent(&representation)
                .selection(&selection.as_ref()),
        );
        Self::call(slot, Some(key), input)
    }

    /// The selection text, followed by the values of the variables it uses and of
    /// the headers the policy keys by (mercurius-cache's `extendKey`), byte for byte
    /// (`callers.rs`).
    fn selection_part<'s>(
        &self,
        slot: &Slot,
        selection: &'s str,
        variables: &[async_graphql_value::Name],
        input: &RequestInput,
    ) -> std::borrow::Cow<'s, str> {
        if variables.is_empty() && slot.rule.key.headers.is_empty() {
            return selection.into();
        }
        let mut text = selection.to_string();
        for name in variables {
            // As the operation coerces it: two documents that declare different
            // defaults for an unsent variable get different entries.
            text.push('\u{0}');
            match input.coerced(name) {
                Some(value) => text.push_str(&value.to_string()),
                None => text.push('?'),
            }
        }
        for header in &slot.rule.key.headers {
            text.push('\u{0}');
            super::callers::push_header(&mut text, input.headers.get(header.as_str()));
        }
        text.into()
    }
}
