//! `@listSize` on the supergraph's fields: how long a list field's answer may be, as
//! IBM's GraphQL cost specification writes it and Apollo's composition carries it
//! into the supergraph. The cost estimate ([`crate::documents::cost`]) reads it.
//!
//! `@listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!],
//! requireOneSlicingArgument: Boolean = true)`: the list's size is the largest value
//! given to one of its slicing arguments, else its assumed size; with `sizedFields`,
//! that size is the length of those child fields (a connection's `edges` or `nodes`)
//! rather than of the field itself. A composed graph (`--subgraph`) carries none.

use std::collections::HashMap;

use graphql_tools::parser::query::Value;
use graphql_tools::parser::schema::{Definition, Directive, Document, TypeDefinition};

/// One field's `@listSize`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListSize {
    pub assumed: Option<u64>,
    pub slicing_arguments: Vec<String>,
    pub sized_fields: Vec<String>,
}

/// Every `@listSize` of `doc`'s object and interface fields, by type, then field.
pub fn read(doc: &Document<'static, String>) -> HashMap<String, HashMap<String, ListSize>> {
    let mut out: HashMap<String, HashMap<String, ListSize>> = HashMap::new();
    for def in &doc.definitions {
        let (type_name, fields) = match def {
            Definition::TypeDefinition(TypeDefinition::Object(o)) => (&o.name, &o.fields),
            Definition::TypeDefinition(TypeDefinition::Interface(i)) => (&i.name, &i.fields),
            _ => continue,
        };
        for field in fields {
            if let Some(d) = field.directives.iter().find(|d| d.name == "listSize") {
                out.entry(type_name.clone())
                    .or_default()
                    .insert(field.name.clone(), of(d));
            }
        }
    }
    out
}

fn of(d: &Directive<'static, String>) -> ListSize {
    let mut size = ListSize::default();
    for (name, value) in &d.arguments {
        match (name.as_str(), value) {
            ("assumedSize", Value::Int(n)) => {
                size.assumed = n.as_i64().and_then(|n| u64::try_from(n).ok())
            }
            ("slicingArguments", v) => size.slicing_arguments = strings(v),
            ("sizedFields", v) => size.sized_fields = strings(v),
            _ => {}
        }
    }
    size
}

/// A list of strings, or one string (input coercion of a single value).
fn strings(v: &Value<'static, String>) -> Vec<String> {
    match v {
        Value::List(items) => items.iter().flat_map(strings).collect(),
        Value::String(s) => vec![s.clone()],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_sizes_are_read_by_type_and_field() {
        let sdl = r#"
            type Query {
              products(first: Int, after: String): [Product] @listSize(slicingArguments: ["first"], assumedSize: 20)
              feed: Connection @listSize(slicingArguments: "first", sizedFields: ["edges", "nodes"])
              plain: [Product]
            }
            interface Node { similar: [Product] @listSize(assumedSize: 5) }
        "#;
        let doc = graphql_tools::parser::parse_schema::<String>(sdl)
            .unwrap()
            .into_static();
        let sizes = read(&doc);
        assert_eq!(
            sizes["Query"]["products"],
            ListSize {
                assumed: Some(20),
                slicing_arguments: vec!["first".into()],
                sized_fields: vec![],
            }
        );
        assert_eq!(sizes["Query"]["feed"].sized_fields, ["edges", "nodes"]);
        assert!(!sizes["Query"].contains_key("plain"));
        assert_eq!(sizes["Node"]["similar"].assumed, Some(5));
    }
}
