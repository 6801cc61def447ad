//! The plan: what one operation of one document asks of which subgraph, worked out
//! once and kept with the document.
//!
//! A [`Plan`] is compiled from the parsed document, the operation and the values of
//! the variables its `@skip`/`@include` read (the only thing that changes which
//! fields are selected, because every composed type is an object type: a fragment's
//! type condition is settled when the document validates). Variables used as
//! arguments stay variables: each subgraph request declares the ones it uses, and
//! their values join the request at execution ([`crate::execute`]). So one plan
//! serves every request of the document, whatever its variables.
//!
//! The plan has two halves:
//! - **fetches**: per root field, the request its owner gets
//!   ([`RootFetch`]); per position where a subgraph's objects need fields another
//!   subgraph owns, the `_entities` selection to send for each such object
//!   ([`EntitySite`]). A subgraph is asked for everything it can answer beneath a
//!   field; where the selection needs a field it lacks, it is asked only for the
//!   entity's key fields, under reserved `_gw_k_*` aliases. Keys at hand need no
//!   trip: `author { id }` is answered from the key the posts subgraph returned.
//! - **shape**: the client's selection as a tree of [`Selection`]s, fields merged by
//!   response key in query order, each field saying where its value comes from
//!   ([`Source`]) and what its type allows (null, lists), so the response writer
//!   ([`crate::response`]) needs no schema lookups.

mod compile;
mod fields;
mod render;

use std::sync::Arc;

use async_graphql_parser::types::ExecutableDocument;
use async_graphql_value::{Name, Value};

pub use compile::{compile, request_body, PlanError, WriteVariables};
pub use fields::{Conditions, DocumentView};

use crate::supergraph::SubgraphId;

/// Index of an [`EntitySite`] in [`Plan::sites`].
pub type SiteId = u32;

/// Everything needed to execute one operation and write its answer.
#[derive(Debug)]
pub struct Plan {
    pub mutation: bool,
    /// The root type's selection: root fields are `Source::Root`, `__typename` or
    /// introspection.
    pub root: Selection,
    /// One per root field a subgraph answers, in query order. Each is a request of
    /// its own: a root field that fails (a non-null one nulls its response's whole
    /// `data`) takes no sibling with it, and each is cached under its own key.
    pub roots: Vec<RootFetch>,
    pub sites: Vec<EntitySite>,
    /// The operation's variables, as subgraph requests declare them.
    pub variables: Vec<VariableDecl>,
    /// The root fields async-graphql answers (`__schema`, `__type`), as a document of
    /// their own.
    pub introspection: Option<Arc<ExecutableDocument>>,
    /// Estimated heap bytes, for the document cache's weigher.
    pub heap_size: usize,
}

/// The selection for objects at one position of the response.
#[derive(Debug)]
pub struct Selection {
    /// The objects' type (what `__typename` answers).
    pub type_name: Arc<str>,
    /// Merged by response key, in query order.
    pub fields: Vec<OutField>,
    /// The entity fetches each object here needs.
    pub sites: Vec<SiteId>,
}

/// One response key of a selection.
#[derive(Debug)]
pub struct OutField {
    /// The response key (alias or name); subgraphs are asked under the same key.
    pub key: Box<str>,
    /// Where the field is in the document (for errors' `locations`).
    pub pos: async_graphql_parser::Pos,
    /// Nullability per list level, outermost first.
    pub shape: Shape,
    pub source: Source,
    /// The selection for object values.
    pub children: Option<Box<Selection>>,
}

/// Where a field's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The gateway answers it: the selection's type name.
    Typename,
    /// The object's own data, from the subgraph that returned the object.
    Carried,
    /// The answer to this entity fetch for the object.
    Site(SiteId),
    /// The answer to this root fetch (root selection only).
    Root(u32),
    /// async-graphql's introspection answer (root selection only).
    Introspection,
}

/// Whether null may stand at each list level of a type: `[Post]!` is `[false, true]`.
#[derive(Debug, Clone)]
pub struct Shape(pub Box<[bool]>);

impl Shape {
    pub fn nullable(&self, level: usize) -> bool {
        self.0.get(level).copied().unwrap_or(true)
    }

    /// Whether `level` is a list level (a deeper level follows).
    pub fn is_list(&self, level: usize) -> bool {
        level + 1 < self.0.len()
    }
}

/// A root field's request to its owner.
#[derive(Debug)]
pub struct RootFetch {
    pub subgraph: SubgraphId,
    /// `Query.me`, `Mutation.updateUser`: the cache namespace.
    pub namespace: Arc<str>,
    /// The response key, under which the subgraph answers too.
    pub key: Box<str>,
    /// The whole request text.
    pub query: Arc<str>,
    /// The field's sub-selection as sent (part of the cache key).
    pub selection: Box<str>,
    /// The arguments as written (part of the cache key, after variables).
    pub args: Vec<(Name, Value)>,
    /// Variables the request uses (indices into [`Plan::variables`]).
    pub variables: Vec<usize>,
    pub mutation: bool,
    /// Where the field is in [`Plan::root`]'s fields.
    pub out_field: usize,
    /// The whole request body when the field uses no variables (then it never
    /// changes); empty otherwise.
    pub body: bytes::Bytes,
    /// The cache key, when it depends on nothing of the request: filled by the cache
    /// layer on first use.
    pub constant_key: std::sync::OnceLock<u128>,
}

/// An `_entities` fetch for objects at one position: which subgraph, which key, which
/// selection.
#[derive(Debug)]
pub struct EntitySite {
    pub subgraph: SubgraphId,
    /// The name of the subgraph the objects came from (for errors).
    pub source: Box<str>,
    /// `Type.field`, or `Type.a+b` when one fetch covers several fields: the cache
    /// namespace.
    pub namespace: Arc<str>,
    pub type_name: Arc<str>,
    /// Key fields the owner accepts, each with the alias it was asked under.
    pub keys: Vec<(Box<str>, Box<str>)>,
    /// `...on T{…}`: the selection inside `_entities`.
    pub selection: Arc<str>,
    /// Variables the selection uses (indices into [`Plan::variables`]).
    pub variables: Vec<usize>,
}

/// A variable as a subgraph request declares it.
#[derive(Debug)]
pub struct VariableDecl {
    pub name: Name,
    /// `$name:Type` or `$name:Type=default`.
    pub declaration: Box<str>,
}
