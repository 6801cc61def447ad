//! Federation: `@provides` (graph `provides`, in `tests/supergraphs/provides/`).
//!
//! A blog in three subgraphs. `accounts` owns users and their teams; `media` owns
//! photos and clips (the interface `Media`); `posts` owns posts and answers some of the
//! others' fields where it returns them: `Post.author` provides
//! `name team { name }` (nested, through a second entity), `Query.feed` (a union,
//! `Entry = Post | Photo`) provides `... on Photo { caption }`, and
//! `Query.spotlight` (an interface list) provides each member's `caption`. What is provided is
//! answered by `posts` with no other fetch; what is not is fetched from the owner,
//! and the owner is asked only for that. Each test asserts the whole answer and which
//! subgraphs were asked.

mod common;

use async_graphql::dynamic::{Interface, Object, Union};
use common::federated::schema::{computed, field, ifield, lookup, Subgraph};
use common::federated::Federation;
use serde_json::{json, Value as Json};

const GRAPH: &str = "provides";

fn teams() -> Json {
    json!([
        { "__typename": "Team", "id": "t1", "name": "Core", "size": 4 },
        { "__typename": "Team", "id": "t2", "name": "Ops", "size": 2 },
    ])
}

fn users() -> Json {
    let t = teams();
    json!([
        { "__typename": "User", "id": "u1", "name": "Ada", "email": "ada@lab.test", "team": t[0] },
        { "__typename": "User", "id": "u2", "name": "Lin", "email": "lin@lab.test", "team": t[1] },
    ])
}

fn accounts() -> Subgraph {
    let all = users();
    let (users, teams) = (lookup(users(), &["id"]), lookup(teams(), &["id"]));
    Subgraph::new(
        "accounts",
        Object::new("Query").field(computed("users", "[User!]!", move |_, _| Ok(all.clone()))),
    )
    .with(
        Object::new("User")
            .key("id")
            .field(field("id", "ID!"))
            .field(field("name", "String!").shareable())
            .field(field("email", "String!"))
            .field(field("team", "Team!").shareable()),
    )
    .with(
        Object::new("Team")
            .key("id")
            .field(field("id", "ID!"))
            .field(field("name", "String!").shareable())
            .field(field("size", "Int!")),
    )
    .entities(move |rep| match rep["__typename"].as_str() {
        Some("Team") => teams(rep),
        _ => users(rep),
    })
}

fn media_items() -> Json {
    json!([
        { "__typename": "Photo", "id": "ph1", "caption": "Dawn", "pixels": 12000 },
        { "__typename": "Clip", "id": "cl1", "caption": "Surf", "seconds": 42 },
        { "__typename": "Photo", "id": "ph2", "caption": "Dusk", "pixels": 8000 },
    ])
}

fn media() -> Subgraph {
    let all = media_items();
    let item = |name: &str, own: &str| {
        Object::new(name)
            .key("id")
            .implement("Media")
            .field(field("id", "ID!"))
            .field(field("caption", "String!").shareable())
            .field(field(own, "Int!"))
    };
    Subgraph::new(
        "media",
        Object::new("Query").field(computed(
            "gallery",
            "[Media!]!",
            move |_, _| Ok(all.clone()),
        )),
    )
    .with(
        Interface::new("Media")
            .field(ifield("id", "ID!"))
            .field(ifield("caption", "String!")),
    )
    .with(item("Photo", "pixels"))
    .with(item("Clip", "seconds"))
    .entities(lookup(media_items(), &["id"]))
}

fn posts_table() -> Json {
    let u = users();
    json!([
        { "__typename": "Post", "id": "po1", "title": "Hello", "author": u[0] },
        { "__typename": "Post", "id": "po2", "title": "Ops diary", "author": u[1] },
    ])
}

fn posts() -> Subgraph {
    let (all, m) = (posts_table(), media_items());
    let feed = json!([all[0], m[0], all[1]]);
    let spotlight = json!([m[0], m[1]]);
    let external = |name: &str| {
        Object::new(name)
            .key("id")
            .implement("Media")
            .field(field("id", "ID!"))
            .field(field("caption", "String!").external())
    };
    Subgraph::new(
        "posts",
        Object::new("Query")
            .field(computed("posts", "[Post!]!", move |_, _| Ok(all.clone())))
            .field(
                computed("feed", "[Entry!]!", move |_, _| Ok(feed.clone()))
                    .provides("... on Photo { caption }"),
            )
            .field(
                computed("spotlight", "[Media!]!", move |_, _| Ok(spotlight.clone()))
                    .provides("... on Photo { caption } ... on Clip { caption }"),
            ),
    )
    .with(
        Object::new("Post")
            .key("id")
            .field(field("id", "ID!"))
            .field(field("title", "String!"))
            .field(field("author", "User!").provides("name team { name }")),
    )
    .with(
        Object::new("User")
            .key("id")
            .field(field("id", "ID!"))
            .field(field("name", "String!").external())
            .field(field("team", "Team!").external()),
    )
    .with(
        Object::new("Team")
            .key("id")
            .field(field("id", "ID!"))
            .field(field("name", "String!").external()),
    )
    .with(
        Interface::new("Media")
            .field(ifield("id", "ID!"))
            .field(ifield("caption", "String!")),
    )
    .with(external("Photo"))
    .with(external("Clip"))
    .with(
        Union::new("Entry")
            .possible_type("Post")
            .possible_type("Photo"),
    )
    .entities(lookup(posts_table(), &["id"]))
}

crate::federated_graph!(GRAPH, [accounts(), media(), posts()]);

/// The query texts subgraph `name` was sent.
fn queries(fed: &Federation, name: &str) -> Vec<String> {
    fed.log(name).into_iter().map(|l| l.query).collect()
}

#[tokio::test]
async fn nested_provided_fields_come_with_the_parent() {
    let fed = start().await;
    let answer = fed
        .query("{ posts { title author { id name team { name } } } }")
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "posts": [
            { "title": "Hello", "author": { "id": "u1", "name": "Ada", "team": { "name": "Core" } } },
            { "title": "Ops diary", "author": { "id": "u2", "name": "Lin", "team": { "name": "Ops" } } },
        ] } })
    );
    assert_eq!(fed.counts(), [("accounts", 0), ("media", 0), ("posts", 1)]);
}

#[tokio::test]
async fn fields_beyond_the_provided_ones_are_fetched_from_their_owner_alone() {
    let fed = start().await;
    let answer = fed
        .query("{ posts { author { name email team { name size } } } }")
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "posts": [
            { "author": { "name": "Ada", "email": "ada@lab.test", "team": { "name": "Core", "size": 4 } } },
            { "author": { "name": "Lin", "email": "lin@lab.test", "team": { "name": "Ops", "size": 2 } } },
        ] } })
    );
    // `accounts` is asked for what `posts` does not provide, and nothing else.
    let asked = queries(&fed, "accounts").join("\n");
    assert!(
        asked.contains("email") && asked.contains("size") && !asked.contains("name"),
        "{asked}"
    );
    assert_eq!(fed.counts()[2], ("posts", 1));
}

#[tokio::test]
async fn a_union_fields_provided_member_field_needs_no_fetch() {
    let fed = start().await;
    let answer = fed
        .query("{ feed { __typename ... on Post { title } ... on Photo { caption } } }")
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "feed": [
            { "__typename": "Post", "title": "Hello" },
            { "__typename": "Photo", "caption": "Dawn" },
            { "__typename": "Post", "title": "Ops diary" },
        ] } })
    );
    assert_eq!(fed.counts(), [("accounts", 0), ("media", 0), ("posts", 1)]);
    // A member field it does not provide is the owner's.
    fed.clear_logs();
    let answer = fed
        .query("{ feed { ... on Photo { caption pixels } } }")
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "feed": [{}, { "caption": "Dawn", "pixels": 12000 }, {}] } })
    );
    assert_eq!(
        fed.representations("media"),
        [json!({ "__typename": "Photo", "id": "ph1" })]
    );
}

#[tokio::test]
async fn an_interface_fields_provided_field_needs_no_fetch() {
    let fed = start().await;
    let answer = fed.query("{ spotlight { id caption } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "spotlight": [
            { "id": "ph1", "caption": "Dawn" }, { "id": "cl1", "caption": "Surf" },
        ] } })
    );
    assert_eq!(fed.counts(), [("accounts", 0), ("media", 0), ("posts", 1)]);
    fed.clear_logs();
    let answer = fed
        .query("{ spotlight { caption ... on Clip { seconds } } }")
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "spotlight": [
            { "caption": "Dawn" }, { "caption": "Surf", "seconds": 42 },
        ] } })
    );
    assert_eq!(
        fed.representations("media"),
        [json!({ "__typename": "Clip", "id": "cl1" })]
    );
}

#[tokio::test]
async fn without_a_provides_the_owner_answers() {
    let fed = start().await;
    let answer = fed
        .query("{ gallery { caption } users { name team { name } } }")
        .await;
    assert_eq!(
        answer,
        json!({ "data": {
            "gallery": [{ "caption": "Dawn" }, { "caption": "Surf" }, { "caption": "Dusk" }],
            "users": [{ "name": "Ada", "team": { "name": "Core" } }, { "name": "Lin", "team": { "name": "Ops" } }],
        } })
    );
    assert_eq!(fed.counts(), [("accounts", 1), ("media", 1), ("posts", 0)]);
}
