//! Each subgraph's SDL through real HTTP (`_service { sdl }`): valid Federation 2 with
//! `@link`, and the directives the graph is built on where they belong; the committed
//! SDL files in `supergraph/` equal what the services serve now; and the committed
//! `supergraph.graphql` holds every type, field and union member of those files for its
//! subgraph. A schema change that is not recomposed (scripts/compose-commerce.sh) fails
//! here.

mod common;

use std::collections::HashMap;

use async_graphql_parser::types::{
    ConstDirective, ServiceDocument, TypeDefinition, TypeKind, TypeSystemDefinition,
};
use async_graphql_value::ConstValue;
use commerce_graph::{Scale, Subgraph};
use common::Graph;
use serde_json::Value;

async fn sdl(graph: &Graph, subgraph: Subgraph) -> String {
    let d = graph
        .data(subgraph, "{ _service { sdl } }", Value::Null)
        .await;
    d["_service"]["sdl"].as_str().unwrap().to_string()
}

fn committed(name: &str) -> String {
    let path = format!("{}/supergraph/{name}.graphql", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The line of `sdl` that opens `type NAME` (or `union NAME`), or of field `field` in it.
fn line<'a>(sdl: &'a str, opening: &str) -> &'a str {
    sdl.lines()
        .find(|l| l.trim_start().starts_with(opening))
        .unwrap_or_else(|| panic!("no line starts with {opening:?} in:\n{sdl}"))
}

#[tokio::test]
async fn each_subgraph_declares_its_federation_directives() {
    let graph = Graph::start(Scale::DEFAULT).await;
    let products = sdl(&graph, Subgraph::Products).await;
    let inventory = sdl(&graph, Subgraph::Inventory).await;
    let reviews = sdl(&graph, Subgraph::Reviews).await;
    let accounts = sdl(&graph, Subgraph::Accounts).await;
    for s in [&products, &inventory, &reviews, &accounts] {
        assert!(
            s.contains("extend schema @link(\n\turl: \"https://specs.apollo.dev/federation/v2."),
            "no Federation 2 @link:\n{s}"
        );
        assert!(
            !s.contains("extend type"),
            "Federation 1 style extension:\n{s}"
        );
    }
    // Two keys on Product (products) and on User (accounts).
    assert_eq!(
        line(&products, "type Product "),
        "type Product @key(fields: \"upc\") @key(fields: \"sku\") {"
    );
    assert_eq!(
        line(&accounts, "type User "),
        "type User @key(fields: \"id\") @key(fields: \"username\") {"
    );
    // @requires, with its inputs @external.
    assert_eq!(
        line(&inventory, "shippingEstimate"),
        "\tshippingEstimate: Int! @requires(fields: \"price weight\")"
    );
    assert_eq!(line(&inventory, "price"), "\tprice: Int! @external");
    assert_eq!(line(&inventory, "weight"), "\tweight: Int! @external");
    // @provides, its field @external here and @shareable at its owner.
    assert_eq!(
        line(&reviews, "author"),
        "\tauthor: User! @provides(fields: \"username\")"
    );
    assert_eq!(line(&reviews, "username"), "\tusername: String! @external");
    assert_eq!(
        line(&accounts, "username"),
        "\tusername: String! @shareable"
    );
    // The union whose members are owned by two other subgraphs.
    assert_eq!(
        line(&reviews, "union Mention"),
        "union Mention = Product | User"
    );
    assert_eq!(
        line(&reviews, "type Product "),
        "type Product @key(fields: \"upc\") {"
    );
    assert_eq!(
        line(&reviews, "type User "),
        "type User @key(fields: \"id\") {"
    );
    // A reference accounts cannot resolve.
    assert_eq!(
        line(&accounts, "type Product "),
        "type Product @key(fields: \"upc\", resolvable: false) {"
    );
    assert_eq!(
        line(&products, "type User "),
        "type User @key(fields: \"id\") {"
    );
}

#[tokio::test]
async fn the_committed_sdl_files_are_what_the_services_serve() {
    let graph = Graph::start(Scale::DEFAULT).await;
    for subgraph in Subgraph::ALL {
        let served = sdl(&graph, subgraph).await;
        assert!(
            committed(subgraph.name()) == served,
            "commerce-graph/supergraph/{}.graphql is not the SDL the {} subgraph serves: \
             run scripts/compose-commerce.sh and commit what it writes",
            subgraph.name(),
            subgraph.name()
        );
    }
}

fn types(doc: &ServiceDocument) -> HashMap<&str, &TypeDefinition> {
    doc.definitions
        .iter()
        .filter_map(|d| match d {
            TypeSystemDefinition::Type(t) => Some((t.node.name.node.as_str(), &t.node)),
            _ => None,
        })
        .collect()
}

/// The `graph:` argument of a `@join__…` directive, and another argument, as text.
fn join_args(d: &ConstDirective, other: &str) -> (String, Option<String>) {
    let arg = |name: &str| {
        d.arguments
            .iter()
            .find(|(n, _)| n.node.as_str() == name)
            .map(|(_, v)| match &v.node {
                ConstValue::Enum(e) => e.to_string(),
                ConstValue::String(s) => s.clone(),
                v => v.to_string(),
            })
    };
    (arg("graph").unwrap_or_default(), arg(other))
}

fn joined<'a>(
    directives: &'a [async_graphql_parser::Positioned<ConstDirective>],
    name: &'a str,
) -> impl Iterator<Item = &'a ConstDirective> + 'a {
    directives
        .iter()
        .map(|d| &d.node)
        .filter(move |d| d.name.node.as_str() == name)
}

#[test]
fn the_committed_supergraph_holds_every_subgraphs_schema() {
    let supergraph_text = committed("supergraph");
    let supergraph = async_graphql_parser::parse_schema(&supergraph_text).unwrap();
    let sup = types(&supergraph);
    assert!(supergraph_text.contains("@link(url: \"https://specs.apollo.dev/link/v1.0\")"));
    assert!(supergraph_text
        .contains("@link(url: \"https://specs.apollo.dev/join/v0.3\", for: EXECUTION)"));
    // Every subgraph is a graph of the supergraph, at its default address.
    let TypeKind::Enum(graphs) = &sup["join__Graph"].kind else {
        panic!("join__Graph is not an enum")
    };
    for subgraph in Subgraph::ALL {
        let graph = subgraph.name().to_uppercase();
        let value = graphs
            .values
            .iter()
            .find(|v| v.node.value.node.as_str() == graph)
            .unwrap_or_else(|| panic!("no graph {graph}"));
        let url = format!("http://{}/graphql", subgraph.default_listen());
        let d = joined(&value.node.directives, "join__graph")
            .next()
            .unwrap();
        assert_eq!(join_args(d, "url").1.as_deref(), Some(url.as_str()));
    }
    for subgraph in Subgraph::ALL {
        let graph = subgraph.name().to_uppercase();
        let text = committed(subgraph.name());
        let document = async_graphql_parser::parse_schema(&text).unwrap();
        for (name, def) in types(&document) {
            let s = sup
                .get(name)
                .unwrap_or_else(|| panic!("{name} of {graph} is not in the supergraph"));
            assert!(
                joined(&s.directives, "join__type").any(|d| join_args(d, "").0 == graph),
                "{name} has no @join__type(graph: {graph}): recompose (scripts/compose-commerce.sh)"
            );
            match (&def.kind, &s.kind) {
                (TypeKind::Object(mine), TypeKind::Object(theirs)) => {
                    for field in &mine.fields {
                        let field = &field.node;
                        let f = theirs
                            .fields
                            .iter()
                            .map(|f| &f.node)
                            .find(|f| f.name.node == field.name.node)
                            .unwrap_or_else(|| {
                                panic!(
                                    "{name}.{} of {graph} is not in the supergraph: recompose",
                                    field.name.node
                                )
                            });
                        assert_eq!(
                            f.ty.node.to_string(),
                            field.ty.node.to_string(),
                            "{name}.{}",
                            f.name.node
                        );
                        // A field with @join__field is resolved only in the graphs it names.
                        let mut joins = joined(&f.directives, "join__field").peekable();
                        if joins.peek().is_some() {
                            assert!(
                                joins.any(|d| join_args(d, "").0 == graph),
                                "{name}.{} has no @join__field(graph: {graph}): recompose",
                                f.name.node
                            );
                        }
                    }
                }
                (TypeKind::Union(mine), TypeKind::Union(theirs)) => {
                    for member in &mine.members {
                        assert!(theirs.members.iter().any(|m| m.node == member.node));
                        assert!(
                            joined(&s.directives, "join__unionMember").any(|d| {
                                join_args(d, "member")
                                    == (graph.clone(), Some(member.node.to_string()))
                            }),
                            "{name} has no @join__unionMember(graph: {graph}, member: {})",
                            member.node
                        );
                    }
                }
                (mine, theirs) => {
                    panic!("{name}: {mine:?} in {graph}, {theirs:?} in the supergraph")
                }
            }
        }
    }
}
