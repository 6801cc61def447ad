//! Per request, whether the variables fit the types the operation declares: for a
//! cached document, the part of validation that changes with every request.

use async_graphql_parser::types::{BaseType, OperationDefinition, Type};
use async_graphql_value::ConstValue;

use super::admission::Refusal;
use crate::supergraph::{Kind, Supergraph};

/// Check that every variable `op` declares has a value (sent, or its default) that
/// fits its declared type, as input coercion requires; the error names the variable.
/// Variables sent but not declared are ignored, as the spec's coercion does. For a
/// cached document this is the part of validation that changes per request.
pub fn check_variables(
    op: &OperationDefinition,
    variables: &async_graphql::Variables,
    sg: &Supergraph,
) -> Result<(), Refusal> {
    for def in &op.variable_definitions {
        let def = &def.node;
        let ty = &def.var_type.node;
        let value = variables
            .get(&def.name.node)
            .or_else(|| def.default_value.as_ref().map(|d| &d.node));
        let ok = match value {
            Some(v) => fits(v, ty, sg),
            None => ty.nullable,
        };
        if !ok {
            let got = value.map_or("nothing".to_string(), |v| v.to_string());
            return Err(Refusal(format!(
                "variable ${} of type {ty} got {got}",
                def.name.node
            )));
        }
    }
    Ok(())
}

fn fits(value: &ConstValue, ty: &Type, sg: &Supergraph) -> bool {
    if matches!(value, ConstValue::Null) {
        return ty.nullable;
    }
    match &ty.base {
        BaseType::List(inner) => match value {
            ConstValue::List(items) => items.iter().all(|v| fits(v, inner, sg)),
            single => fits(single, inner, sg), // input coercion of a single value
        },
        BaseType::Named(name) => match (name.as_str(), value) {
            ("Int", ConstValue::Number(n)) => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
            ("Float", ConstValue::Number(_)) => true,
            ("String", ConstValue::String(_)) => true,
            ("Boolean", ConstValue::Boolean(_)) => true,
            ("ID", ConstValue::String(_)) => true,
            ("ID", ConstValue::Number(n)) => n.is_i64() || n.is_u64(),
            (other, v) => match sg.types.get(other).map(|t| &t.kind) {
                Some(Kind::Enum(values)) => match v {
                    ConstValue::String(s) => values.iter().any(|e| e.name == *s),
                    ConstValue::Enum(n) => values.iter().any(|e| e.name == n.as_str()),
                    _ => false,
                },
                Some(Kind::InputObject(fields)) => match v {
                    ConstValue::Object(map) => {
                        map.keys()
                            .all(|k| fields.iter().any(|f| f.name == k.as_str()))
                            && fields.iter().all(|f| match map.get(f.name.as_str()) {
                                Some(v) => fits(v, &f.ty, sg),
                                None => f.ty.nullable || f.default.is_some(),
                            })
                    }
                    _ => false,
                },
                Some(Kind::Scalar) => true,
                _ => false,
            },
        },
    }
}
