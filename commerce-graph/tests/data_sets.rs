//! The data set through real HTTP: the four services agree on every id they share
//! (authors, sellers, wishlists, reviewed products), each user's reviews are exactly the
//! reviews that name them as author, the same flags give the same answers and another
//! seed other ones, and the scale flags set the sizes.

mod common;

use std::collections::HashMap;

use commerce_graph::{Scale, Subgraph};
use common::{rep, strings, Graph};
use serde_json::{json, Value};

fn small(seed: u64) -> Scale {
    Scale::new(60, 25, 3, seed).unwrap()
}

#[tokio::test]
async fn the_four_services_agree_on_every_shared_id() {
    let s = small(9);
    let graph = Graph::start(s).await;
    // Every product, with its seller, from products.
    let d = graph
        .data(
            Subgraph::Products,
            "{ topProducts(first: 1000) { upc seller { id } } }",
            Value::Null,
        )
        .await;
    let products = d["topProducts"].as_array().unwrap();
    assert_eq!(products.len(), 60);
    let upcs = strings(&d["topProducts"], "upc");
    // Every seller exists in accounts.
    let sellers: Vec<Value> = products
        .iter()
        .map(|p| rep("User", "id", p["seller"]["id"].as_str().unwrap()))
        .collect();
    let found = graph
        .entities(
            Subgraph::Accounts,
            Value::Array(sellers),
            "... on User { id }",
        )
        .await;
    assert!(
        found.iter().all(|u| u["id"].is_string()),
        "a seller unknown to accounts"
    );
    // Every product's reviews, from reviews: their authors exist in accounts, with the
    // same username, and each names its product back.
    let reps: Vec<Value> = upcs.iter().map(|u| rep("Product", "upc", u)).collect();
    let reviewed = graph
        .entities(
            Subgraph::Reviews,
            Value::Array(reps.clone()),
            "... on Product { upc reviews { id product { upc } author { id username } } }",
        )
        .await;
    let mut by_author: HashMap<String, Vec<String>> = HashMap::new();
    for p in &reviewed {
        let reviews = p["reviews"].as_array().unwrap();
        assert_eq!(reviews.len(), 3);
        for r in reviews {
            assert_eq!(r["product"]["upc"], p["upc"]);
            by_author
                .entry(r["author"]["id"].as_str().unwrap().to_string())
                .or_default()
                .push(r["id"].as_str().unwrap().to_string());
        }
    }
    let authors: Vec<Value> = (1..=25)
        .map(|u| rep("User", "id", &format!("u{u}")))
        .collect();
    let owned = graph
        .entities(
            Subgraph::Accounts,
            Value::Array(authors.clone()),
            "... on User { id username wishlist { upc } }",
        )
        .await;
    let provided = graph
        .entities(
            Subgraph::Reviews,
            Value::Array(authors),
            "... on User { id username reviews { id } }",
        )
        .await;
    let mut listed = 0;
    for (a, r) in owned.iter().zip(&provided) {
        let id = a["id"].as_str().unwrap();
        assert_eq!(a["username"], r["username"], "{id}");
        // A user's reviews are exactly those that name them as author, in id order.
        let mine = strings(&r["reviews"], "id");
        assert_eq!(&mine, by_author.get(id).unwrap_or(&Vec::new()), "{id}");
        listed += mine.len();
        // Wishlists name products of the catalog.
        for w in strings(&a["wishlist"], "upc") {
            assert!(upcs.contains(&w), "{id} wishes for {w}, not in products");
        }
    }
    assert_eq!(listed, 60 * 3);
    // Inventory knows every product of the catalog, and no other.
    let stock = graph
        .entities(
            Subgraph::Inventory,
            Value::Array(reps),
            "... on Product { upc inStock }",
        )
        .await;
    assert!(stock.iter().zip(&upcs).all(|(p, u)| p["upc"] == *u));
    let beyond = graph
        .entities(
            Subgraph::Inventory,
            json!([rep("Product", "upc", &s.upc(60))]),
            "... on Product { upc }",
        )
        .await;
    assert_eq!(beyond[0], Value::Null);
}

const EVERYTHING: [(Subgraph, &str); 4] = [
    (Subgraph::Products, "{ topProducts(first: 60) { upc sku name description category price weight seller { id listings { upc } } } }"),
    (Subgraph::Inventory, "{ outOfStock(first: 60) { upc quantity } }"),
    (Subgraph::Reviews, "{ latestReviews(first: 1000) { id body rating author { id username } product { upc averageRating } mentions { __typename ... on Product { upc } ... on User { id } } } }"),
    (Subgraph::Accounts, "{ users(first: 25) { id username name joined wishlist { upc } } }"),
];

#[tokio::test]
async fn the_same_flags_give_the_same_data_and_another_seed_other_data() {
    let (a, b, other) = (
        Graph::start(small(4)).await,
        Graph::start(small(4)).await,
        Graph::start(small(5)).await,
    );
    for (subgraph, query) in EVERYTHING {
        let first = a.data(subgraph, query, Value::Null).await;
        assert_eq!(
            first,
            b.data(subgraph, query, Value::Null).await,
            "{subgraph:?}"
        );
        if subgraph != Subgraph::Inventory {
            assert_ne!(
                first,
                other.data(subgraph, query, Value::Null).await,
                "{subgraph:?}"
            );
        }
    }
}

#[tokio::test]
async fn the_scale_sets_the_sizes() {
    let graph = Graph::start(Scale::new(7, 3, 2, 1).unwrap()).await;
    let d = graph
        .data(
            Subgraph::Products,
            "{ topProducts(first: 100) { upc } }",
            Value::Null,
        )
        .await;
    assert_eq!(d["topProducts"].as_array().unwrap().len(), 7);
    let d = graph
        .data(
            Subgraph::Accounts,
            "{ users(first: 100) { id } }",
            Value::Null,
        )
        .await;
    assert_eq!(strings(&d["users"], "id"), ["u1", "u2", "u3"]);
    let d = graph
        .data(
            Subgraph::Reviews,
            "{ latestReviews(first: 100) { id } }",
            Value::Null,
        )
        .await;
    assert_eq!(d["latestReviews"].as_array().unwrap().len(), 14);
    assert_eq!(d["latestReviews"][0]["id"], "r14");
    // No reviews at all is a scale too.
    let bare = Graph::start(Scale::new(4, 2, 0, 1).unwrap()).await;
    let d = bare
        .data(Subgraph::Reviews, "{ latestReviews { id } }", Value::Null)
        .await;
    assert_eq!(d["latestReviews"], json!([]));
    let p = bare
        .entities(
            Subgraph::Reviews,
            json!([rep("Product", "upc", &Scale::DEFAULT.upc(0))]),
            "... on Product { reviewCount averageRating }",
        )
        .await;
    assert_eq!(
        p[0],
        json!({ "__typename": "Product", "reviewCount": 0, "averageRating": null })
    );
}
