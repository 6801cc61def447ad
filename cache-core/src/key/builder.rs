//! How a call's parts make a key: [`KeyBuilder`] writes each part (namespace, parent,
//! arguments, selection, labelled parts) in its own tagged section; [`KeyParts`]
//! hands them to a namespace's [`KeyFunction`], [`CanonicalKey`] by default.

use super::encoding::{
    SECTION_ARGS, SECTION_LABELLED, SECTION_NAMESPACE, SECTION_PARENT, SECTION_SELECTION,
};
use super::{CacheKey, KeyHasher, KeyPart};

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
