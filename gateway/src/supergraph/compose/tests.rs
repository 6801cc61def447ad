//! Composition of small graphs, and the problems it names.

use super::*;

fn sg(names: &[&str]) -> Vec<Subgraph> {
    names
        .iter()
        .map(|n| Subgraph {
            name: n.to_string(),
            url: format!("http://{n}"),
        })
        .collect()
}

const USERS: &str =
    r#"type Query { me: User } type User @key(fields: "id") { id: ID! name: String! }"#;
const POSTS_FED1: &str = r#"
    type Post @key(fields: "pid") { pid: ID! title: String author: User }
    extend type Query { topPosts(count: Int = 2): [Post] }
    type User @key(fields: "id") @extends { id: ID! @external topPosts(count: Int!): [Post] }"#;

#[test]
fn composes_fed1_extensions_and_records_owners() {
    let s = compose_graph(&sg(&["user", "post"]), &[USERS.into(), POSTS_FED1.into()]).unwrap();
    let object = |name: &str| match &s.types[name].kind {
        Kind::Object(o) => o,
        _ => panic!("{name} is not an object"),
    };
    let user = object("User");
    assert_eq!(user.fields["id"].owners, vec![0, 1]);
    assert_eq!(user.fields["name"].owners, vec![0]);
    assert_eq!(user.fields["topPosts"].owners, vec![1]);
    assert_eq!(object("Query").fields["topPosts"].owners, vec![1]);
    assert_eq!(user.key_for(1).unwrap(), ["id".to_string()]);
}

#[test]
fn rejects_a_root_field_owned_twice() {
    let err = compose_graph(
        &sg(&["a", "b"]),
        &[
            "type Query { x: Int }".into(),
            "type Query { x: Int }".into(),
        ],
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("Query.x is defined by several subgraphs (a, b)"),
        "{err}"
    );
}

#[test]
fn rejects_conflicting_field_types() {
    let b = r#"type Query { y: Int } type User @key(fields: "id") { id: String! }"#;
    let err = compose_graph(&sg(&["user", "b"]), &[USERS.into(), b.into()]).unwrap_err();
    assert!(
        err.to_string()
            .contains("User.id has type String! in subgraph b"),
        "{err}"
    );
}

#[test]
fn rejects_an_unreachable_entity_field() {
    // `b` returns a User without its key, so `name` cannot be fetched for it.
    let b = r#"type Query { someone: User } type User { nick: String }"#;
    let err = compose_graph(&sg(&["user", "b"]), &[USERS.into(), b.into()]).unwrap_err();
    assert!(
        err.to_string()
            .contains("User.name (resolved by user) cannot be fetched"),
        "{err}"
    );
}

#[test]
fn rejects_unparsable_sdl_and_missing_query() {
    let err = compose_graph(&sg(&["a"]), &["type {".into()]).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("subgraph a: SDL does not parse"), "{text}");
    assert!(text.contains("no subgraph defines a Query type"), "{text}");
}
