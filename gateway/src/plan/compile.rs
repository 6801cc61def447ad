//! Compiling a plan: one walk of the operation's selection against the supergraph
//! that renders each subgraph's request text and, beside it, the response's shape.

use std::sync::Arc;

use async_graphql::Variables;
use async_graphql_parser::types::{
    BaseType, DocumentOperations, ExecutableDocument, OperationDefinition, OperationType,
    Selection as AstSelection, SelectionSet, Type,
};
use async_graphql_parser::Positioned;
use async_graphql_value::Name;

use super::fields::{DocumentView, Merged};
use super::render;
use super::{
    EntitySite, OutField, Plan, RootFetch, Selection, Shape, SiteId, Source, VariableDecl,
};
use crate::supergraph::{base_name, ObjectDef, SubgraphId, Supergraph, KEY_ALIAS_PREFIX};

/// A document the supergraph cannot plan. Validation rejects such documents first, so
/// this means the two disagree; the request gets the message as a GraphQL error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot plan this operation: {0}")]
pub struct PlanError(pub String);

/// The plan of `op` (an operation of `doc`) for requests whose `@skip`/`@include`
/// variables have the values in `variables`.
pub fn compile(
    supergraph: &Supergraph,
    doc: &ExecutableDocument,
    op: &OperationDefinition,
    variables: &Variables,
) -> Result<Plan, PlanError> {
    let view = DocumentView {
        fragments: &doc.fragments,
        variables,
        operation: op,
    };
    let mutation = op.ty == OperationType::Mutation;
    let root_type = match op.ty {
        OperationType::Query => supergraph.query_type.as_str(),
        OperationType::Mutation => supergraph
            .mutation_type
            .as_deref()
            .ok_or_else(|| PlanError("the schema has no mutations".into()))?,
        OperationType::Subscription => {
            return Err(PlanError("subscriptions are not supported".into()))
        }
    };
    let mut compiler = Compiler {
        supergraph,
        view,
        roots: Vec::new(),
        sites: Vec::new(),
        used: Vec::new(),
        declared: declarations(op),
    };
    let mut fields = Vec::new();
    let mut introspection = Vec::new();
    for m in view.merged(Some(root_type), &[&op.selection_set.node]) {
        match m.field.name.node.as_str() {
            "__typename" => fields.push(OutField {
                key: m.key.into(),
                pos: position(&m),
                shape: Shape(Box::new([false])),
                source: Source::Typename,
                children: None,
            }),
            name @ ("__schema" | "__type") => {
                introspection.push(m.key);
                fields.push(OutField {
                    key: m.key.into(),
                    pos: position(&m),
                    shape: Shape(Box::new([name == "__type"])),
                    source: Source::Introspection,
                    children: None,
                });
            }
            _ => compiler.root(root_type, mutation, &m, &mut fields)?,
        }
    }
    let introspection = (!introspection.is_empty()).then(|| {
        Arc::new(introspection_document(
            doc,
            op,
            &view,
            root_type,
            &introspection,
        ))
    });
    let root = Selection {
        type_name: root_type.into(),
        fields,
        sites: Vec::new(),
    };
    let mut plan = Plan {
        mutation,
        root,
        roots: compiler.roots,
        sites: compiler.sites,
        variables: compiler.declared,
        introspection,
        heap_size: 0,
    };
    plan.heap_size = heap_size(&plan);
    Ok(plan)
}

struct Compiler<'a> {
    supergraph: &'a Supergraph,
    view: DocumentView<'a>,
    roots: Vec<RootFetch>,
    sites: Vec<EntitySite>,
    /// The variables used by each request text being rendered (a site is rendered in
    /// the middle of its parent's text, so this is a stack).
    used: Vec<Vec<Name>>,
    declared: Vec<VariableDecl>,
}

impl Compiler<'_> {
    /// A root field: its owner's request. Pushes its output field; returns its index.
    fn root(
        &mut self,
        root_type: &str,
        mutation: bool,
        m: &Merged<'_>,
        fields: &mut Vec<OutField>,
    ) -> Result<(), PlanError> {
        let name = m.field.name.node.as_str();
        let def = self
            .supergraph
            .field(root_type, name)
            .ok_or_else(|| PlanError(format!("{root_type}.{name} is not in the schema")))?;
        let subgraph = def.owners[0];
        let shape = shape_of(&def.ty);
        self.used.push(Vec::new());
        let mut field = String::with_capacity(64);
        let (selection_start, children) = self.field(&mut field, subgraph, root_type, m)?;
        let variables = self.variables_used()?;
        let mut query = String::with_capacity(field.len() + 16);
        if variables.is_empty() {
            query.push_str(if mutation { "mutation{" } else { "{" });
        } else {
            render::header(&mut query, mutation, &self.declared, &variables);
            query.push('{');
        }
        query.push_str(&field);
        query.push('}');
        let index = self.roots.len() as u32;
        let body = if variables.is_empty() {
            request_body(&query, None)
        } else {
            bytes::Bytes::new()
        };
        self.roots.push(RootFetch {
            subgraph,
            namespace: format!("{root_type}.{name}").into(),
            key: m.key.into(),
            selection: field[selection_start..].into(),
            query: query.into(),
            args: m
                .field
                .arguments
                .iter()
                .map(|(n, v)| (n.node.clone(), v.node.clone()))
                .collect(),
            variables,
            mutation,
            out_field: fields.len(),
            body,
            constant_key: std::sync::OnceLock::new(),
        });
        fields.push(OutField {
            key: m.key.into(),
            pos: position(m),
            shape,
            source: Source::Root(index),
            children,
        });
        Ok(())
    }

    /// The variables the request text just rendered used, as declaration indices.
    fn variables_used(&mut self) -> Result<Vec<usize>, PlanError> {
        let used = self.used.pop().unwrap_or_default();
        used.iter()
            .map(|name| {
                self.declared
                    .iter()
                    .position(|d| &d.name == name)
                    .ok_or_else(|| PlanError(format!("variable ${name} is not declared")))
            })
            .collect()
    }

    /// Append `alias:name(args){…}` as subgraph `s` gets it, for a field of
    /// `parent_type`. Returns where the sub-selection starts in `out`, and the
    /// sub-selection's shape when the field's values are objects.
    fn field(
        &mut self,
        out: &mut String,
        s: SubgraphId,
        parent_type: &str,
        m: &Merged<'_>,
    ) -> Result<(usize, Option<Box<Selection>>), PlanError> {
        let field = m.field;
        let name = field.name.node.as_str();
        if m.key != name {
            out.push_str(m.key);
            out.push(':');
        }
        out.push_str(name);
        if !field.arguments.is_empty() {
            out.push('(');
            for (i, (arg, value)) in field.arguments.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&arg.node);
                out.push(':');
                let used = self
                    .used
                    .last_mut()
                    .expect("a request text is being rendered");
                render::value(out, &value.node, used);
            }
            out.push(')');
        }
        let start = out.len();
        let def = self
            .supergraph
            .field(parent_type, name)
            .ok_or_else(|| PlanError(format!("{parent_type}.{name} is not in the schema")))?;
        let ty = base_name(&def.ty);
        if !self.supergraph.is_composite(ty) {
            return Ok((start, None));
        }
        out.push('{');
        let selection = self.selection(out, s, ty, &m.sets)?;
        out.push('}');
        Ok((start, Some(Box::new(selection))))
    }

    /// Append what subgraph `s` can answer of `sets` on type `ty`, plus the keys
    /// that the other subgraphs need for the rest; plan the entity fetches for the
    /// rest.
    fn selection(
        &mut self,
        out: &mut String,
        s: SubgraphId,
        ty: &str,
        sets: &[&SelectionSet],
    ) -> Result<Selection, PlanError> {
        let supergraph = self.supergraph;
        let object = supergraph
            .object(ty)
            .ok_or_else(|| PlanError(format!("{ty} is not an object type")))?;
        let merged = self.view.merged(Some(ty), sets);
        let mut fields = Vec::with_capacity(merged.len());
        // Fields another subgraph owns, by owner: (field index, merged field).
        let mut remote: Vec<(SubgraphId, Vec<(usize, &Merged<'_>)>)> = Vec::new();
        let start = out.len();
        for m in &merged {
            let name = m.field.name.node.as_str();
            if name == "__typename" {
                fields.push(OutField {
                    key: m.key.into(),
                    pos: position(m),
                    shape: Shape(Box::new([false])),
                    source: Source::Typename,
                    children: None,
                });
                continue;
            }
            let def = object
                .fields
                .get(name)
                .ok_or_else(|| PlanError(format!("{ty}.{name} is not in the schema")))?;
            let shape = shape_of(&def.ty);
            if def.is_owned_by(s) {
                if out.len() > start {
                    out.push(' ');
                }
                let (_, children) = self.field(out, s, ty, m)?;
                fields.push(OutField {
                    key: m.key.into(),
                    pos: position(m),
                    shape,
                    source: Source::Carried,
                    children,
                });
            } else {
                let owner = def.owner_for(s);
                fields.push(OutField {
                    key: m.key.into(),
                    pos: position(m),
                    shape,
                    source: Source::Carried, // replaced by the site below
                    children: None,
                });
                let at = fields.len() - 1;
                match remote.iter_mut().find(|(o, _)| *o == owner) {
                    Some((_, list)) => list.push((at, m)),
                    None => remote.push((owner, vec![(at, m)])),
                }
            }
        }
        // The keys other subgraphs need for the rest, and this object's own identity
        // (its `__typename` and `s`'s key), from which cache entries take references.
        let mut key_owners: Vec<SubgraphId> = remote.iter().map(|(o, _)| *o).collect();
        if object.key_for(s).is_some() {
            key_owners.push(s);
        }
        render::keys(out, object, &key_owners);
        if out.len() == start {
            // Only `__typename` (answered by the gateway) was asked for: a selection
            // may not be empty, so ask for something free.
            out.push_str("__typename");
        }
        let mut sites = Vec::with_capacity(remote.len());
        for (owner, list) in remote {
            sites.push(self.site(s, owner, ty, object, &list, &mut fields)?);
        }
        Ok(Selection {
            type_name: ty.into(),
            fields,
            sites,
        })
    }

    /// The `_entities` fetch from `owner` for the fields in `list` of objects of `ty`
    /// that subgraph `source` returned.
    fn site(
        &mut self,
        source: SubgraphId,
        owner: SubgraphId,
        ty: &str,
        object: &ObjectDef,
        list: &[(usize, &Merged<'_>)],
        fields: &mut [OutField],
    ) -> Result<SiteId, PlanError> {
        let keys = object.key_for(owner).ok_or_else(|| {
            PlanError(format!(
                "{ty} has no key that subgraph {} accepts",
                self.supergraph.subgraphs[owner].name
            ))
        })?;
        self.used.push(Vec::new());
        let mut selection = format!("...on {ty}{{");
        let mut namespace = format!("{ty}.");
        for (i, (at, m)) in list.iter().enumerate() {
            if i > 0 {
                selection.push(' ');
                namespace.push('+');
            }
            namespace.push_str(m.field.name.node.as_str());
            let (_, children) = self.field(&mut selection, owner, ty, m)?;
            fields[*at].children = children;
        }
        render::keys(&mut selection, object, &[owner]);
        selection.push('}');
        let variables = self.variables_used()?;
        let id = self.sites.len() as SiteId;
        for (at, _) in list {
            fields[*at].source = Source::Site(id);
        }
        self.sites.push(EntitySite {
            subgraph: owner,
            source: self.supergraph.subgraphs[source].name.as_str().into(),
            namespace: namespace.into(),
            type_name: ty.into(),
            keys: keys
                .iter()
                .map(|k| (k.as_str().into(), format!("{KEY_ALIAS_PREFIX}{k}").into()))
                .collect(),
            selection: selection.into(),
            variables,
        });
        Ok(id)
    }
}

/// Writes the members of a request's `variables` object.
pub type WriteVariables<'a> = &'a dyn Fn(&mut Vec<u8>);

/// `{"query": <query>}` or `{"query": <query>, "variables": <variables>}`: a
/// subgraph request's JSON body. `variables` writes the variables object's members
/// (without braces).
pub fn request_body(query: &str, variables: Option<WriteVariables<'_>>) -> bytes::Bytes {
    let mut out = Vec::with_capacity(query.len() + 32);
    out.extend_from_slice(b"{\"query\":");
    // A string always serializes.
    let _ = serde_json::to_writer(&mut out, query);
    if let Some(write) = variables {
        out.extend_from_slice(b",\"variables\":{");
        write(&mut out);
        out.push(b'}');
    }
    out.push(b'}');
    out.into()
}

/// `$name:Type[=default]` for each variable `op` declares.
fn declarations(op: &OperationDefinition) -> Vec<VariableDecl> {
    op.variable_definitions
        .iter()
        .map(|d| {
            let d = &d.node;
            let mut text = format!("${}:{}", d.name.node, d.var_type.node);
            if let Some(default) = &d.default_value {
                text.push('=');
                render::value(
                    &mut text,
                    &default.node.clone().into_value(),
                    &mut Vec::new(),
                );
            }
            VariableDecl {
                name: d.name.node.clone(),
                declaration: text.into(),
            }
        })
        .collect()
}

/// Nullability per list level of `ty`, outermost first.
fn shape_of(ty: &Type) -> Shape {
    let mut levels = Vec::with_capacity(2);
    let mut t = ty;
    loop {
        levels.push(t.nullable);
        match &t.base {
            BaseType::List(inner) => t = inner,
            BaseType::Named(_) => break,
        }
    }
    Shape(levels.into_boxed_slice())
}

/// A document of the root fields named `keys` only (introspection), with the
/// original fragments and variables, for async-graphql to answer.
fn introspection_document(
    doc: &ExecutableDocument,
    op: &OperationDefinition,
    view: &DocumentView<'_>,
    root_type: &str,
    keys: &[&str],
) -> ExecutableDocument {
    let mut fields = Vec::new();
    view.collect_fields(Some(root_type), &op.selection_set.node, &mut fields);
    let items = fields
        .into_iter()
        .filter(|f| keys.contains(&f.response_key().node.as_str()))
        .map(|f| {
            Positioned::new(
                AstSelection::Field(Positioned::new(f.clone(), op.selection_set.pos)),
                op.selection_set.pos,
            )
        })
        .collect();
    let operation = OperationDefinition {
        ty: OperationType::Query,
        variable_definitions: op.variable_definitions.clone(),
        directives: Vec::new(),
        selection_set: Positioned::new(SelectionSet { items }, op.selection_set.pos),
    };
    ExecutableDocument {
        operations: DocumentOperations::Single(Positioned::new(operation, op.selection_set.pos)),
        fragments: doc.fragments.clone(),
    }
}

/// A rough count of the plan's heap bytes (texts and tree nodes).
fn heap_size(plan: &Plan) -> usize {
    fn selection(s: &Selection) -> usize {
        s.type_name.len()
            + s.sites.capacity() * 4
            + s.fields
                .iter()
                .map(|f| {
                    std::mem::size_of::<OutField>()
                        + f.key.len()
                        + f.shape.0.len()
                        + f.children
                            .as_ref()
                            .map_or(0, |c| std::mem::size_of::<Selection>() + selection(c))
                })
                .sum::<usize>()
    }
    let roots: usize = plan
        .roots
        .iter()
        .map(|r| {
            std::mem::size_of::<RootFetch>()
                + r.namespace.len()
                + r.key.len()
                + r.query.len()
                + r.selection.len()
                + r.args.len() * 64
        })
        .sum();
    let sites: usize = plan
        .sites
        .iter()
        .map(|s| {
            std::mem::size_of::<EntitySite>()
                + s.namespace.len()
                + s.selection.len()
                + s.keys.len() * 48
        })
        .sum();
    let variables: usize = plan
        .variables
        .iter()
        .map(|v| 48 + v.declaration.len())
        .sum();
    let introspection = plan
        .introspection
        .as_ref()
        .map_or(0, |d| crate::documents::heap_size(d));
    std::mem::size_of::<Plan>() + selection(&plan.root) + roots + sites + variables + introspection
}

/// Where a field starts in the document: its alias, or its name.
fn position(m: &Merged<'_>) -> async_graphql_parser::Pos {
    m.field.alias.as_ref().map_or(m.field.name.pos, |a| a.pos)
}
