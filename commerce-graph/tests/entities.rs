//! The gateway's view of each subgraph, through real HTTP: `_entities` for every key
//! of every entity (and null for a key that names nothing), the `@requires` field
//! computed from the representation's inputs, the `@provides` field agreeing with its
//! owner, and the union's members resolving where they are owned.

mod common;

use commerce_graph::inventory::shipping_estimate;
use commerce_graph::{Scale, Subgraph};
use common::{rep, Graph};
use serde_json::{json, Value};

const PRODUCT: &str = "... on Product { upc sku name price weight }";

#[tokio::test]
async fn every_key_of_every_entity_resolves() {
    let graph = Graph::start(Scale::DEFAULT).await;
    let s = Scale::DEFAULT;
    // Product by upc and by sku (products): the same product either way.
    let by_upc = graph
        .entities(
            Subgraph::Products,
            json!([
                rep("Product", "upc", &s.upc(41)),
                rep("Product", "upc", "000000000000")
            ]),
            PRODUCT,
        )
        .await;
    assert_eq!(by_upc[0]["upc"], s.upc(41));
    assert_eq!(by_upc[1], Value::Null);
    let by_sku = graph
        .entities(
            Subgraph::Products,
            json!([
                rep("Product", "sku", &s.sku(41)),
                rep("Product", "sku", "KIT-00000000")
            ]),
            PRODUCT,
        )
        .await;
    assert_eq!(by_sku[0], by_upc[0]);
    assert_eq!(by_sku[0]["name"], s.product(41).name);
    // Product by upc where others extend it.
    let stock = graph
        .entities(
            Subgraph::Inventory,
            json!([rep("Product", "upc", &s.upc(41))]),
            "... on Product { upc quantity inStock }",
        )
        .await;
    assert_eq!(stock[0]["quantity"], s.stock(41));
    let reviewed = graph
        .entities(
            Subgraph::Reviews,
            json!([rep("Product", "upc", &s.upc(41))]),
            "... on Product { upc reviewCount reviews { id } }",
        )
        .await;
    assert_eq!(reviewed[0]["reviewCount"], 5);
    assert_eq!(
        common::strings(&reviewed[0]["reviews"], "id"),
        ["r206", "r207", "r208", "r209", "r210"]
    );
    // User by id and by username (accounts): the same user either way.
    let name = s.username(7);
    let users = graph
        .entities(
            Subgraph::Accounts,
            json!([
                rep("User", "id", "u8"),
                rep("User", "username", &name),
                rep("User", "id", "u501"),
                rep("User", "username", "nobody_here8")
            ]),
            "... on User { id username name joined }",
        )
        .await;
    assert_eq!(users[0]["username"], name);
    assert_eq!(users[1], users[0]);
    assert_eq!((&users[2], &users[3]), (&Value::Null, &Value::Null));
    // User by id where others extend it.
    for subgraph in [Subgraph::Reviews, Subgraph::Products] {
        let u = graph
            .entities(
                subgraph,
                json!([rep("User", "id", "u8")]),
                "... on User { id }",
            )
            .await;
        assert_eq!(u[0]["id"], "u8", "{subgraph:?}");
    }
    // Review by id.
    let r = graph
        .entities(
            Subgraph::Reviews,
            json!([rep("Review", "id", "r3"), rep("Review", "id", "r5001")]),
            "... on Review { id rating author { id } product { upc } }",
        )
        .await;
    assert_eq!(r[0]["author"]["id"], s.user_id(s.review(2).author));
    assert_eq!(r[0]["product"]["upc"], s.upc(0));
    assert_eq!(r[1], Value::Null);
}

#[tokio::test]
async fn the_shipping_estimate_is_computed_from_the_representations_inputs() {
    let graph = Graph::start(Scale::DEFAULT).await;
    let upc = Scale::DEFAULT.upc(3);
    let estimate = |price: i32, weight: i32| json!({ "__typename": "Product", "upc": upc, "price": price, "weight": weight });
    let got = graph
        .entities(
            Subgraph::Inventory,
            json!([
                estimate(500, 2500),
                estimate(15_000, 2500),
                estimate(500, 100)
            ]),
            "... on Product { shippingEstimate price weight }",
        )
        .await;
    let cents: Vec<i64> = got
        .iter()
        .map(|p| p["shippingEstimate"].as_i64().unwrap())
        .collect();
    assert_eq!(cents, [399 + 3 * 125, 3 * 125, 399 + 125]);
    assert_eq!(got[0]["price"], 500);
    // The estimate for the product's real price and weight, read from products.
    let p = graph
        .data(
            Subgraph::Products,
            "query($u: ID!) { product(upc: $u) { price weight } }",
            json!({ "u": upc }),
        )
        .await;
    let (price, weight) = (
        p["product"]["price"].as_i64().unwrap() as i32,
        p["product"]["weight"].as_i64().unwrap() as i32,
    );
    let got = graph
        .entities(
            Subgraph::Inventory,
            json!([estimate(price, weight)]),
            "... on Product { shippingEstimate }",
        )
        .await;
    assert_eq!(
        got[0]["shippingEstimate"],
        shipping_estimate(price, weight).unwrap()
    );
    // Without its inputs, the field is an error with a path, not a guess.
    let answer = graph
        .answer(
            Subgraph::Inventory,
            "query($r: [_Any!]!) { _entities(representations: $r) { ... on Product { shippingEstimate } } }",
            json!({ "r": [rep("Product", "upc", &upc)] }),
        )
        .await;
    let error = &answer["errors"][0];
    assert!(
        error["message"].as_str().unwrap().contains("@requires"),
        "{answer}"
    );
    // (async-graphql's path of an entity's field leaves out the representation's index.)
    assert_eq!(error["path"][0], "_entities");
    assert_eq!(
        error["path"].as_array().unwrap().last().unwrap(),
        "shippingEstimate"
    );
    // Inputs of the wrong type are refused.
    let answer = graph
        .answer(
            Subgraph::Inventory,
            "query($r: [_Any!]!) { _entities(representations: $r) { ... on Product { shippingEstimate } } }",
            json!({ "r": [{ "__typename": "Product", "upc": upc, "price": "cheap", "weight": 1 }] }),
        )
        .await;
    assert!(answer["errors"][0]["message"].is_string(), "{answer}");
}

#[tokio::test]
async fn provided_usernames_are_the_owners() {
    let graph = Graph::start(Scale::DEFAULT).await;
    let d = graph
        .data(
            Subgraph::Reviews,
            "{ latestReviews(first: 200) { author { id username } } }",
            Value::Null,
        )
        .await;
    let authors = d["latestReviews"].as_array().unwrap();
    let reps: Vec<Value> = authors
        .iter()
        .map(|r| rep("User", "id", r["author"]["id"].as_str().unwrap()))
        .collect();
    let owned = graph
        .entities(
            Subgraph::Accounts,
            Value::Array(reps),
            "... on User { id username }",
        )
        .await;
    for (review, user) in authors.iter().zip(&owned) {
        assert_eq!(
            review["author"]["username"], user["username"],
            "{}",
            user["id"]
        );
    }
}

#[tokio::test]
async fn mentions_resolve_in_the_subgraphs_that_own_them() {
    let graph = Graph::start(Scale::DEFAULT).await;
    let d = graph
        .data(
            Subgraph::Reviews,
            "{ latestReviews(first: 100) { mentions { __typename ... on Product { upc } ... on User { id username } } } }",
            Value::Null,
        )
        .await;
    let mut products = Vec::new();
    let mut users = Vec::new();
    for review in d["latestReviews"].as_array().unwrap() {
        for m in review["mentions"].as_array().unwrap() {
            match m["__typename"].as_str().unwrap() {
                "Product" => products.push(rep("Product", "upc", m["upc"].as_str().unwrap())),
                "User" => users.push(m.clone()),
                other => panic!("a mention of type {other}"),
            }
        }
    }
    assert!(
        products.len() > 5 && users.len() > 5,
        "{} products, {} users",
        products.len(),
        users.len()
    );
    let named = graph
        .entities(
            Subgraph::Products,
            Value::Array(products.clone()),
            "... on Product { upc name }",
        )
        .await;
    for (p, n) in products.iter().zip(&named) {
        assert_eq!(n["upc"], p["upc"]);
        assert!(n["name"].is_string());
    }
    let reps: Vec<Value> = users
        .iter()
        .map(|u| rep("User", "id", u["id"].as_str().unwrap()))
        .collect();
    let named = graph
        .entities(
            Subgraph::Accounts,
            Value::Array(reps),
            "... on User { id username }",
        )
        .await;
    for (u, n) in users.iter().zip(&named) {
        assert_eq!(n["id"], u["id"]);
        assert_eq!(n["username"], u["username"]);
    }
}
