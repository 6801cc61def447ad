//! The public schema in async-graphql: validation and introspection.
//!
//! The gateway executes documents itself ([`crate::execute`]), but the rules of
//! GraphQL stay async-graphql's: the composed SDL is built into a dynamic schema, and
//! each new document is validated by it (every rule, plus the depth, complexity,
//! recursion and directive limits). async-graphql has no validate-only call, so
//! [`Validator`] runs its whole request pipeline with an extension that stops it
//! right after validation succeeds: nothing executes, and a document that fails
//! comes back with async-graphql's own errors. Root fields `__schema` and `__type`
//! are answered by async-graphql too, from a document holding just those fields
//! ([`crate::plan::Plan::introspection`]); no other field is ever resolved by it,
//! so the schema's resolvers answer nothing.

use std::sync::Arc;

use futures::future::BoxFuture;

use async_graphql::dynamic::{self, Field, FieldFuture, InputValue, Object, TypeRef};
use async_graphql::extensions::{Extension, ExtensionContext, ExtensionFactory, NextValidation};
use async_graphql::{ServerError, ValidationMode, ValidationResult, Variables};
use async_graphql_parser::types::{BaseType, ExecutableDocument, Type};

use super::limits::DocumentLimits;
use crate::supergraph::{ArgDef, FieldDef, Kind, ObjectDef, Supergraph};

/// The message the stopping extension leaves when validation passed.
const VALIDATED: &str = "\u{0}validated";

/// Validates documents against the public schema, and answers introspection.
pub struct Validator {
    /// Stops every request after validation.
    checking: dynamic::Schema,
    /// Executes introspection-only documents that already validated.
    introspection: dynamic::Schema,
}

impl Validator {
    pub fn new(
        supergraph: &Supergraph,
        limits: &DocumentLimits,
    ) -> Result<Validator, dynamic::SchemaError> {
        Ok(Validator {
            checking: schema(supergraph, limits, ValidationMode::Strict, true)?,
            introspection: schema(supergraph, limits, ValidationMode::Fast, false)?,
        })
    }

    /// Validate `doc` (the parse of `text`) for `operation_name` with `variables`;
    /// async-graphql's errors when it fails. The future is boxed: async-graphql's
    /// is many kilobytes, and callers that hold it inline would carry (and move)
    /// that size on every request, even those that never validate.
    pub fn validate<'a>(
        &'a self,
        text: &'a str,
        doc: &'a ExecutableDocument,
        operation_name: Option<&'a str>,
        variables: &'a Variables,
    ) -> BoxFuture<'a, Result<(), Vec<ServerError>>> {
        Box::pin(async move {
            let mut request = async_graphql::Request::new(text).variables(variables.clone());
            request.set_parsed_query(doc.clone());
            if let Some(name) = operation_name {
                request = request.operation_name(name);
            }
            let response = self.checking.execute(request).await;
            let passed = response.errors.len() == 1 && response.errors[0].message == VALIDATED;
            if passed {
                Ok(())
            } else {
                Err(response.errors)
            }
        })
    }

    /// async-graphql's answer to an introspection-only document (boxed, as above).
    pub fn introspect<'a>(
        &'a self,
        doc: &'a ExecutableDocument,
        variables: &'a Variables,
    ) -> BoxFuture<'a, async_graphql::Response> {
        Box::pin(async move {
            let mut request = async_graphql::Request::new("").variables(variables.clone());
            request.set_parsed_query(doc.clone());
            self.introspection.execute(request).await
        })
    }
}

/// Ends a request once validation has passed.
struct StopAfterValidation;

impl ExtensionFactory for StopAfterValidation {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(StopAfterValidation)
    }
}

#[async_graphql::async_trait::async_trait]
impl Extension for StopAfterValidation {
    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        next.run(ctx).await?;
        Err(vec![ServerError::new(VALIDATED, None)])
    }
}

fn schema(
    supergraph: &Supergraph,
    limits: &DocumentLimits,
    mode: ValidationMode,
    stop: bool,
) -> Result<dynamic::Schema, dynamic::SchemaError> {
    let mut builder = dynamic::Schema::build(
        &supergraph.query_type,
        supergraph.mutation_type.as_deref(),
        None,
    )
    .limit_depth(limits.max_depth)
    .limit_recursive_depth(limits.max_depth.max(32))
    .limit_complexity(limits.max_fields)
    .limit_directives(limits.max_directives)
    .validation_mode(mode);
    if !limits.introspection {
        // Production: no field names guessed for the client either.
        builder = builder.disable_suggestions();
    }
    if stop {
        builder = builder.extension(StopAfterValidation);
    }
    for (name, def) in &supergraph.types {
        builder = match &def.kind {
            Kind::Object(object) => {
                let mut obj = Object::new(name.as_str());
                if let Some(d) = &def.description {
                    obj = obj.description(d.as_str());
                }
                for i in &object.implements {
                    obj = obj.implement(i.as_str());
                }
                for field in object.fields.values() {
                    obj = obj.field(field_of(field, covariant(supergraph, object, field)));
                }
                builder.register(obj)
            }
            Kind::Interface(object) => {
                let mut iface = dynamic::Interface::new(name.as_str());
                if let Some(d) = &def.description {
                    iface = iface.description(d.as_str());
                }
                for i in &object.implements {
                    iface = iface.implement(i.as_str());
                }
                for field in object.fields.values() {
                    let mut f =
                        dynamic::InterfaceField::new(field.name.as_str(), type_ref(&field.ty));
                    if let Some(d) = &field.description {
                        f = f.description(d.as_str());
                    }
                    if let Some(reason) = &field.deprecation {
                        f = f.deprecation(Some(reason.as_str()));
                    }
                    for arg in &field.args {
                        f = f.argument(input_value(arg));
                    }
                    iface = iface.field(f);
                }
                builder.register(iface)
            }
            Kind::Union(members) => {
                let mut union = dynamic::Union::new(name.as_str());
                if let Some(d) = &def.description {
                    union = union.description(d.as_str());
                }
                for m in members {
                    union = union.possible_type(m.as_str());
                }
                builder.register(union)
            }
            Kind::Enum(values) => {
                let mut e = dynamic::Enum::new(name.as_str());
                if let Some(d) = &def.description {
                    e = e.description(d.as_str());
                }
                for v in values {
                    let mut item = dynamic::EnumItem::new(v.name.as_str());
                    if let Some(d) = &v.description {
                        item = item.description(d.as_str());
                    }
                    if let Some(reason) = &v.deprecation {
                        item = item.deprecation(Some(reason.as_str()));
                    }
                    e = e.item(item);
                }
                builder.register(e)
            }
            Kind::InputObject(fields) => {
                let mut input = dynamic::InputObject::new(name.as_str());
                if let Some(d) = &def.description {
                    input = input.description(d.as_str());
                }
                for f in fields {
                    input = input.field(input_value(f));
                }
                builder.register(input)
            }
            Kind::Scalar => {
                let mut scalar = dynamic::Scalar::new(name.as_str());
                if let Some(d) = &def.description {
                    scalar = scalar.description(d.as_str());
                }
                builder.register(scalar)
            }
        };
    }
    builder.finish()
}

/// An object's field; its resolver is never called (the gateway executes every
/// field itself).
fn field_of(field: &FieldDef, ty: Option<&Type>) -> Field {
    let ty = ty.unwrap_or(&field.ty);
    let mut f = Field::new(field.name.as_str(), type_ref(ty), |_| {
        FieldFuture::Value(None)
    });
    if let Some(d) = &field.description {
        f = f.description(d.as_str());
    }
    if let Some(reason) = &field.deprecation {
        f = f.deprecation(Some(reason.as_str()));
    }
    for arg in &field.args {
        f = f.argument(input_value(arg));
    }
    f
}

/// The type to give an object's field that an interface it implements declares
/// with a wider type (`Book.similar: [Book]` for `Similar.similar: [Product]`):
/// async-graphql's schema accepts an implementation's field only when its named
/// type equals the interface's, so such a field is declared with the interface's
/// type (what validation then accepts beneath it is the interface's fields; its
/// introspection shows the interface's type). `None` when the types agree.
fn covariant<'a>(
    supergraph: &'a Supergraph,
    object: &ObjectDef,
    field: &FieldDef,
) -> Option<&'a Type> {
    object.implements.iter().find_map(|i| {
        let declared = supergraph.field(i, &field.name)?;
        (crate::supergraph::base_name(&declared.ty) != crate::supergraph::base_name(&field.ty))
            .then_some(&declared.ty)
    })
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

fn input_value(arg: &ArgDef) -> InputValue {
    let mut v = InputValue::new(arg.name.as_str(), type_ref(&arg.ty));
    if let Some(d) = &arg.default {
        v = v.default_value(d.clone());
    }
    if let Some(d) = &arg.description {
        v = v.description(d.as_str());
    }
    v
}
