//! The plan: what one operation of one document asks of which subgraph, and how
//! the answer is shaped, worked out once and kept with the document.
//!
//! Planning is Hive's query planner (`hive-router-query-planner`, the planner
//! behind Hive Router's 199/199 in the federation audit), built once from the
//! supergraph ([`Planner`]). For each new document the planner gives a tree of
//! fetches (sequence, parallel, flatten, batch, condition); `build` runs it and
//! turns its plan into the gateway's own [`Plan`]:
//!
//! - **steps and fetches** ([`Step`], [`Fetch`], mapped from the planner's nodes in
//!   `steps`): every request text written out
//!   once, root fetches split into one request per root field (so that each root
//!   field is cached under its own `Type.field` namespace, and fails alone), and,
//!   when a cache keeps references, every entity in an answer asked for its key
//!   fields under reserved aliases (`references`);
//! - **shape** ([`Selection`]): the client's selection per concrete type, fields
//!   merged by response key in query order, with what each field's type allows
//!   (null, lists), so that the response writer ([`crate::response`]) needs no
//!   schema lookups (`shape`);
//! - **walks alike** ([`WalksAlike`]): the entity fetches that reach the same objects
//!   with the same representations, so that execution walks to them once, and those
//!   whose path goes on from an earlier fetch's, so that execution walks on from
//!   that fetch's objects (`alike`).
//!
//! The shape depends on the values of the variables the document's
//! `@skip`/`@include` read, so a plan is kept per operation and per combination of
//! them ([`Conditions`]); arguments stay variables, whose values join each
//! subgraph request at execution ([`crate::execute`]).

mod alike;
mod build;
mod fields;
mod operation;
mod references;
mod shape;
mod sizes;
mod sources;
mod steps;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_graphql::Variables;
use async_graphql_parser::types::{ExecutableDocument, OperationDefinition};
use async_graphql_value::{Name, Value};
use hive_router_query_planner::ast::selection_item::SelectionItem;
use hive_router_query_planner::planner::plan_nodes::FetchRewrite;
use hive_router_query_planner::planner::Planner as HivePlanner;

pub use alike::WalksAlike;
pub use fields::{Conditions, DocumentView};
pub use shape::{FieldKind, MemberHint, OutField, Scalar, Selection, Shape, Variant};
pub use sizes::{FetchRoom, SizeHints};
pub use sources::Sources;

use crate::supergraph::{SubgraphId, Supergraph};

/// A document the gateway cannot plan: the request gets the message as a GraphQL
/// error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot plan this operation: {0}")]
pub struct PlanError(pub String);

/// Index of a [`Fetch`] in [`Plan::fetches`].
pub type FetchId = u32;

/// Everything needed to execute one operation and write its answer.
#[derive(Debug)]
pub struct Plan {
    /// The operation's identity: a hash of its document's text and its name (never
    /// 0). Cached pieces carry the origin of the plan that fetched them, so a hit can
    /// tell an entry another operation stored ([`crate::caching`]).
    pub origin: u64,
    pub mutation: bool,
    /// The root type's selection.
    pub root: Selection,
    /// What to fetch, in order; `None` when the operation asks no subgraph
    /// (`__typename`, introspection).
    pub steps: Option<Step>,
    pub fetches: Vec<Fetch>,
    /// Which root fetch answers each root field, where one alone does.
    pub root_sources: RootSources,
    /// The entity fetches that may take an earlier fetch's walk, or walk on from its
    /// objects ([`WalksAlike`]).
    pub walks_alike: WalksAlike,
    /// The root fields async-graphql answers (`__schema`, `__type`), as a document of
    /// their own.
    pub introspection: Option<Arc<ExecutableDocument>>,
    /// Estimated heap bytes, for the document cache's weigher.
    pub heap_size: usize,
    /// The room the last request of this plan used (response bytes, entity merges).
    pub sizes: SizeHints,
}

/// The root fetch that alone answers each of a plan's root fields (its response
/// key), so that the root field is read from that one answer, not looked for in
/// every root answer. A root field that two root fetches answer has none (its
/// answers are merged), and a plan that may merge an answer into the root object
/// itself has none at all.
#[derive(Debug, Default)]
pub struct RootSources(Vec<(Box<str>, Option<FetchId>)>);

impl RootSources {
    /// The sources of `fetches`' root fields.
    fn of(fetches: &[Fetch]) -> RootSources {
        let mut sources: Vec<(Box<str>, Option<FetchId>)> = Vec::new();
        for (id, fetch) in fetches.iter().enumerate() {
            let at_root =
                |path: &[PathSegment]| path.iter().all(|s| matches!(s, PathSegment::Types(_)));
            match &fetch.kind {
                FetchKind::Root(root) => match &root.at {
                    None => {
                        for key in &root.keys {
                            match sources.iter_mut().find(|(k, _)| k == key) {
                                Some((_, source)) => *source = None,
                                None => sources.push((key.clone(), Some(id as FetchId))),
                            }
                        }
                    }
                    Some(at) if at_root(at) => return RootSources::default(),
                    Some(_) => {}
                },
                FetchKind::Entities(groups) => {
                    if groups.iter().any(|g| g.paths.iter().any(|p| at_root(p))) {
                        return RootSources::default();
                    }
                }
            }
        }
        RootSources(sources)
    }

    /// The one root fetch that answers the root field `key`, if one alone does.
    pub fn get(&self, key: &str) -> Option<FetchId> {
        self.0
            .iter()
            .find(|(k, _)| &**k == key)
            .and_then(|(_, f)| *f)
    }
}

/// The order of the fetches.
#[derive(Debug)]
pub enum Step {
    Sequence(Vec<Step>),
    Parallel(Vec<Step>),
    /// Run `then` when the boolean variable is true, `otherwise` when not.
    Condition {
        variable: Name,
        then: Option<Box<Step>>,
        otherwise: Option<Box<Step>>,
    },
    Fetch(FetchId),
}

/// One request to one subgraph.
#[derive(Debug)]
pub struct Fetch {
    pub subgraph: SubgraphId,
    pub mutation: bool,
    /// The whole request text.
    pub query: Arc<str>,
    /// The client's variables it sends.
    pub variables: Vec<Name>,
    pub kind: FetchKind,
    /// The whole request body when it sends no variables at all (a root field
    /// without variables: then it never changes); empty otherwise.
    pub body: bytes::Bytes,
    /// The room its last request used (an entity fetch's places and text).
    pub room: FetchRoom,
}

#[derive(Debug)]
pub enum FetchKind {
    /// A root field (or, with `at`, a root query whose answer is merged into every
    /// object at `at`).
    Root(RootFetch),
    /// `_entities` for the objects at one or more paths, one group per aliased
    /// `_entities` field.
    Entities(Vec<EntityGroup>),
}

/// A root field's request, as the cache keys it.
#[derive(Debug)]
pub struct RootFetch {
    /// `Query.me`, `Mutation.updateUser`: the cache namespace.
    pub namespace: Arc<str>,
    /// The response keys of the root fields it answers (errors of a failed fetch
    /// are reported at them).
    pub keys: Vec<Box<str>>,
    /// The field's sub-selection as sent (part of the cache key).
    pub selection: Box<str>,
    /// The arguments as written (part of the cache key, after variables).
    pub args: Vec<(Name, Value)>,
    /// Where the answer is merged: the root (`None`), or every object at a path.
    pub at: Option<Vec<PathSegment>>,
    /// The planner's renames of the answer's keys.
    pub output_rewrites: Vec<FetchRewrite>,
    /// The cache key, when it depends on nothing of the request: filled by the cache
    /// layer on first use.
    pub constant_key: OnceLock<u128>,
}

/// One aliased `_entities` field of an entity fetch.
#[derive(Debug)]
pub struct EntityGroup {
    /// The field's response key (`_entities`, or the batch's `_e0`).
    pub alias: Box<str>,
    /// The variable that carries its representations.
    pub variable: Box<str>,
    /// Where its objects are in the response.
    pub paths: Vec<Vec<PathSegment>>,
    /// What of each object the representation holds (`__typename`, keys, the
    /// inputs of `@requires`).
    pub requires: Vec<SelectionItem>,
    pub input_rewrites: Vec<FetchRewrite>,
    pub output_rewrites: Vec<FetchRewrite>,
    /// Per concrete type asked for: its cache namespace (`User.topPosts`,
    /// `Product.price+weight`).
    pub namespaces: Vec<(Box<str>, Arc<str>)>,
    /// The selection inside `_entities` as sent (part of the cache key).
    pub selection: Arc<str>,
}

impl EntityGroup {
    /// The index in [`EntityGroup::namespaces`] of an entity of type `ty`'s
    /// namespace (the group's first when none matches, as for an interface object's
    /// representation).
    pub fn namespace_index(&self, ty: &str) -> usize {
        self.namespaces
            .iter()
            .position(|(t, _)| &**t == ty)
            .unwrap_or(0)
    }

    /// The namespace of an entity of type `ty` ([`EntityGroup::namespace_index`]).
    pub fn namespace(&self, ty: &str) -> &Arc<str> {
        &self.namespaces[self.namespace_index(ty)].1
    }
}

/// One step of a path into the response.
#[derive(Debug, Clone)]
pub enum PathSegment {
    /// The field under this response key, the fetches whose answers may hold it
    /// ([`Sources`]), and where the walks found it last ([`MemberHint`]).
    Field(Box<str>, Sources, MemberHint),
    /// Every item of a list.
    List,
    /// Objects of one of these types only.
    Types(Vec<String>),
}

/// How long planning one operation may take before the request fails.
const PLANNING_TIMEOUT: Duration = Duration::from_secs(5);

/// The query planner of one supergraph.
pub struct Planner {
    hive: HivePlanner,
    supergraph: Arc<Supergraph>,
    /// Ask every entity in an answer for its key fields, so that cache entries can
    /// be invalidated by entity (only worth it with a cache).
    references: bool,
}

impl Planner {
    pub fn new(hive: HivePlanner, supergraph: Arc<Supergraph>, references: bool) -> Planner {
        Planner {
            hive,
            supergraph,
            references,
        }
    }

    /// The planner of a supergraph SDL (a file's, or one composed).
    pub fn from_sdl(sdl: &str, references: bool) -> Result<Planner, String> {
        let (model, hive) = Supergraph::from_sdl(sdl).map_err(|e| e.to_string())?;
        Ok(Planner::new(hive, Arc::new(model), references))
    }

    /// The planner of these subgraphs' SDL, composed as `--subgraph` does.
    pub fn compose(
        subgraphs: &[crate::supergraph::Subgraph],
        sdls: &[String],
        references: bool,
    ) -> Result<Planner, String> {
        let sdl =
            crate::supergraph::compose::compose(subgraphs, sdls).map_err(|e| e.to_string())?;
        Planner::from_sdl(&sdl, references)
    }

    pub fn supergraph(&self) -> &Arc<Supergraph> {
        &self.supergraph
    }

    /// The plan of a document of one operation, parsed here (for tests and
    /// benchmarks, which start from text).
    pub fn compile_text(&self, text: &str, variables: &Variables) -> Result<Plan, PlanError> {
        self.compile_text_operation(text, None, variables)
    }

    /// The plan of the operation `operation_name` selects (as a request's
    /// `operationName` does) in a document parsed here: for benchmarks and tests of
    /// documents that hold several operations.
    pub fn compile_text_operation(
        &self,
        text: &str,
        operation_name: Option<&str>,
        variables: &Variables,
    ) -> Result<Plan, PlanError> {
        let doc = async_graphql_parser::parse_query(text).map_err(|e| PlanError(e.to_string()))?;
        let op =
            crate::documents::operation(&doc, operation_name).map_err(|e| PlanError(e.message))?;
        self.compile(text, &doc, op, operation_name, variables)
    }

    /// The plan of `op` (operation `operation_name` of `doc`, the parse of `text`)
    /// for requests whose `@skip`/`@include` variables have the values in
    /// `variables`.
    pub fn compile(
        &self,
        text: &str,
        doc: &ExecutableDocument,
        op: &OperationDefinition,
        operation_name: Option<&str>,
        variables: &Variables,
    ) -> Result<Plan, PlanError> {
        build::compile(self, text, doc, op, operation_name, variables)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetch(kind: FetchKind) -> Fetch {
        Fetch {
            subgraph: 0,
            mutation: false,
            query: Arc::from("{ x }"),
            variables: Vec::new(),
            kind,
            body: bytes::Bytes::new(),
            room: FetchRoom::default(),
        }
    }

    fn root(keys: &[&str], at: Option<Vec<PathSegment>>) -> Fetch {
        fetch(FetchKind::Root(RootFetch {
            namespace: Arc::from("Query.x"),
            keys: keys.iter().map(|k| Box::from(*k)).collect(),
            selection: Box::from(""),
            args: Vec::new(),
            at,
            output_rewrites: Vec::new(),
            constant_key: OnceLock::new(),
        }))
    }

    fn entities(paths: Vec<Vec<PathSegment>>) -> Fetch {
        fetch(FetchKind::Entities(vec![EntityGroup {
            alias: Box::from("_entities"),
            variable: Box::from("representations"),
            paths,
            requires: Vec::new(),
            input_rewrites: Vec::new(),
            output_rewrites: Vec::new(),
            namespaces: vec![(Box::from("User"), Arc::from("User.x"))],
            selection: Arc::from(""),
        }]))
    }

    #[test]
    fn a_root_field_has_a_source_only_when_one_root_fetch_alone_answers_it() {
        let field = |k: &str| PathSegment::Field(Box::from(k), Sources::ALL, MemberHint::default());
        let fetches = vec![
            root(&["me"], None),
            root(&["top"], None),
            root(&["shared"], None),
            root(&["shared"], None),
            // Merged below the root: no effect on the root fields' sources.
            root(&["extra"], Some(vec![field("me")])),
            entities(vec![vec![field("me")]]),
        ];
        let sources = RootSources::of(&fetches);
        assert_eq!(sources.get("me"), Some(0));
        assert_eq!(sources.get("top"), Some(1));
        // Two root fetches answer it: its answers are merged, so it has none.
        assert_eq!(sources.get("shared"), None);
        assert_eq!(sources.get("extra"), None);
        assert_eq!(sources.get("absent"), None);

        // An answer merged into the root object itself (a path with no field, or
        // none at all): no root field has a source.
        let types = PathSegment::Types(vec!["Query".into()]);
        for merged_at_root in [
            root(&["more"], Some(vec![types.clone()])),
            entities(vec![vec![]]),
            entities(vec![vec![types.clone()]]),
        ] {
            let sources = RootSources::of(&[root(&["me"], None), merged_at_root]);
            assert_eq!(sources.get("me"), None);
        }
    }
}
