//! Execution: the public schema as an async-graphql dynamic schema whose resolvers
//! fetch from the subgraphs.
//!
//! async-graphql does what every GraphQL server must: parsing, validation against the
//! composed schema, variables, fragments, `@skip`/`@include`, aliases, introspection,
//! serial mutations, null propagation and the response in the query's field order.
//! The resolvers here only move data:
//!
//! - a **root field** renders the sub-selection its owner can answer ([`Planner`]) and
//!   sends it as one request;
//! - any **other field** reads its value from the parent object that a subgraph
//!   returned; when that subgraph could not provide it, the field is fetched from its
//!   owner through `_entities`, batched with every other object of the same level
//!   ([`EntityBatcher`]).
//!
//! Every request goes through the [`Fetch`] seam, which a cache can wrap.

use std::sync::Arc;

use async_graphql::dynamic::{
    self, Field, FieldFuture, FieldValue, InputValue, Object, ResolverContext, TypeRef,
};
use async_graphql::{PathSegment, ServerError};
use async_graphql_parser::types::{BaseType, Type};
use async_graphql_value::ConstValue;
use reqwest::header::{HeaderMap, HeaderValue};

use crate::batch::EntityBatcher;
use crate::caching::{CallKey, ResolverCache};
use crate::documents::{DocumentPlans, RenderedRoot};
use crate::plan::{ObjectPlan, Planner};
use crate::supergraph::{base_name, FieldDef, Kind, SubgraphId, Supergraph, KEY_ALIAS_PREFIX};
use crate::upstream::{Fetch, FetchKind, FetchRequest, PathItem, UpstreamError, UpstreamResponse};

/// Limits the schema enforces on every document.
#[derive(Debug, Clone)]
pub struct DocumentLimits {
    /// Maximum selection depth.
    pub max_depth: usize,
    /// Maximum number of fields (every alias counts, fragments expanded) in a document.
    pub max_fields: usize,
    /// Maximum number of root fields (each is one subgraph request).
    pub max_root_fields: usize,
}

/// An object some subgraph returned, with what is still to be fetched for it.
pub struct Node {
    pub value: ConstValue,
    pub plan: Arc<ObjectPlan>,
}

/// Per-request state, attached to each async-graphql request as data.
#[derive(Default)]
pub struct RequestScope {
    pub authorization: Option<HeaderValue>,
    /// The document's plans, when its operation has no variables (see
    /// [`DocumentPlans`]).
    pub plans: Option<Arc<DocumentPlans>>,
    /// The request's headers, for cache policies that key by them.
    pub headers: HeaderMap,
    pub batcher: EntityBatcher,
}

struct Engine {
    supergraph: Arc<Supergraph>,
    fetch: Arc<dyn Fetch>,
    cache: Option<Arc<ResolverCache>>,
}

/// Where a field sits in the supergraph, resolved once when the schema is built.
struct FieldSite {
    type_index: usize,
    field_index: usize,
    /// `Type.field`: the namespace a cache keys by.
    namespace: Arc<str>,
    root: Option<Root>,
    /// Whether the field's values are objects (then they are planned further).
    composite: bool,
}

#[derive(Clone, Copy)]
struct Root {
    owner: SubgraphId,
    mutation: bool,
}

type ResolveResult<'a> = async_graphql::Result<Option<FieldValue<'a>>>;

/// Build the public, executable schema.
///
/// `mode` picks async-graphql's validation: `Strict` for documents seen for the first
/// time, `Fast` (cycles, depth and complexity only) for documents that already passed
/// strict validation and are served from the document cache.
pub fn build_schema(
    supergraph: Arc<Supergraph>,
    fetch: Arc<dyn Fetch>,
    cache: Option<Arc<ResolverCache>>,
    limits: &DocumentLimits,
    mode: async_graphql::ValidationMode,
) -> Result<dynamic::Schema, dynamic::SchemaError> {
    let engine = Arc::new(Engine {
        supergraph: supergraph.clone(),
        fetch,
        cache,
    });
    let mut builder = dynamic::Schema::build(
        &supergraph.query_type,
        supergraph.mutation_type.as_deref(),
        None,
    )
    .limit_depth(limits.max_depth)
    .limit_recursive_depth(limits.max_depth.max(32))
    .limit_complexity(limits.max_fields)
    .limit_directives(16)
    .validation_mode(mode);
    for (type_index, (name, def)) in supergraph.types.iter().enumerate() {
        builder = match &def.kind {
            Kind::Object(object) => {
                let mutation = supergraph.mutation_type.as_deref() == Some(name.as_str());
                let is_root = mutation || *name == supergraph.query_type;
                let mut obj = Object::new(name.as_str());
                if let Some(d) = &def.description {
                    obj = obj.description(d.as_str());
                }
                for (field_index, (field_name, field)) in object.fields.iter().enumerate() {
                    let site = Arc::new(FieldSite {
                        type_index,
                        field_index,
                        namespace: format!("{name}.{field_name}").into(),
                        root: is_root.then(|| Root {
                            owner: field.owners[0],
                            mutation,
                        }),
                        composite: supergraph.is_composite(base_name(&field.ty)),
                    });
                    let engine = engine.clone();
                    let mut f = Field::new(field_name.as_str(), type_ref(&field.ty), move |ctx| {
                        // Most fields are already in their parent's data: answer those
                        // at once, without a boxed future (and without touching the
                        // shared reference counts of the engine and the site, which
                        // both worker threads would otherwise bounce between them).
                        if site.root.is_none() {
                            // A failure goes the async way, which reports it with its path.
                            if let Some(Ok(value)) = engine.present(&ctx, &site) {
                                return FieldFuture::Value(value);
                            }
                        }
                        let engine = engine.clone();
                        let site = site.clone();
                        FieldFuture::new(async move { engine.resolve(ctx, &site).await })
                    });
                    if let Some(d) = &field.description {
                        f = f.description(d.as_str());
                    }
                    for arg in &field.args {
                        f = f.argument(input_value(arg));
                    }
                    obj = obj.field(f);
                }
                builder.register(obj)
            }
            Kind::Enum(values) => builder.register(
                dynamic::Enum::new(name.as_str())
                    .items(values.iter().map(|v| dynamic::EnumItem::new(v))),
            ),
            Kind::InputObject(fields) => {
                let mut input = dynamic::InputObject::new(name.as_str());
                for f in fields {
                    input = input.field(input_value(f));
                }
                builder.register(input)
            }
            Kind::Scalar => builder.register(dynamic::Scalar::new(name.as_str())),
        };
    }
    builder.finish()
}

fn type_ref(ty: &Type) -> TypeRef {
    let base = match &ty.base {
        BaseType::Named(name) => TypeRef::named(name.to_string()),
        BaseType::List(inner) => TypeRef::List(Box::new(type_ref(inner))),
    };
    if ty.nullable {
        base
    } else {
        TypeRef::NonNull(Box::new(base))
    }
}

fn input_value(arg: &crate::supergraph::ArgDef) -> InputValue {
    let mut v = InputValue::new(arg.name.as_str(), type_ref(&arg.ty));
    if let Some(d) = &arg.default {
        v = v.default_value(d.clone());
    }
    if let Some(d) = &arg.description {
        v = v.description(d.as_str());
    }
    v
}

fn response_key(field: &async_graphql_parser::types::Field) -> &str {
    field
        .alias
        .as_ref()
        .map_or(field.name.node.as_str(), |a| a.node.as_str())
}

fn gateway_error(e: impl std::fmt::Display) -> async_graphql::Error {
    async_graphql::Error::new(e.to_string())
}

impl Engine {
    /// The field a site was built for (sites are built from this supergraph, so the
    /// lookup only fails if that invariant is broken; then the field errors).
    fn field_def(&self, site: &FieldSite) -> async_graphql::Result<&FieldDef> {
        let def = self
            .supergraph
            .types
            .get_index(site.type_index)
            .and_then(|(_, def)| match &def.kind {
                Kind::Object(o) => o.fields.get_index(site.field_index).map(|(_, f)| f),
                _ => None,
            });
        def.ok_or_else(|| {
            gateway_error(format!("{} is not in the composed schema", site.namespace))
        })
    }

    /// Resolve one field. A failure becomes a GraphQL error at this field's path and a
    /// null value (async-graphql's dynamic schema would otherwise drop both the path and
    /// the field from the response).
    async fn resolve<'a>(&self, ctx: ResolverContext<'a>, site: &FieldSite) -> ResolveResult<'a> {
        let field_ctx = ctx.ctx;
        let result = match site.root {
            Some(root) => self.resolve_root(ctx, site, root).await,
            None => self.resolve_nested(ctx, site).await,
        };
        result.or_else(|error| {
            let error = error.into_server_error(field_ctx.item.pos);
            field_ctx.add_error(field_ctx.set_error_path(error));
            Ok(None)
        })
    }

    /// A root field: one request to its owner with everything the owner can answer.
    async fn resolve_root<'a>(
        &self,
        ctx: ResolverContext<'a>,
        site: &FieldSite,
        root: Root,
    ) -> ResolveResult<'a> {
        let field = &ctx.ctx.item.node;
        let planner = Planner::new(&self.supergraph, ctx.ctx.query_env);
        let parent_type = match root.mutation {
            true => self.supergraph.mutation_type.as_deref().unwrap_or_default(),
            false => self.supergraph.query_type.as_str(),
        };
        let scope = ctx.ctx.data_unchecked::<Arc<RequestScope>>();
        let pos = ctx.ctx.item.pos;
        let rendered = match scope.plans.as_ref().and_then(|p| p.root(pos, root.owner)) {
            Some(rendered) => rendered,
            None => {
                let mut query = String::with_capacity(128);
                query.push_str(if root.mutation { "mutation{" } else { "{" });
                let selection_start =
                    planner.render_field(&mut query, root.owner, parent_type, field);
                query.push('}');
                let rendered = Arc::new(RenderedRoot {
                    query,
                    selection_start,
                });
                if let Some(plans) = &scope.plans {
                    plans.remember(pos, root.owner, rendered.clone());
                }
                rendered
            }
        };
        // The query text is copied only when a fetch really goes out (not on a hit).
        let response = match &self.cache {
            Some(cache) if !root.mutation => {
                let args: serde_json::Map<String, serde_json::Value> = ctx
                    .args
                    .as_index_map()
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone().into_json().unwrap_or_default()))
                    .collect();
                let call = CallKey {
                    parent: None,
                    args: Some(&args),
                    selection: &rendered.query[rendered.selection_start..],
                    headers: &scope.headers,
                };
                let fetch = self.fetch.clone();
                let namespace = site.namespace.clone();
                let authorization = scope.authorization.clone();
                let rendered = rendered.clone();
                cache
                    .get_or_fetch(&site.namespace, call, move || async move {
                        let request = FetchRequest {
                            subgraph: root.owner,
                            kind: FetchKind::Root {
                                namespace: &namespace,
                                mutation: false,
                            },
                            query: rendered.query.clone(),
                            variables: None,
                            authorization: authorization.as_ref(),
                        };
                        fetch.fetch(request).await
                    })
                    .await
            }
            _ => {
                let request = FetchRequest {
                    subgraph: root.owner,
                    kind: FetchKind::Root {
                        namespace: &site.namespace,
                        mutation: root.mutation,
                    },
                    query: rendered.query.clone(),
                    variables: None,
                    authorization: scope.authorization.as_ref(),
                };
                self.fetch.fetch(request).await
            }
        }
        .map_err(gateway_error)?;
        if root.mutation {
            if let Some(cache) = &self.cache {
                cache.after_mutation(&site.namespace, &response).await;
            }
        }
        let value = deliver(&ctx, &response, response_key(field));
        self.wrap(&planner, self.field_def(site)?, field, value, root.owner)
    }

    /// A nested field whose value its parent's data already holds, resolved without
    /// waiting (a failure to wrap it included); `None` when it must be fetched.
    fn present<'a>(
        &self,
        ctx: &ResolverContext<'a>,
        site: &FieldSite,
    ) -> Option<ResolveResult<'a>> {
        let node = ctx.parent_value.try_downcast_ref::<Node>().ok()?;
        let ConstValue::Object(data) = &node.value else {
            return None;
        };
        let field = &ctx.ctx.item.node;
        let value = data.get(response_key(field))?;
        if !site.composite {
            // A leaf: the subgraph's value as it is (null included).
            let value =
                (!matches!(value, ConstValue::Null)).then(|| FieldValue::value(value.clone()));
            return Some(Ok(value));
        }
        let planner = Planner::new(&self.supergraph, ctx.ctx.query_env);
        Some(
            self.field_def(site)
                .and_then(|def| self.wrap(&planner, def, field, value.clone(), node.plan.source)),
        )
    }

    /// A field of an object: read from the parent's data, or fetched from its owner.
    async fn resolve_nested<'a>(
        &self,
        ctx: ResolverContext<'a>,
        site: &FieldSite,
    ) -> ResolveResult<'a> {
        if let Some(result) = self.present(&ctx, site) {
            return result;
        }
        let node = ctx.parent_value.try_downcast_ref::<Node>()?;
        let field = &ctx.ctx.item.node;
        let key = response_key(field);
        let def = self.field_def(site)?;
        let planner = Planner::new(&self.supergraph, ctx.ctx.query_env);
        let owner = def.owner_for(node.plan.source);
        let fetch = node.plan.fetch_for(owner).ok_or_else(|| {
            gateway_error(format!(
                "no fetch planned for {} from subgraph {}",
                site.namespace, self.supergraph.subgraphs[owner].name
            ))
        })?;
        let representation = representation(node, &fetch.key).map_err(|missing| {
            gateway_error(format!(
                "cannot fetch {}: subgraph {} returned no key field {missing}",
                site.namespace, self.supergraph.subgraphs[node.plan.source].name
            ))
        })?;
        let scope = ctx.ctx.data_unchecked::<Arc<RequestScope>>();
        let entity = match &self.cache {
            Some(cache) => {
                let parent = representation.to_string();
                let call = CallKey {
                    parent: Some(&parent),
                    args: None,
                    selection: &fetch.selection,
                    headers: &scope.headers,
                };
                let (scope, fetcher) = (scope.clone(), self.fetch.clone());
                let (type_name, selection) = (node.plan.type_name.clone(), fetch.selection.clone());
                cache
                    .get_or_fetch(&fetch.namespace, call, move || async move {
                        let authorization = scope.authorization.as_ref();
                        scope
                            .batcher
                            .load(
                                &*fetcher,
                                owner,
                                &type_name,
                                &selection,
                                representation,
                                authorization,
                            )
                            .await
                    })
                    .await
            }
            None => {
                scope
                    .batcher
                    .load(
                        &*self.fetch,
                        owner,
                        &node.plan.type_name,
                        &fetch.selection,
                        representation,
                        scope.authorization.as_ref(),
                    )
                    .await
            }
        }
        .map_err(gateway_error)?;
        let value = deliver(&ctx, &entity, key);
        self.wrap(&planner, def, field, value, owner)
    }

    /// Turn a subgraph value into what async-graphql resolves further.
    fn wrap<'a>(
        &self,
        planner: &Planner<'_>,
        def: &FieldDef,
        field: &async_graphql_parser::types::Field,
        value: ConstValue,
        source: SubgraphId,
    ) -> ResolveResult<'a> {
        if matches!(value, ConstValue::Null) {
            return Ok(None);
        }
        let ty = base_name(&def.ty);
        if !self.supergraph.is_composite(ty) {
            return Ok(Some(FieldValue::value(value)));
        }
        let plan = planner.object_plan(ty, source, &field.selection_set.node);
        nodes(value, &def.ty, &plan).map(Some)
    }
}

fn nodes(
    value: ConstValue,
    ty: &Type,
    plan: &Arc<ObjectPlan>,
) -> async_graphql::Result<FieldValue<'static>> {
    match (value, &ty.base) {
        (ConstValue::Null, _) => Ok(FieldValue::NULL),
        (ConstValue::List(items), BaseType::List(inner)) => {
            let items: async_graphql::Result<Vec<_>> =
                items.into_iter().map(|v| nodes(v, inner, plan)).collect();
            Ok(FieldValue::list(items?))
        }
        (value @ ConstValue::Object(_), BaseType::Named(_)) => Ok(FieldValue::owned_any(Node {
            value,
            plan: plan.clone(),
        })),
        (other, _) => Err(gateway_error(format!(
            "a subgraph returned {other} where the schema expects {ty} (for {})",
            plan.type_name
        ))),
    }
}

/// `{__typename, key fields…}` for an `_entities` request.
fn representation(node: &Node, key: &[String]) -> Result<ConstValue, String> {
    let ConstValue::Object(data) = &node.value else {
        return Err(key.join(" "));
    };
    let mut rep = async_graphql_value::indexmap::IndexMap::with_capacity(key.len() + 1);
    rep.insert(
        async_graphql_value::Name::new("__typename"),
        ConstValue::String(node.plan.type_name.clone()),
    );
    let mut alias = String::with_capacity(KEY_ALIAS_PREFIX.len() + 8);
    for k in key {
        alias.clear();
        alias.push_str(KEY_ALIAS_PREFIX);
        alias.push_str(k);
        match data.get(alias.as_str()) {
            Some(v) if !matches!(v, ConstValue::Null) => {
                rep.insert(async_graphql_value::Name::new(k), v.clone());
            }
            _ => return Err(k.clone()),
        }
    }
    Ok(ConstValue::Object(rep))
}

/// This field's value in a subgraph response whose `data` is the parent object, after
/// reporting the errors that concern the field. Error paths in `response` are
/// relative to the parent: `[responseKey, …]` belongs to this field, a path-less
/// error to every field, any other path to a sibling (which reports it).
fn deliver(ctx: &ResolverContext<'_>, response: &UpstreamResponse, key: &str) -> ConstValue {
    for error in &response.errors {
        match error.path.split_first() {
            Some((PathItem::Key(k), rest)) if k == key => report(ctx, error, rest),
            None => report(ctx, error, &[]),
            Some(_) => {}
        }
    }
    match &response.data {
        Some(ConstValue::Object(data)) => data.get(key).cloned().unwrap_or(ConstValue::Null),
        _ => ConstValue::Null,
    }
}

/// Report a subgraph error at this field's path followed by `rest`.
fn report(ctx: &ResolverContext<'_>, error: &UpstreamError, rest: &[PathItem]) {
    let mut server_error = ctx
        .ctx
        .set_error_path(ServerError::new(error.message.clone(), None));
    server_error.path.extend(rest.iter().map(|p| match p {
        PathItem::Key(k) => PathSegment::Field(k.clone()),
        PathItem::Index(i) => PathSegment::Index(*i),
    }));
    ctx.ctx.add_error(server_error);
}
