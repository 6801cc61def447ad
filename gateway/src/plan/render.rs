//! GraphQL text for subgraph requests: argument values with their variables kept as
//! variables, and the reserved key aliases.

use std::fmt::Write;

use async_graphql_value::{Name, Value};

use crate::supergraph::{ObjectDef, SubgraphId, KEY_ALIAS_PREFIX};

/// Append `value` in GraphQL syntax; every variable it names is added to `used`.
pub fn value(out: &mut String, value: &Value, used: &mut Vec<Name>) {
    match value {
        Value::Variable(name) => {
            out.push('$');
            out.push_str(name);
            if !used.contains(name) {
                used.push(name.clone());
            }
        }
        Value::Null => out.push_str("null"),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => string(out, s),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Binary(bytes) => {
            // GraphQL has no binary literal; async-graphql reads one as a list of bytes.
            out.push('[');
            for (i, b) in bytes.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{b}");
            }
            out.push(']');
        }
        Value::Enum(name) => out.push_str(name),
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                self::value(out, item, used);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(k);
                out.push(':');
                self::value(out, v, used);
            }
            out.push('}');
        }
    }
}

/// Append `query(…)` or `mutation(…)` declaring the variables at `used` of
/// `declared`; just the keyword when there are none.
pub fn header(out: &mut String, mutation: bool, declared: &[super::VariableDecl], used: &[usize]) {
    out.push_str(if mutation { "mutation" } else { "query" });
    if used.is_empty() {
        return;
    }
    out.push('(');
    for (i, &v) in used.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&declared[v].declaration);
    }
    out.push(')');
}

/// A GraphQL string literal.
fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Append ` __typename` and, under reserved aliases, the key fields that `owners`
/// accept for `object` (each once).
pub fn keys(out: &mut String, object: &ObjectDef, owners: &[SubgraphId]) {
    if owners.is_empty() {
        return;
    }
    out.push_str(" __typename");
    let mut written: Vec<&str> = Vec::new();
    for &owner in owners {
        for key in object.key_for(owner).unwrap_or_default() {
            if !written.contains(&key.as_str()) {
                written.push(key);
                let _ = write!(out, " {KEY_ALIAS_PREFIX}{key}:{key}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_variables_and_escape_strings() {
        let v: Value = async_graphql_parser::parse_query(
            r#"{ f(a: {x: [1, $n, "a\"b\u0001"], e: RED, z: null}) }"#,
        )
        .map(|doc| match doc.operations {
            async_graphql_parser::types::DocumentOperations::Single(op) => {
                match &op.node.selection_set.node.items[0].node {
                    async_graphql_parser::types::Selection::Field(f) => {
                        f.node.arguments[0].1.node.clone()
                    }
                    _ => unreachable!(),
                }
            }
            _ => unreachable!(),
        })
        .unwrap();
        let (mut out, mut used) = (String::new(), Vec::new());
        value(&mut out, &v, &mut used);
        assert_eq!(out, r#"{x:[1,$n,"a\"b\u0001"],e:RED,z:null}"#);
        assert_eq!(used, [Name::new("n")]);
    }
}
