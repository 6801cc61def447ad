//! Federation: `@shareable`, `@override`, `@inaccessible`, and enum and input-object
//! intersections (graph `directives`, in `tests/supergraphs/directives/`).
//!
//! A shop in three subgraphs. `catalog` and `stock` both resolve `Product.name`,
//! `Product.condition` and `Query.featured` (`@shareable`: the gateway must pick the
//! subgraph that saves a fetch); `Product.rating` moved from `legacy` to `catalog`,
//! and `Product.tagline` from `catalog` to `stock` (`@override`: the old subgraphs
//! still answer them, wrongly, and must not be asked); `catalog` hides `Product.cost`
//! (`stock` requires it for `margin`), `Product.supplier` and its type `Supplier`
//! (`@inaccessible`); the enum `Condition` has a value only `stock` knows, hidden
//! (`REFURBISHED @inaccessible`); and the input `PriceRange` has a field only
//! `catalog` declares, so the public input is the two subgraphs' intersection.

mod common;

use async_graphql::dynamic::{Enum, EnumItem, InputObject, Object};
use common::federated::schema::{arg, computed, field, lookup, Subgraph};
use serde_json::{json, Value as Json};

const GRAPH: &str = "directives";

fn catalog_products() -> Json {
    json!([
        { "__typename": "Product", "id": "p1", "name": "Kettle", "price": 30, "cost": 18,
          "condition": "NEW", "rating": 4.6, "tagline": "(catalog's old tagline)",
          "supplier": { "name": "Acme" } },
        { "__typename": "Product", "id": "p2", "name": "Lamp", "price": 45, "cost": 40,
          "condition": "USED", "rating": 3.8, "tagline": "(catalog's old tagline)",
          "supplier": { "name": "Lumo" } },
        { "__typename": "Product", "id": "p3", "name": "Mug", "price": 8, "cost": 2,
          "condition": "NEW", "rating": 4.1, "tagline": "(catalog's old tagline)",
          "supplier": null },
    ])
}

/// The products whose price is within `range` (`{min, max}`, either may be absent).
fn in_range(products: &Json, range: &Json) -> Json {
    let within = |p: &&Json| {
        let price = p["price"].as_i64().unwrap();
        range["min"].as_i64().is_none_or(|m| price >= m)
            && range["max"].as_i64().is_none_or(|m| price <= m)
    };
    Json::Array(
        products
            .as_array()
            .unwrap()
            .iter()
            .filter(within)
            .cloned()
            .collect(),
    )
}

fn price_range(currency: bool) -> InputObject {
    let range = InputObject::new("PriceRange")
        .field(arg("min", "Int"))
        .field(arg("max", "Int"));
    if currency {
        range.field(arg("currency", "String"))
    } else {
        range
    }
}

fn catalog() -> Subgraph {
    let (all, p) = (catalog_products(), catalog_products());
    Subgraph::new(
        "catalog",
        Object::new("Query")
            .field(
                computed("products", "[Product!]!", move |_, args| {
                    Ok(in_range(&all, &args["range"]))
                })
                .argument(arg("range", "PriceRange")),
            )
            .field(computed("featured", "Product", move |_, _| Ok(p[1].clone())).shareable()),
    )
    .with(
        Object::new("Product")
            .key("id")
            .field(field("id", "ID!"))
            .field(field("name", "String!").shareable())
            .field(field("price", "Int!"))
            .field(field("cost", "Int!").inaccessible())
            .field(field("condition", "Condition").shareable())
            .field(field("rating", "Float!").override_from("legacy"))
            .field(field("tagline", "String!"))
            .field(field("supplier", "Supplier").inaccessible()),
    )
    .with(
        Object::new("Supplier")
            .inaccessible()
            .field(field("name", "String!")),
    )
    .with(Enum::new("Condition").item("NEW").item("USED"))
    .with(price_range(true))
    .entities(lookup(catalog_products(), &["id"]))
}

fn stock_products() -> Json {
    json!([
        { "__typename": "Product", "id": "p1", "name": "Kettle", "quantity": 3,
          "condition": "NEW", "tagline": "Boils in 90 s", "price": 30 },
        { "__typename": "Product", "id": "p2", "name": "Lamp", "quantity": 0,
          "condition": "USED", "tagline": "Bright enough", "price": 45 },
        { "__typename": "Product", "id": "p3", "name": "Mug", "quantity": 12,
          "condition": "REFURBISHED", "tagline": "Holds 300 ml", "price": 8 },
    ])
}

fn stock() -> Subgraph {
    let (all, p, by_condition) = (stock_products(), stock_products(), stock_products());
    Subgraph::new(
        "stock",
        Object::new("Query")
            .field(
                computed("inStock", "[Product!]!", move |_, args| {
                    let available = all
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|p| p["quantity"].as_i64() > Some(0));
                    let available = Json::Array(available.cloned().collect());
                    Ok(in_range(&available, &args["range"]))
                })
                .argument(arg("range", "PriceRange")),
            )
            .field(computed("featured", "Product", move |_, _| Ok(p[1].clone())).shareable())
            .field(
                computed("productsIn", "[Product!]!", move |_, args| {
                    let matching = by_condition
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|p| p["condition"] == args["condition"]);
                    Ok(Json::Array(matching.cloned().collect()))
                })
                .argument(arg("condition", "Condition!")),
            ),
    )
    .with(
        Object::new("Product")
            .key("id")
            .field(field("id", "ID!"))
            .field(field("name", "String!").shareable())
            .field(field("quantity", "Int!"))
            .field(field("condition", "Condition").shareable())
            .field(field("tagline", "String!").override_from("catalog"))
            .field(field("cost", "Int!").external())
            .field(field("price", "Int!").external())
            .field(
                computed("margin", "Int!", |p, _| {
                    let (price, cost) = (p["price"].as_i64(), p["cost"].as_i64());
                    match (price, cost) {
                        (Some(price), Some(cost)) => Ok(json!(price - cost)),
                        _ => Err("the required inputs price and cost were not sent".into()),
                    }
                })
                .requires("cost price"),
            ),
    )
    .with(
        Enum::new("Condition")
            .item("NEW")
            .item("USED")
            .item(EnumItem::new("REFURBISHED").inaccessible()),
    )
    .with(price_range(false))
    .entities(lookup(stock_products(), &["id"]))
}

fn legacy() -> Subgraph {
    // Its ratings are stale: the field moved to `catalog`.
    let stale = |id: &str| json!({ "__typename": "Product", "id": id, "rating": 0.0 });
    Subgraph::new(
        "legacy",
        Object::new("Query").field(computed("legacyVersion", "Int!", |_, _| Ok(json!(1)))),
    )
    .with(
        Object::new("Product")
            .key("id")
            .field(field("id", "ID!"))
            .field(field("rating", "Float!")),
    )
    .entities(lookup(
        json!([stale("p1"), stale("p2"), stale("p3")]),
        &["id"],
    ))
}

crate::federated_graph!(GRAPH, [catalog(), stock(), legacy()]);

#[tokio::test]
async fn a_shareable_root_field_is_asked_of_the_subgraph_that_has_the_rest() {
    let fed = start().await;
    let answer = fed.query("{ featured { name quantity } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "featured": { "name": "Lamp", "quantity": 0 } } })
    );
    assert_eq!(
        (
            fed.upstream_requests("catalog").await,
            fed.upstream_requests("stock").await
        ),
        (0, 1)
    );
    let answer = fed.query("{ featured { name price } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "featured": { "name": "Lamp", "price": 45 } } })
    );
    assert_eq!(
        (
            fed.upstream_requests("catalog").await,
            fed.upstream_requests("stock").await
        ),
        (1, 1)
    );
    assert_eq!(fed.counts(), [("catalog", 1), ("stock", 1), ("legacy", 0)]);
}

#[tokio::test]
async fn a_shareable_entity_field_is_answered_where_the_entity_already_is() {
    let fed = start().await;
    let answer = fed.query("{ inStock { name quantity } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "inStock": [
            { "name": "Kettle", "quantity": 3 }, { "name": "Mug", "quantity": 12 },
        ] } })
    );
    assert_eq!(fed.counts(), [("catalog", 0), ("stock", 1), ("legacy", 0)]);
    fed.clear_logs();
    let answer = fed.query("{ products { name price } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "products": [
            { "name": "Kettle", "price": 30 }, { "name": "Lamp", "price": 45 }, { "name": "Mug", "price": 8 },
        ] } })
    );
    assert_eq!(fed.counts(), [("catalog", 1), ("stock", 0), ("legacy", 0)]);
}

#[tokio::test]
async fn an_overridden_field_is_answered_by_the_subgraph_it_moved_to() {
    let fed = start().await;
    let answer = fed.query("{ products { id rating tagline } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "products": [
            { "id": "p1", "rating": 4.6, "tagline": "Boils in 90 s" },
            { "id": "p2", "rating": 3.8, "tagline": "Bright enough" },
            { "id": "p3", "rating": 4.1, "tagline": "Holds 300 ml" },
        ] } })
    );
    // `legacy` lost `rating`; `catalog` still serves `tagline` but is not asked it.
    assert_eq!(fed.counts(), [("catalog", 1), ("stock", 1), ("legacy", 0)]);
    assert!(
        !fed.log("catalog")[0].query.contains("tagline"),
        "{:?}",
        fed.log("catalog")
    );
}

#[tokio::test]
async fn an_inaccessible_field_is_still_a_requirements_input() {
    let fed = start().await;
    let answer = fed.query("{ products { name margin } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "products": [
            { "name": "Kettle", "margin": 12 }, { "name": "Lamp", "margin": 5 }, { "name": "Mug", "margin": 6 },
        ] } })
    );
    let rep = |id: &str, cost: i64, price: i64| json!({ "__typename": "Product", "id": id, "cost": cost, "price": price });
    assert_eq!(
        fed.representations("stock"),
        [rep("p1", 18, 30), rep("p2", 40, 45), rep("p3", 2, 8)]
    );
}

#[tokio::test]
async fn inaccessible_elements_are_absent_from_introspection() {
    let fed = start().await;
    let answer = fed
        .query(
            "{ product: __type(name: \"Product\") { fields { name } } \
             supplier: __type(name: \"Supplier\") { name } \
             condition: __type(name: \"Condition\") { enumValues { name } } \
             range: __type(name: \"PriceRange\") { inputFields { name } } }",
        )
        .await;
    let names = |names: &[&str]| -> Json { names.iter().map(|n| json!({ "name": n })).collect() };
    assert_eq!(
        answer,
        json!({ "data": {
            "product": { "fields": names(&["id", "name", "price", "condition", "rating", "tagline", "quantity", "margin"]) },
            "supplier": null,
            "condition": { "enumValues": names(&["NEW", "USED"]) },
            "range": { "inputFields": names(&["min", "max"]) },
        } })
    );
    let answer = fed.query("{ __schema { types { name } } }").await;
    let types: Vec<&str> = answer["data"]["__schema"]["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        types.contains(&"Product") && !types.contains(&"Supplier"),
        "{types:?}"
    );
    assert_eq!(fed.counts(), [("catalog", 0), ("stock", 0), ("legacy", 0)]);
}

#[tokio::test]
async fn an_operation_that_uses_an_inaccessible_element_is_refused() {
    let fed = start().await;
    for (query, error) in [
        (
            "{ products { cost } }",
            json!({ "message": "Unknown field \"cost\" on type \"Product\".", "locations": [{ "line": 1, "column": 14 }] }),
        ),
        (
            "{ products { supplier { name } } }",
            json!({ "message": "Unknown field \"supplier\" on type \"Product\".", "locations": [{ "line": 1, "column": 14 }] }),
        ),
        (
            "{ productsIn(condition: REFURBISHED) { id } }",
            json!({ "message": "Invalid value for argument \"condition\", enumeration type \"Condition\" does not contain the value \"REFURBISHED\"", "locations": [{ "line": 1, "column": 14 }] }),
        ),
    ] {
        assert_eq!(
            fed.query(query).await,
            json!({ "errors": [error] }),
            "{query}"
        );
    }
    assert_eq!(fed.counts(), [("catalog", 0), ("stock", 0), ("legacy", 0)]);
}

#[tokio::test]
async fn a_hidden_enum_value_from_a_subgraph_is_an_error_not_an_answer() {
    let fed = start().await;
    let answer = fed.query("{ inStock { id condition } }").await;
    assert_eq!(
        answer,
        json!({
            "data": { "inStock": [{ "id": "p1", "condition": "NEW" }, { "id": "p3", "condition": null }] },
            "errors": [{
                "message": "Product.condition returned \"REFURBISHED\", which its enum type does not have",
                "locations": [{ "line": 1, "column": 16 }],
                "path": ["inStock", 1, "condition"],
            }],
        })
    );
    let answer = fed
        .query("{ productsIn(condition: USED) { id condition } }")
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "productsIn": [{ "id": "p2", "condition": "USED" }] } })
    );
}

#[tokio::test]
async fn an_input_object_has_the_fields_every_subgraph_declares() {
    let fed = start().await;
    let answer = fed
        .query_with(
            "query($r: PriceRange) { products(range: { min: 10 }) { id } inStock(range: $r) { id } }",
            json!({ "r": { "max": 10 } }),
        )
        .await;
    assert_eq!(
        answer,
        json!({ "data": {
            "products": [{ "id": "p1" }, { "id": "p2" }],
            "inStock": [{ "id": "p3" }],
        } })
    );
    // `currency` is only `catalog`'s: not in the public input, literally or in a variable.
    let answer = fed
        .query("{ products(range: { currency: \"EUR\" }) { id } }")
        .await;
    assert_eq!(
        answer,
        json!({ "errors": [{
            "message": "Invalid value for argument \"range\", unknown field \"currency\" of type \"PriceRange\"",
            "locations": [{ "line": 1, "column": 12 }],
        }] })
    );
    let answer = fed
        .query_with(
            "query($r: PriceRange) { inStock(range: $r) { id } }",
            json!({ "r": { "max": 10, "currency": "EUR" } }),
        )
        .await;
    assert_eq!(
        answer,
        json!({ "errors": [{ "message": "variable $r of type PriceRange got {currency: \"EUR\", max: 10}" }] })
    );
    assert_eq!(fed.counts(), [("catalog", 1), ("stock", 1), ("legacy", 0)]);
}
