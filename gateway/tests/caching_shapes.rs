//! Caching keeps its meaning on every shape of a federated graph (issue 20, point 5),
//! through real HTTP: the commerce graph's four subgraphs (`@requires`, a union across
//! subgraphs, two keys per type, a private `me`) behind the gateway over their
//! composed supergraph, and a graph of namesakes (a `Book` and an `Author` with the
//! same ids, behind an interface). A test per point:
//!
//! - an entity's key holds what its subgraph receives, `@requires` inputs included;
//! - abstract types are keyed, namespaced and referenced by their concrete type;
//! - invalidation by entity reaches entities found through interfaces and unions,
//!   and entities fetched by another of their keys;
//! - identical fetches in flight are joined on every shape (root fields, entities,
//!   overlapping batches, several `_entities` fields in one request, union members);
//! - credentials skip the cache or key it, and no answer crosses users.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use commerce_graph::inventory::shipping_estimate;
use commerce_graph::Subgraph as Part;
use common::commerce::{mentioned, spent, Shop, SCALE};
use common::namesakes::Namesakes;
use common::{cache, cache_with};
use serde_json::{json, Value};

const ESTIMATE_BY_UPC: &str =
    "query($upc: ID!) { product(upc: $upc) { upc price weight shippingEstimate } }";
const ESTIMATE_BY_SKU: &str =
    "query($sku: String!) { productBySku(sku: $sku) { upc price weight shippingEstimate } }";
const UPDATE_PRICE: &str =
    "mutation($upc: ID!, $price: Int!) { updatePrice(upc: $upc, price: $price) { upc price } }";

/// A price on the other side of 100.00 (where the 3.99 base is waived), so that the
/// estimate changes with it.
fn other_side(price: i64) -> i64 {
    if price >= 10_000 {
        4_999
    } else {
        24_999
    }
}

fn estimate(price: i64, weight: i64) -> i64 {
    i64::from(shipping_estimate(price as i32, weight as i32).unwrap())
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn requires_inputs_are_in_the_entity_key_and_a_new_price_never_gets_an_old_estimate() {
    let shop = Shop::start(|c| c.cache = cache(10.0)).await;
    let upc = SCALE.upc(3);
    let vars = json!({ "upc": upc });
    let (price, weight) = shop.price_and_weight(3).await;
    let before = shop.requests().await;
    let first = shop.data(ESTIMATE_BY_UPC, vars.clone()).await;
    assert_eq!(
        first["product"]["shippingEstimate"],
        estimate(price, weight)
    );
    // products for the product, price and weight; inventory for the estimate, sent
    // the two as `@requires` inputs in the representation.
    assert_eq!(spent(before, shop.requests().await), [1, 1, 0, 0]);
    let before = shop.requests().await;
    assert_eq!(shop.data(ESTIMATE_BY_UPC, vars.clone()).await, first);
    assert_eq!(spent(before, shop.requests().await), [0, 0, 0, 0]);

    let new_price = other_side(price);
    let update = json!({ "upc": upc, "price": new_price });
    shop.data(UPDATE_PRICE, update).await;
    let before = shop.requests().await;
    let after = shop.data(ESTIMATE_BY_UPC, vars).await;
    let product = &after["product"];
    assert_eq!(product["price"], new_price);
    assert_eq!(product["shippingEstimate"], estimate(new_price, weight));
    assert_ne!(
        product["shippingEstimate"],
        first["product"]["shippingEstimate"]
    );
    // Both entries held Product:<upc> (the product's, and the estimate's for it) and
    // were dropped; the new price makes a new key for the estimate: a miss.
    assert_eq!(spent(before, shop.requests().await), [1, 1, 0, 0]);
    let counters = shop.counters().await;
    counters.assert("invalidations", "Query.product", 1);
    counters.assert("invalidations", "Product.shippingEstimate", 1);
    counters.assert("misses", "Product.shippingEstimate", 2);
    counters.assert("hits", "Product.shippingEstimate", 1);
    let expected = names(&["Query.product", "Product.shippingEstimate"]);
    assert_eq!(counters.called(), expected, "{}", counters.0);
}

#[tokio::test]
async fn with_invalidation_off_the_representation_alone_separates_two_prices() {
    let shop = Shop::start(|c| c.cache = cache_with(10.0, |s| s.invalidation = false)).await;
    let (upc, sku) = (SCALE.upc(5), SCALE.sku(5));
    let (price, weight) = shop.price_and_weight(5).await;
    let by_upc = json!({ "upc": upc });
    let by_sku = json!({ "sku": sku });
    let old = shop.data(ESTIMATE_BY_UPC, by_upc.clone()).await;
    assert_eq!(old["product"]["shippingEstimate"], estimate(price, weight));
    let new_price = other_side(price);
    let update = json!({ "upc": upc, "price": new_price });
    shop.data(UPDATE_PRICE, update).await;
    // Another root field reaches the same product with its new price: the same
    // entity, namespace and selection, but another representation, so another entry.
    let before = shop.requests().await;
    let new = shop.data(ESTIMATE_BY_SKU, by_sku.clone()).await;
    let product = &new["productBySku"];
    assert_eq!(
        (&product["upc"], &product["price"]),
        (&json!(upc), &json!(new_price))
    );
    assert_eq!(product["shippingEstimate"], estimate(new_price, weight));
    assert_eq!(spent(before, shop.requests().await), [1, 1, 0, 0]);
    // Both are kept until their TTL: the old root entry still sends the old price
    // (stale on purpose with invalidation off), and gets the estimate of that price.
    let before = shop.requests().await;
    assert_eq!(shop.data(ESTIMATE_BY_UPC, by_upc).await, old);
    assert_eq!(shop.data(ESTIMATE_BY_SKU, by_sku).await, new);
    assert_eq!(spent(before, shop.requests().await), [0, 0, 0, 0]);
    let counters = shop.counters().await;
    counters.assert("misses", "Product.shippingEstimate", 2);
    counters.assert("hits", "Product.shippingEstimate", 2);
    counters.assert("invalidations", "Product.shippingEstimate", 0);
}

const NODES: &str = "{ nodes { __typename id ... on Book { label } ... on Author { label } } }";

/// The (type, id, label) of each of `nodes`.
fn nodes(answer: &Value) -> Vec<(String, String, String)> {
    let list = answer["data"]["nodes"].as_array();
    let list = list.unwrap_or_else(|| panic!("{answer}"));
    let text = |n: &Value, k: &str| n[k].as_str().unwrap_or_else(|| panic!("{n}")).to_string();
    let node = |n: &Value| (text(n, "__typename"), text(n, "id"), text(n, "label"));
    list.iter().map(node).collect()
}

fn labelled(labels: [&str; 4]) -> Vec<(String, String, String)> {
    let keys = [
        ("Book", "1"),
        ("Author", "1"),
        ("Book", "2"),
        ("Author", "2"),
    ];
    let node = |((ty, id), label): ((&str, &str), &str)| (ty.into(), id.into(), label.into());
    keys.into_iter().zip(labels).map(node).collect()
}

#[tokio::test]
async fn abstract_types_are_keyed_by_their_concrete_type() {
    let graph = Namesakes::start(cache(10.0)).await;
    let expected = labelled(["book 1", "author 1", "book 2", "author 2"]);
    let (_, labels) = graph.requests().await;
    assert_eq!(nodes(&graph.answer(NODES).await), expected);
    // One `_entities` request for the four; Book 1 and Author 1 are two entries.
    assert_eq!(graph.requests().await.1 - labels, 1);
    let (_, labels) = graph.requests().await;
    assert_eq!(nodes(&graph.answer(NODES).await), expected);
    assert_eq!(graph.requests().await.1, labels, "all four from the cache");
    let counters = graph.counters().await;
    for namespace in ["Book.label", "Author.label"] {
        counters.assert("misses", namespace, 2);
        counters.assert("hits", namespace, 2);
    }
    counters.assert("hits", "Query.nodes", 1);
    let expected = names(&["Query.nodes", "Book.label", "Author.label"]);
    assert_eq!(counters.called(), expected, "{}", counters.0);
}

#[tokio::test]
async fn a_mutation_invalidates_its_entity_reached_through_an_interface_and_not_its_namesake() {
    let graph = Namesakes::start(cache(10.0)).await;
    graph.answer(NODES).await;
    let relabel = r#"mutation { relabelBook(id: "1", label: "renamed") { id label } }"#;
    let relabelled = graph.answer(relabel).await;
    assert_eq!(
        relabelled["data"]["relabelBook"]["label"], "renamed",
        "{relabelled}"
    );
    let (catalog, labels) = graph.requests().await;
    let after = graph.answer(NODES).await;
    let expected = labelled(["renamed", "author 1", "book 2", "author 2"]);
    assert_eq!(nodes(&after), expected);
    // `nodes` held Book:1 (under its concrete type's key alias) and is fetched
    // again; of the labels only Book 1's was dropped: Author 1, the same id under
    // another type, and Book 2 are answered from the cache.
    assert_eq!(graph.requests().await, (catalog + 1, labels + 1));
    let counters = graph.counters().await;
    counters.assert("invalidations", "Query.nodes", 1);
    counters.assert("invalidations", "Book.label", 1);
    counters.assert("invalidations", "Author.label", 0);
    counters.assert("misses", "Book.label", 3);
    counters.assert("hits", "Book.label", 1);
    counters.assert("hits", "Author.label", 2);
}

const MENTIONS: &str = "query($id: ID!) { review(id: $id) { id mentions { __typename ... on Product { upc name price } ... on User { id name } } } }";

/// The mention of type `ty` in a `MENTIONS` answer.
fn mention<'a>(data: &'a Value, ty: &str) -> &'a Value {
    let mentions = data["review"]["mentions"].as_array().unwrap();
    let found = mentions.iter().find(|m| m["__typename"] == ty);
    found.unwrap_or_else(|| panic!("no {ty} in {data}"))
}

#[tokio::test]
async fn a_mutation_invalidates_entries_that_hold_its_entity_through_a_union() {
    let shop = Shop::start(|c| c.cache = cache(10.0)).await;
    let both = |r: &Value| {
        !mentioned(r, "Product", "upc").is_empty() && !mentioned(r, "User", "id").is_empty()
    };
    let review = shop
        .review_where("mentions a product and a user", both)
        .await;
    let (upc, user) = (
        &mentioned(&review, "Product", "upc")[0],
        &mentioned(&review, "User", "id")[0],
    );
    let vars = json!({ "id": review["id"] });
    let first = shop.data(MENTIONS, vars.clone()).await;
    let (price, _) = shop
        .price_and_weight(SCALE.product_by_upc(upc).unwrap())
        .await;
    assert_eq!(mention(&first, "Product")["price"], price);
    let before = shop.requests().await;
    assert_eq!(shop.data(MENTIONS, vars.clone()).await, first);
    assert_eq!(spent(before, shop.requests().await), [0, 0, 0, 0]);

    // A product's price: the review's entry (it holds Product:<upc> through
    // `Mention`) and the product's own entry are dropped; the user's stays.
    let new_price = price + 100;
    shop.data(UPDATE_PRICE, json!({ "upc": upc, "price": new_price }))
        .await;
    let before = shop.requests().await;
    let after = shop.data(MENTIONS, vars.clone()).await;
    assert_eq!(mention(&after, "Product")["price"], new_price, "{after}");
    assert_eq!(mention(&after, "User"), mention(&first, "User"));
    assert_eq!(spent(before, shop.requests().await), [1, 0, 1, 0]);

    // A user's name, the same way through the other member of the union.
    let rename = r#"mutation($id: ID!) { updateName(id: $id, name: "Renamed Person") { id } }"#;
    shop.data(rename, json!({ "id": user })).await;
    let before = shop.requests().await;
    let after = shop.data(MENTIONS, vars).await;
    assert_eq!(mention(&after, "User")["name"], "Renamed Person", "{after}");
    assert_eq!(mention(&after, "Product")["price"], new_price);
    assert_eq!(spent(before, shop.requests().await), [0, 0, 1, 1]);

    let counters = shop.counters().await;
    counters.assert("invalidations", "Query.review", 2);
    counters.assert("invalidations", "Product.name+price", 1);
    counters.assert("invalidations", "User.name", 1);
    let expected = names(&["Query.review", "Product.name+price", "User.name"]);
    assert_eq!(counters.called(), expected, "{}", counters.0);
}

const AUTHOR: &str = "query($id: ID!) { review(id: $id) { author { name } } }";

#[tokio::test]
async fn an_entity_fetched_by_its_other_key_is_invalidated_by_its_mutation() {
    // reviews provides the author's username, so accounts is asked for the author by
    // its second key: `{"__typename":"User","username":…}`.
    let planner = gateway::plan::Planner::from_sdl(&common::commerce::supergraph(), true).unwrap();
    let plan = planner.compile_text(AUTHOR, &Default::default()).unwrap();
    let requires: Vec<String> = plan
        .fetches
        .iter()
        .filter_map(|f| match &f.kind {
            gateway::plan::FetchKind::Entities(groups) => Some(groups),
            _ => None,
        })
        .flatten()
        .flat_map(|g| g.requires.iter().map(|r| r.to_string()))
        .collect();
    assert_eq!(requires, ["...on User{__typename username}"]);

    let shop = Shop::start(|c| c.cache = cache(10.0)).await;
    let review = shop.review_where("has a review", |_| true).await;
    let vars = json!({ "id": review["id"] });
    shop.data(AUTHOR, vars.clone()).await;
    let rename = r#"mutation($id: ID!) { updateName(id: $id, name: "Someone Else") { id } }"#;
    shop.data(rename, json!({ "id": review["author"]["id"] }))
        .await;
    let before = shop.requests().await;
    let after = shop.data(AUTHOR, vars).await;
    assert_eq!(after["review"]["author"]["name"], "Someone Else", "{after}");
    assert_eq!(spent(before, shop.requests().await), [0, 0, 1, 1]);
    shop.counters()
        .await
        .assert("invalidations", "User.name", 1);
}

/// `n` copies of `query` sent at once: their data, and the subgraph requests they
/// cost.
async fn at_once(shop: &Shop, n: usize, query: &str, vars: &Value) -> (Vec<Value>, [u64; 4]) {
    let before = shop.requests().await;
    let answers = futures::future::join_all((0..n).map(|_| shop.data(query, vars.clone()))).await;
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
    (answers, spent(before, shop.requests().await))
}

/// Its plan: reviews, then accounts (`_e0` the author, by username; `_e1` the users
/// mentioned, by id) and products (the product and the products mentioned, in one
/// `_entities` field) side by side.
const BATCHED: &str = "query($id: ID!) { review(id: $id) { author { name } product { name } mentions { ... on Product { name } ... on User { name } } } }";

#[tokio::test]
async fn identical_fetches_in_flight_are_joined_on_every_shape() {
    // Every subgraph holds its answers 300 ms, so requests sent together overlap at
    // every level; TTL 0 keeps nothing, so only joining saves requests.
    let shop = Shop::start_delayed(Duration::from_millis(300), |c| c.cache = cache(0.0)).await;
    let (n, none) = (6, json!(null));
    // A root field.
    let top = "{ topProducts(first: 3) { upc name } }";
    let (answers, cost) = at_once(&shop, n, top, &none).await;
    assert_eq!(answers[0]["topProducts"][2]["upc"], SCALE.upc(2));
    assert_eq!(cost, [1, 0, 0, 0]);
    // Entities with `@requires` inputs, a batch of three per request.
    let q = "{ topProducts(first: 3) { upc shippingEstimate } }";
    assert_eq!(at_once(&shop, n, q, &none).await.1, [1, 1, 0, 0]);
    // Two batches that overlap: whichever goes first, the other joins the products
    // they share and asks only for the rest.
    let three = shop.data("{ topProducts(first: 3) { reviewCount } }", json!(null));
    let four = shop.data("{ topProducts(first: 4) { reviewCount } }", json!(null));
    let before = shop.requests().await;
    let (three, four) = futures::future::join(three, four).await;
    let cost = spent(before, shop.requests().await);
    assert_eq!(three["topProducts"][2], four["topProducts"][2]);
    assert_eq!(
        cost[Part::Products as usize],
        2,
        "two root fields of different arguments"
    );
    assert!(cost[Part::Reviews as usize] <= 2, "{cost:?}");
    // One request of two `_entities` fields, and members of a union from their
    // owners; the review mentions its author, asked for by both fields.
    let mentions_author = |r: &Value| {
        mentioned(r, "User", "id").contains(&r["author"]["id"].as_str().unwrap().to_string())
    };
    let review = shop
        .review_where("mentions its author", mentions_author)
        .await;
    let vars = json!({ "id": review["id"] });
    assert_eq!(at_once(&shop, n, BATCHED, &vars).await.1, [1, 0, 1, 1]);
    // The author is asked for by username, the users mentioned by id: entries of
    // their own, even for the same user.
    let users = 1 + mentioned(&review, "User", "id")
        .into_iter()
        .collect::<BTreeSet<_>>()
        .len() as u64;
    let mut products: BTreeSet<String> = mentioned(&review, "Product", "upc").into_iter().collect();
    products.insert(review["product"]["upc"].as_str().unwrap().into());
    let products = products.len() as u64;

    let counters = shop.counters().await;
    let joined = n as u64 - 1;
    counters.assert("dedupes", "Query.topProducts", 2 * joined);
    counters.assert("dedupes", "Product.shippingEstimate", 3 * joined);
    counters.assert("misses", "Product.reviewCount", 4);
    counters.assert("dedupes", "Product.reviewCount", 3);
    counters.assert("dedupes", "Query.review", joined);
    counters.assert("misses", "User.name", users);
    counters.assert("dedupes", "User.name", users * joined);
    counters.assert("misses", "Product.name", products);
    counters.assert("dedupes", "Product.name", products * joined);
    // Nothing was kept: the same query later goes upstream again.
    assert_eq!(at_once(&shop, 1, top, &none).await.1, [1, 0, 0, 0]);
}

const ME: &str = "{ me { id name wishlist { upc name } } }";

/// Ask `me` as each caller twice (anonymous is u1), checking each answer against
/// accounts; the subgraph requests of the second round, per caller.
async fn me_twice(shop: &Shop) -> Vec<[u64; 4]> {
    let callers = [
        (None, "u1"),
        (Some("Bearer u2"), "u2"),
        (Some("Bearer u3"), "u3"),
    ];
    let mut second = Vec::new();
    for round in 0..2 {
        for (header, id) in callers {
            let headers: Vec<(&str, &str)> =
                header.map(|h| ("authorization", h)).into_iter().collect();
            let before = shop.requests().await;
            let d = shop.data_as(ME, json!(null), &headers).await;
            let cost = spent(before, shop.requests().await);
            let (name, upcs) = shop.user(id).await;
            assert_eq!(d["me"]["id"], id, "{header:?}: {d}");
            assert_eq!(d["me"]["name"], name.as_str());
            let wishlist = d["me"]["wishlist"].as_array().unwrap().iter();
            let got: Vec<&str> = wishlist.map(|p| p["upc"].as_str().unwrap()).collect();
            assert_eq!(got, upcs, "{header:?}");
            if round == 1 {
                second.push(cost);
            }
        }
    }
    second
}

#[tokio::test]
async fn credentials_skip_the_cache_and_no_answer_crosses_users() {
    let shop = Shop::start(|c| c.cache = cache(10.0)).await;
    let second = me_twice(&shop).await;
    // Anonymous: all from the cache. With credentials: everything upstream again,
    // the wishlist's products too.
    assert_eq!(second, [[0, 0, 0, 0], [1, 0, 0, 1], [1, 0, 0, 1]]);
    let wished = (shop.user("u2").await.1.len() + shop.user("u3").await.1.len()) as u64;
    let counters = shop.counters().await;
    counters.assert("skips", "Query.me", 4);
    counters.assert("hits", "Query.me", 1);
    counters.assert("skips", "Product.name", 2 * wished);
}

#[tokio::test]
async fn a_policy_keys_me_by_the_caller_and_no_answer_crosses_users() {
    let policies = common::me_keyed_by_caller();
    let shop = Shop::start(|c| c.cache = cache_with(10.0, |s| s.policies = policies)).await;
    let second = me_twice(&shop).await;
    // `me` comes from each caller's own entry; the products of a caller's wishlist
    // are not keyed by the caller, so they are still fetched for each.
    assert_eq!(second, [[0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]);
    let counters = shop.counters().await;
    counters.assert("misses", "Query.me", 3);
    counters.assert("hits", "Query.me", 3);
    counters.assert("skips", "Query.me", 0);
}

#[tokio::test]
async fn concurrent_callers_share_a_fetch_only_with_themselves() {
    let policies = common::me_keyed_by_caller();
    let slow = Duration::from_millis(300);
    let shop = Shop::start_delayed(slow, |c| {
        c.cache = cache_with(0.0, |s| s.policies = policies)
    })
    .await;
    let callers = [
        "Bearer u2",
        "Bearer u3",
        "Bearer u2",
        "Bearer u3",
        "Bearer u2",
    ];
    let headers: Vec<[(&str, &str); 1]> = callers.iter().map(|h| [("authorization", *h)]).collect();
    let q = "{ me { id name } }";
    let before = shop.requests().await;
    let answers =
        futures::future::join_all(headers.iter().map(|h| shop.data_as(q, json!(null), h))).await;
    for (h, d) in callers.iter().zip(&answers) {
        assert_eq!(d["me"]["id"], h.trim_start_matches("Bearer "), "{h}: {d}");
    }
    // One fetch per caller, joined by that caller's other requests only.
    assert_eq!(spent(before, shop.requests().await), [0, 0, 0, 2]);
    shop.counters().await.assert("dedupes", "Query.me", 3);
}
