//! Checks a document must pass before any GraphQL work that async-graphql cannot
//! make cheaply: the number of fields once fragments are expanded, the number of
//! root fields, reserved names; and, per request, whether the variables fit the
//! types the operation declares.

use std::collections::HashMap;

use async_graphql_parser::types::{
    BaseType, ExecutableDocument, OperationDefinition, Selection, SelectionSet, Type,
};
use async_graphql_value::ConstValue;

use crate::supergraph::{Kind, Supergraph};

/// Names the gateway keeps for its own subgraph requests: key aliases
/// (`_gw_k_id`) and the variables of entity batches (`$_gw_r0`).
const RESERVED: &str = "_gw_";

/// Why a document is refused before async-graphql sees it.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal(pub String);

/// Checks async-graphql cannot make cheaply: the number of fields once fragments are
/// expanded (nested spreads double it at each level, and async-graphql's own count
/// walks every expansion, so a 1 KB document could keep a core busy for seconds),
/// the number of root fields (each is one subgraph request), and aliases that would
/// collide with the planner's reserved `_gw_k_` key aliases.
pub fn admit(
    doc: &ExecutableDocument,
    max_fields: usize,
    max_root_fields: usize,
) -> Result<(), Refusal> {
    let mut counter = FieldCounter {
        doc,
        memo: HashMap::new(),
    };
    for (_, op) in doc.operations.iter() {
        let op = &op.node;
        let total = counter.count(&op.selection_set.node);
        if total > max_fields as u64 {
            return Err(Refusal(format!(
                "the operation selects {total} fields (fragments expanded); the limit is {max_fields}"
            )));
        }
        let roots = counter.roots(&op.selection_set.node, 0);
        if roots > max_root_fields as u64 {
            return Err(Refusal(format!(
                "the operation has {roots} root fields; the limit is {max_root_fields}"
            )));
        }
        reserved_aliases(&op.selection_set.node)?;
        for def in &op.variable_definitions {
            let name = &def.node.name.node;
            if name.starts_with(RESERVED) {
                return Err(Refusal(format!(
                    "the variable ${name} is reserved: variables starting with {RESERVED} belong to the gateway"
                )));
            }
        }
    }
    for fragment in doc.fragments.values() {
        reserved_aliases(&fragment.node.selection_set.node)?;
    }
    Ok(())
}

struct FieldCounter<'d> {
    doc: &'d ExecutableDocument,
    /// Expanded size per fragment; `None` while it is being counted (a cycle, which
    /// async-graphql rejects itself, counts 0 here).
    memo: HashMap<&'d str, Option<u64>>,
}

impl<'d> FieldCounter<'d> {
    fn count(&mut self, set: &'d SelectionSet) -> u64 {
        let mut total: u64 = 0;
        for item in &set.items {
            let n = match &item.node {
                Selection::Field(f) => 1u64.saturating_add(self.count(&f.node.selection_set.node)),
                Selection::InlineFragment(i) => self.count(&i.node.selection_set.node),
                Selection::FragmentSpread(s) => self.fragment(s.node.fragment_name.node.as_str()),
            };
            total = total.saturating_add(n);
        }
        total
    }

    fn fragment(&mut self, name: &'d str) -> u64 {
        match self.memo.get(name) {
            Some(Some(n)) => return *n,
            Some(None) => return 0,
            None => {}
        }
        let Some(fragment) = self.doc.fragments.get(name) else {
            return 0;
        };
        self.memo.insert(name, None);
        let n = self.count(&fragment.node.selection_set.node);
        self.memo.insert(name, Some(n));
        n
    }

    /// Fields at the top level of `set`, through fragments (bounded against cycles).
    fn roots(&self, set: &'d SelectionSet, depth: usize) -> u64 {
        if depth > 64 {
            return 0;
        }
        set.items
            .iter()
            .map(|item| match &item.node {
                Selection::Field(_) => 1,
                Selection::InlineFragment(i) => self.roots(&i.node.selection_set.node, depth + 1),
                Selection::FragmentSpread(s) => self
                    .doc
                    .fragments
                    .get(&s.node.fragment_name.node)
                    .map_or(0, |f| self.roots(&f.node.selection_set.node, depth + 1)),
            })
            .fold(0u64, u64::saturating_add)
    }
}

fn reserved_aliases(set: &SelectionSet) -> Result<(), Refusal> {
    for item in &set.items {
        match &item.node {
            Selection::Field(f) => {
                if let Some(alias) = &f.node.alias {
                    if alias.node.starts_with(crate::supergraph::KEY_ALIAS_PREFIX) {
                        return Err(Refusal(format!(
                            "the alias {} is reserved: aliases starting with {} belong to the gateway",
                            alias.node,
                            crate::supergraph::KEY_ALIAS_PREFIX
                        )));
                    }
                }
                reserved_aliases(&f.node.selection_set.node)?;
            }
            Selection::InlineFragment(i) => reserved_aliases(&i.node.selection_set.node)?,
            Selection::FragmentSpread(_) => {}
        }
    }
    Ok(())
}

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
