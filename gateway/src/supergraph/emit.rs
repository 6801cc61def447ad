//! Writing a composed graph as a supergraph: the join spec (v0.3) with link v1.0,
//! as Federation 2's composers write it, so that [`super::join`] reads the lab's
//! own composition exactly as it reads theirs.
//!
//! Per type, one `@join__type(graph:)` for each subgraph that defines it (with
//! `key:` where that subgraph declares one); per field, one `@join__field(graph:)`
//! for each subgraph that resolves it, and `external: true` where a subgraph only
//! names it, unless every subgraph of the type resolves it (then the field carries
//! no join directive at all, which means just that).

use std::fmt::Write as _;

use super::compose::{Composed, Kind, ObjectDef, TypeDef};
use super::{ArgDef, Subgraph, SubgraphId};

const PRELUDE: &str = r#"directive @join__enumValue(graph: join__Graph!) repeatable on ENUM_VALUE
directive @join__field(graph: join__Graph, requires: join__FieldSet, provides: join__FieldSet, type: String, external: Boolean, override: String, usedOverridden: Boolean) repeatable on FIELD_DEFINITION | INPUT_FIELD_DEFINITION
directive @join__graph(name: String!, url: String!) on ENUM_VALUE
directive @join__implements(graph: join__Graph!, interface: String!) repeatable on OBJECT | INTERFACE
directive @join__type(graph: join__Graph!, key: join__FieldSet, extension: Boolean! = false, resolvable: Boolean! = true, isInterfaceObject: Boolean! = false) repeatable on OBJECT | INTERFACE | UNION | ENUM | INPUT_OBJECT | SCALAR
directive @join__unionMember(graph: join__Graph!, member: String!) repeatable on UNION
directive @link(url: String, as: String, for: link__Purpose, import: [link__Import]) repeatable on SCHEMA

scalar join__FieldSet

scalar link__Import

enum link__Purpose {
  SECURITY
  EXECUTION
}
"#;

/// The supergraph SDL of `composed`, whose subgraph `i` is `subgraphs[i]`.
pub fn write(composed: &Composed, subgraphs: &[Subgraph]) -> String {
    let graphs = graph_names(subgraphs);
    let mut out = String::with_capacity(4096);
    out.push_str("schema\n  @link(url: \"https://specs.apollo.dev/link/v1.0\")\n  @link(url: \"https://specs.apollo.dev/join/v0.3\", for: EXECUTION)\n{\n  query: Query\n");
    if composed.mutation {
        out.push_str("  mutation: Mutation\n");
    }
    out.push_str("}\n\n");
    out.push_str(PRELUDE);
    out.push_str("\nenum join__Graph {\n");
    for (graph, sg) in graphs.iter().zip(subgraphs) {
        let _ = writeln!(
            out,
            "  {graph} @join__graph(name: {}, url: {})",
            quoted(&sg.name),
            quoted(&sg.url)
        );
    }
    out.push_str("}\n");
    for t in composed.types.values() {
        out.push('\n');
        write_type(&mut out, t, &graphs);
    }
    out
}

/// `join__Graph` value names: the subgraph names in upper case, made valid and unique.
fn graph_names(subgraphs: &[Subgraph]) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(subgraphs.len());
    for sg in subgraphs {
        let mut name: String = sg
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            name.insert(0, '_');
        }
        let base = name.clone();
        let mut n = 1;
        while names.contains(&name) {
            n += 1;
            name = format!("{base}_{n}");
        }
        names.push(name);
    }
    names
}

fn write_type(out: &mut String, t: &TypeDef, graphs: &[String]) {
    description(out, "", t.description.as_deref());
    match &t.kind {
        Kind::Object(o) => {
            let _ = write!(out, "type {}", t.name);
            for &id in &o.defined_in {
                let _ = write!(out, " @join__type(graph: {}", graphs[id]);
                if let Some(key) = o.keys.iter().find(|(s, _)| *s == id) {
                    let _ = write!(out, ", key: {}", quoted(&key.1.join(" ")));
                }
                out.push(')');
            }
            out.push_str(" {\n");
            write_fields(out, o, graphs);
            out.push_str("}\n");
        }
        Kind::Enum(values) => {
            let _ = write!(out, "enum {}", t.name);
            join_types(out, t, graphs);
            out.push_str(" {\n");
            for v in values {
                let _ = write!(out, "  {v}");
                for &id in &t.subgraphs {
                    let _ = write!(out, " @join__enumValue(graph: {})", graphs[id]);
                }
                out.push('\n');
            }
            out.push_str("}\n");
        }
        Kind::InputObject(fields) => {
            let _ = write!(out, "input {}", t.name);
            join_types(out, t, graphs);
            out.push_str(" {\n");
            for f in fields {
                description(out, "  ", f.description.as_deref());
                out.push_str("  ");
                input_value(out, f);
                out.push('\n');
            }
            out.push_str("}\n");
        }
        Kind::Scalar => {
            let _ = write!(out, "scalar {}", t.name);
            join_types(out, t, graphs);
            out.push('\n');
        }
    }
}

fn join_types(out: &mut String, t: &TypeDef, graphs: &[String]) {
    for &id in &t.subgraphs {
        let _ = write!(out, " @join__type(graph: {})", graphs[id]);
    }
}

fn write_fields(out: &mut String, o: &ObjectDef, graphs: &[String]) {
    for f in o.fields.values() {
        description(out, "  ", f.description.as_deref());
        let _ = write!(out, "  {}", f.name);
        if !f.args.is_empty() {
            out.push('(');
            for (i, a) in f.args.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if let Some(d) = &a.description {
                    let _ = write!(out, "{} ", quoted(d));
                }
                input_value(out, a);
            }
            out.push(')');
        }
        let _ = write!(out, ": {}", f.ty);
        let everywhere =
            f.external_in.is_empty() && o.defined_in.iter().all(|id| f.owners.contains(id));
        if !everywhere {
            let mut graphs_of: Vec<(SubgraphId, bool)> =
                f.owners.iter().map(|&id| (id, false)).collect();
            graphs_of.extend(f.external_in.iter().map(|&id| (id, true)));
            graphs_of.sort_unstable();
            for (id, external) in graphs_of {
                let _ = write!(out, " @join__field(graph: {}", graphs[id]);
                if external {
                    out.push_str(", external: true");
                }
                out.push(')');
            }
        }
        out.push('\n');
    }
}

fn input_value(out: &mut String, a: &ArgDef) {
    let _ = write!(out, "{}: {}", a.name, a.ty);
    if let Some(default) = &a.default {
        let _ = write!(out, " = {default}");
    }
}

fn description(out: &mut String, indent: &str, text: Option<&str>) {
    if let Some(text) = text {
        let _ = writeln!(out, "{indent}{}", quoted(text));
    }
}

/// A GraphQL string literal (JSON's escapes are GraphQL's).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_names_are_valid_and_unique() {
        let sg = |n: &str| Subgraph {
            name: n.into(),
            url: String::new(),
        };
        assert_eq!(
            graph_names(&[
                sg("users"),
                sg("post-service"),
                sg("POST_SERVICE"),
                sg("9lives")
            ]),
            ["USERS", "POST_SERVICE", "POST_SERVICE_2", "_9LIVES"]
        );
    }
}
