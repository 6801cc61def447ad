//! Federation: interfaces and unions across subgraphs (graph `abstract`, in
//! `tests/supergraphs/abstract/`).
//!
//! A media catalog in three subgraphs. `catalog` owns books and films, the interfaces
//! `Item` (`id title`) and `Node`, and the union `Found = Book | Film`; `people` owns
//! authors (a `Node` too), adds `Book.author`, and has its own `Found = Book | Author`
//! (a partial union: the supergraph's `Found` is all three); `reviews` declares `Item`
//! again with another field (`reviews`), so the interface is distributed. Each test
//! sends one operation through the gateway and asserts the whole answer, and where it
//! matters which subgraph was asked how often.

mod common;

use async_graphql::dynamic::{Interface, Object, Union};
use common::federated::schema::{arg, computed, field, ifield, lookup, Subgraph};
use serde_json::{json, Value as Json};

const GRAPH: &str = "abstract";

fn books() -> Json {
    json!([
        { "__typename": "Book", "id": "b1", "title": "Dune", "pages": 412 },
        { "__typename": "Book", "id": "b2", "title": "Emma", "pages": 474 },
    ])
}

fn films() -> Json {
    json!([
        { "__typename": "Film", "id": "f1", "title": "Alien", "minutes": 117 },
        { "__typename": "Film", "id": "f2", "title": "Heat", "minutes": 170 },
    ])
}

/// The shelf, in order: b1, f1, b2, f2.
fn shelf() -> Json {
    let (b, f) = (books(), films());
    json!([b[0], f[0], b[1], f[1]])
}

fn catalog() -> Subgraph {
    let all = shelf();
    let by_term = shelf();
    let by_id = shelf();
    Subgraph::new(
        "catalog",
        Object::new("Query")
            .field(computed("shelf", "[Item!]!", move |_, _| Ok(all.clone())))
            .field(
                computed("search", "[Found!]!", move |_, args| {
                    let term = args["term"].as_str().unwrap_or_default().to_lowercase();
                    let found =
                        by_term.as_array().unwrap().iter().filter(|i| {
                            i["title"].as_str().unwrap().to_lowercase().contains(&term)
                        });
                    Ok(Json::Array(found.cloned().collect()))
                })
                .argument(arg("term", "String!")),
            )
            .field(
                computed("node", "Node", move |_, args| {
                    let item = by_id
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|i| i["id"] == args["id"]);
                    Ok(item.cloned().unwrap_or(Json::Null))
                })
                .argument(arg("id", "ID!")),
            ),
    )
    .with(Interface::new("Node").field(ifield("id", "ID!")))
    .with(
        Interface::new("Item")
            .field(ifield("id", "ID!"))
            .field(ifield("title", "String!")),
    )
    .with(
        Object::new("Book")
            .key("id")
            .implement("Node")
            .implement("Item")
            .field(field("id", "ID!"))
            .field(field("title", "String!"))
            .field(field("pages", "Int!")),
    )
    .with(
        Object::new("Film")
            .key("id")
            .implement("Node")
            .implement("Item")
            .field(field("id", "ID!"))
            .field(field("title", "String!"))
            .field(field("minutes", "Int!")),
    )
    .with(
        Union::new("Found")
            .possible_type("Book")
            .possible_type("Film"),
    )
    .entities(lookup(shelf(), &["id"]))
}

fn authors() -> Json {
    json!([
        { "__typename": "Author", "id": "a1", "name": "Frank Herbert",
          "books": [{ "__typename": "Book", "id": "b1" }] },
        { "__typename": "Author", "id": "a2", "name": "Jane Austen",
          "books": [{ "__typename": "Book", "id": "b2" }] },
    ])
}

/// Books as `people` knows them: their author.
fn people_books() -> Json {
    let a = authors();
    json!([
        { "__typename": "Book", "id": "b1", "author": a[0] },
        { "__typename": "Book", "id": "b2", "author": a[1] },
    ])
}

fn people() -> Subgraph {
    let featured = {
        let (a, b) = (authors(), people_books());
        json!([a[1], b[0]])
    };
    let by_id = authors();
    let entities = {
        let (authors, books) = (lookup(authors(), &["id"]), lookup(people_books(), &["id"]));
        move |rep: &Json| match rep["__typename"].as_str() {
            Some("Author") => authors(rep),
            _ => books(rep),
        }
    };
    Subgraph::new(
        "people",
        Object::new("Query")
            .field(computed("featured", "[Found!]!", move |_, _| {
                Ok(featured.clone())
            }))
            .field(
                computed("author", "Author", move |_, args| {
                    let a = by_id
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|a| a["id"] == args["id"]);
                    Ok(a.cloned().unwrap_or(Json::Null))
                })
                .argument(arg("id", "ID!")),
            ),
    )
    .with(Interface::new("Node").field(ifield("id", "ID!")))
    .with(
        Object::new("Author")
            .key("id")
            .implement("Node")
            .field(field("id", "ID!"))
            .field(field("name", "String!"))
            .field(field("books", "[Book!]!")),
    )
    .with(
        Object::new("Book")
            .key("id")
            .field(field("id", "ID!"))
            .field(field("author", "Author!")),
    )
    .with(
        Union::new("Found")
            .possible_type("Book")
            .possible_type("Author"),
    )
    .entities(entities)
}

/// Items as `reviews` knows them: their reviews.
fn reviewed() -> Json {
    let r = |stars: u8, text: &str| json!({ "stars": stars, "text": text });
    json!([
        { "__typename": "Book", "id": "b1", "reviews": [r(5, "Vast")] },
        { "__typename": "Film", "id": "f1", "reviews": [r(5, "Tense"), r(3, "Dark")] },
        { "__typename": "Book", "id": "b2", "reviews": [r(4, "Witty")] },
        { "__typename": "Film", "id": "f2", "reviews": [] },
    ])
}

fn reviews() -> Subgraph {
    let top = {
        let r = reviewed();
        json!([r[1], r[0]])
    };
    let item = |name: &str| {
        Object::new(name)
            .key("id")
            .implement("Item")
            .field(field("id", "ID!"))
            .field(field("reviews", "[Review!]!"))
    };
    Subgraph::new(
        "reviews",
        Object::new("Query").field(computed(
            "topRated",
            "[Item!]!",
            move |_, _| Ok(top.clone()),
        )),
    )
    .with(
        Interface::new("Item")
            .field(ifield("id", "ID!"))
            .field(ifield("reviews", "[Review!]!")),
    )
    .with(item("Book"))
    .with(item("Film"))
    .with(
        Object::new("Review")
            .field(field("stars", "Int!"))
            .field(field("text", "String!")),
    )
    .entities(lookup(reviewed(), &["id"]))
}

crate::federated_graph!(GRAPH, [catalog(), people(), reviews()]);

#[tokio::test]
async fn an_interface_field_gathers_its_objects_fields_from_three_subgraphs() {
    let fed = start().await;
    let answer = fed
        .query(
            "{ shelf { __typename id title ... on Book { pages author { name } } \
             ... on Film { minutes } reviews { stars } } }",
        )
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "shelf": [
            { "__typename": "Book", "id": "b1", "title": "Dune", "pages": 412,
              "author": { "name": "Frank Herbert" }, "reviews": [{ "stars": 5 }] },
            { "__typename": "Film", "id": "f1", "title": "Alien", "minutes": 117,
              "reviews": [{ "stars": 5 }, { "stars": 3 }] },
            { "__typename": "Book", "id": "b2", "title": "Emma", "pages": 474,
              "author": { "name": "Jane Austen" }, "reviews": [{ "stars": 4 }] },
            { "__typename": "Film", "id": "f2", "title": "Heat", "minutes": 170, "reviews": [] },
        ] } })
    );
    // The shelf, then one entity fetch each for the authors and the reviews.
    assert_eq!(
        fed.counts(),
        [("catalog", 1), ("people", 1), ("reviews", 1)]
    );
}

#[tokio::test]
async fn a_distributed_interface_entered_where_it_has_other_fields() {
    let fed = start().await;
    let answer = fed
        .query("{ topRated { id title reviews { text } ... on Film { minutes } } }")
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "topRated": [
            { "id": "f1", "title": "Alien", "reviews": [{ "text": "Tense" }, { "text": "Dark" }],
              "minutes": 117 },
            { "id": "b1", "title": "Dune", "reviews": [{ "text": "Vast" }] },
        ] } })
    );
    assert_eq!(
        fed.counts(),
        [("catalog", 1), ("people", 0), ("reviews", 1)]
    );
}

#[tokio::test]
async fn a_partial_union_answers_each_member_from_its_owner() {
    let fed = start().await;
    let answer = fed
        .query(
            "{ featured { __typename ... on Book { title author { name } } \
             ... on Film { title } ... on Author { name books { title } } } }",
        )
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "featured": [
            { "__typename": "Author", "name": "Jane Austen", "books": [{ "title": "Emma" }] },
            { "__typename": "Book", "title": "Dune", "author": { "name": "Frank Herbert" } },
        ] } })
    );
}

#[tokio::test]
async fn fragment_spreads_on_an_interface_and_a_union_inside_a_union() {
    let fed = start().await;
    let answer = fed
        .query(
            "query { search(term: \"A\") { ...Titled ...OnFound } } \
             fragment Titled on Item { title } \
             fragment OnFound on Found { __typename ... on Film { minutes } }",
        )
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "search": [
            { "title": "Alien", "__typename": "Film", "minutes": 117 },
            { "title": "Emma", "__typename": "Book" },
            { "title": "Heat", "__typename": "Film", "minutes": 170 },
        ] } })
    );
}

#[tokio::test]
async fn an_interface_fragment_on_a_member_that_implements_it_only_in_another_subgraph() {
    // `people` serves Book without `implements Node` or `Item`; the supergraph's Book
    // implements both, so both fragments apply to it.
    let fed = start().await;
    let answer = fed
        .query("{ featured { ... on Node { id } ... on Item { title } } }")
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "featured": [{ "id": "a2" }, { "id": "b1", "title": "Dune" }] } })
    );
}

#[tokio::test]
async fn a_node_field_reaches_the_concrete_types_fields_in_other_subgraphs() {
    let fed = start().await;
    let answer = fed
        .query(
            "{ book: node(id: \"b2\") { __typename id ... on Book { title author { name books { id } } } \
             ... on Author { name } } film: node(id: \"f1\") { ... on Item { title } ... on Film { minutes } } \
             author: node(id: \"a1\") { id } }",
        )
        .await;
    // `catalog` resolves `node`, and knows no author: `a1` is not one of its nodes.
    assert_eq!(
        answer,
        json!({ "data": {
            "book": { "__typename": "Book", "id": "b2", "title": "Emma",
                      "author": { "name": "Jane Austen", "books": [{ "id": "b2" }] } },
            "film": { "title": "Alien", "minutes": 117 },
            "author": null,
        } })
    );
}

#[tokio::test]
async fn typename_is_answered_at_every_level_without_entity_fetches() {
    let fed = start().await;
    let answer = fed
        .query(
            "{ __typename shelf { __typename } featured { kind: __typename } \
             topRated { __typename ... on Book { again: __typename } } }",
        )
        .await;
    assert_eq!(
        answer,
        json!({ "data": {
            "__typename": "Query",
            "shelf": [{ "__typename": "Book" }, { "__typename": "Film" },
                      { "__typename": "Book" }, { "__typename": "Film" }],
            "featured": [{ "kind": "Author" }, { "kind": "Book" }],
            "topRated": [{ "__typename": "Film" }, { "__typename": "Book", "again": "Book" }],
        } })
    );
    // One root fetch per subgraph, and no entity fetch.
    assert_eq!(
        fed.counts(),
        [("catalog", 1), ("people", 1), ("reviews", 1)]
    );
}

#[tokio::test]
async fn an_unknown_member_of_a_union_fragment_is_a_validation_error() {
    let fed = start().await;
    let answer = fed.query("{ featured { ... on Review { stars } } }").await;
    assert_eq!(
        answer,
        json!({ "errors": [{
            "message": "Fragment cannot be spread here as objects of type \"Found\" can never be of type \"Review\"",
            "locations": [{ "line": 1, "column": 14 }],
        }] })
    );
    assert_eq!(
        fed.counts(),
        [("catalog", 0), ("people", 0), ("reviews", 0)]
    );
}
