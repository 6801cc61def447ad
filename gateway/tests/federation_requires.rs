//! Federation: `@external` and `@requires` (graph `requires`, in
//! `tests/supergraphs/requires/`).
//!
//! Parcels in three subgraphs. `warehouse` owns each parcel's weight (a field with an
//! argument, `weight(unit:)`) and contents (an interface, `Goods` or `Papers`);
//! `shipping` works out `postage` from `weight(unit: KG)` (a requirement with an
//! argument, on a field that has one of its own) and `insurance` from
//! `contents { label ... on Goods { value } }` (a requirement with a fragment);
//! `customs` works out `duty` from `postage` (a chain: duty, then postage, then weight),
//! and `warehouse` its own `packing` from `insurance` (circular: warehouse, shipping,
//! warehouse). Every required input is checked by the subgraph that needs it: one that
//! was not sent is an error, never a guess. Each test asserts the whole answer and the
//! representations that carried the inputs.

mod common;

use async_graphql::dynamic::{Enum, Interface, Object};
use common::federated::schema::{arg, computed, field, ifield, lookup, Subgraph};
use serde_json::{json, Value as Json};

const GRAPH: &str = "requires";

fn parcels() -> Json {
    json!([
        { "__typename": "Parcel", "id": "x1", "kg": 2.0, "lb": 4.4,
          "contents": { "__typename": "Goods", "label": "Tea", "value": 40 } },
        { "__typename": "Parcel", "id": "x2", "kg": 0.5, "lb": 1.1,
          "contents": { "__typename": "Papers", "label": "Deeds", "pages": 12 } },
        { "__typename": "Parcel", "id": "x3", "kg": 10.0, "lb": 22.0,
          "contents": { "__typename": "Goods", "label": "Vase", "value": 300 } },
    ])
}

/// A required input of `parent`, or the error that says it was not sent.
fn input<'a>(parent: &'a Json, name: &str) -> Result<&'a Json, String> {
    parent
        .get(name)
        .filter(|v| !v.is_null())
        .ok_or_else(|| format!("the required input {name} was not sent"))
}

fn unit() -> Enum {
    Enum::new("Unit").item("KG").item("LB")
}

/// `Contents`, `Goods` and `Papers`, as both `warehouse` and `shipping` declare them.
fn contents_types(subgraph: Subgraph) -> Subgraph {
    subgraph
        .with(Interface::new("Contents").field(ifield("label", "String!")))
        .with(
            Object::new("Goods")
                .shareable()
                .implement("Contents")
                .field(field("label", "String!"))
                .field(field("value", "Int!")),
        )
        .with(
            Object::new("Papers")
                .shareable()
                .implement("Contents")
                .field(field("label", "String!"))
                .field(field("pages", "Int!")),
        )
}

fn warehouse() -> Subgraph {
    let all = parcels();
    let subgraph = Subgraph::new(
        "warehouse",
        Object::new("Query").field(computed("parcels", "[Parcel!]!", move |_, _| {
            Ok(all.clone())
        })),
    )
    .with(unit())
    .with(
        Object::new("Parcel")
            .key("id")
            .field(field("id", "ID!"))
            .field(
                computed("weight", "Float!", |parcel, args| {
                    Ok(match args["unit"].as_str() {
                        Some("LB") => parcel["lb"].clone(),
                        _ => parcel["kg"].clone(),
                    })
                })
                .argument(arg("unit", "Unit!")),
            )
            .field(field("contents", "Contents!"))
            .field(field("insurance", "Int!").external())
            .field(
                computed("packing", "String!", |parcel, _| {
                    let insurance = input(parcel, "insurance")?.as_i64().unwrap_or_default();
                    Ok(json!(if insurance >= 50 { "crate" } else { "box" }))
                })
                .requires("insurance"),
            ),
    );
    contents_types(subgraph).entities(lookup(parcels(), &["id"]))
}

fn shipping() -> Subgraph {
    let subgraph = Subgraph::new(
        "shipping",
        Object::new("Query").field(computed("carriers", "[String!]!", |_, _| {
            Ok(json!(["post", "courier"]))
        })),
    )
    .with(unit())
    .with(
        Object::new("Parcel")
            .key("id")
            .field(field("id", "ID!"))
            .field(
                field("weight", "Float!")
                    .argument(arg("unit", "Unit!"))
                    .external(),
            )
            .field(
                computed("postage", "Int!", |parcel, args| {
                    let kg = input(parcel, "weight")?.as_f64().unwrap_or_default();
                    let postage = (kg * 4.0).round() as i64 + 3;
                    let express = args["express"].as_bool().unwrap_or(false);
                    Ok(json!(if express { postage * 2 } else { postage }))
                })
                .argument(arg("express", "Boolean!").default_value(false))
                .requires("weight(unit: KG)"),
            )
            .field(field("contents", "Contents!").external())
            .field(
                computed("insurance", "Int!", |parcel, _| {
                    let contents = input(parcel, "contents")?;
                    let base = match contents["__typename"].as_str() {
                        Some("Goods") => {
                            input(contents, "value")?.as_i64().unwrap_or_default() / 10
                        }
                        _ => 1,
                    };
                    let fragile = input(contents, "label")? == "Vase";
                    Ok(json!(if fragile { base * 2 } else { base }))
                })
                .requires("contents { label ... on Goods { value } }"),
            ),
    );
    contents_types(subgraph).entities(|rep| rep.clone())
}

fn customs() -> Subgraph {
    Subgraph::new(
        "customs",
        Object::new("Query").field(computed("dutyRate", "Int!", |_, _| Ok(json!(3)))),
    )
    .with(
        Object::new("Parcel")
            .key("id")
            .field(field("id", "ID!"))
            .field(
                field("postage", "Int!")
                    .argument(arg("express", "Boolean!").default_value(false))
                    .external(),
            )
            .field(
                computed("duty", "Int!", |parcel, _| {
                    let postage = input(parcel, "postage")?.as_i64().unwrap_or_default();
                    Ok(json!(postage * 3))
                })
                .requires("postage(express: false)"),
            ),
    )
    .entities(|rep| rep.clone())
}

crate::federated_graph!(GRAPH, [warehouse(), shipping(), customs()]);

fn rep(id: &str, input: &str, value: Json) -> Json {
    json!({ "__typename": "Parcel", "id": id, input: value })
}

#[tokio::test]
async fn an_external_field_is_fetched_from_its_owner_only() {
    let fed = start().await;
    let answer = fed.query("{ parcels { id weight(unit: LB) } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "parcels": [
            { "id": "x1", "weight": 4.4 }, { "id": "x2", "weight": 1.1 }, { "id": "x3", "weight": 22.0 },
        ] } })
    );
    assert_eq!(
        fed.counts(),
        [("warehouse", 1), ("shipping", 0), ("customs", 0)]
    );
}

#[tokio::test]
async fn a_requirement_with_an_argument_is_sent_in_the_representation() {
    let fed = start().await;
    let answer = fed.query("{ parcels { id postage } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "parcels": [
            { "id": "x1", "postage": 11 }, { "id": "x2", "postage": 5 }, { "id": "x3", "postage": 43 },
        ] } })
    );
    assert_eq!(
        fed.representations("shipping"),
        [
            rep("x1", "weight", json!(2.0)),
            rep("x2", "weight", json!(0.5)),
            rep("x3", "weight", json!(10.0))
        ]
    );
}

#[tokio::test]
async fn the_clients_own_argument_and_the_requirements_do_not_mix() {
    // The client asks pounds, the requirement kilograms; postage takes its own argument.
    let fed = start().await;
    let answer = fed
        .query("{ parcels { weight(unit: LB) postage(express: true) normal: postage } }")
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "parcels": [
            { "weight": 4.4, "postage": 22, "normal": 11 },
            { "weight": 1.1, "postage": 10, "normal": 5 },
            { "weight": 22.0, "postage": 86, "normal": 43 },
        ] } })
    );
    assert_eq!(
        fed.representations("shipping"),
        [
            rep("x1", "weight", json!(2.0)),
            rep("x2", "weight", json!(0.5)),
            rep("x3", "weight", json!(10.0))
        ]
    );
}

#[tokio::test]
async fn a_requirement_with_a_fragment_sends_each_concrete_types_fields() {
    let fed = start().await;
    let answer = fed.query("{ parcels { id insurance } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "parcels": [
            { "id": "x1", "insurance": 4 }, { "id": "x2", "insurance": 1 }, { "id": "x3", "insurance": 60 },
        ] } })
    );
    assert_eq!(
        fed.representations("shipping"),
        [
            rep(
                "x1",
                "contents",
                json!({ "__typename": "Goods", "label": "Tea", "value": 40 })
            ),
            rep(
                "x2",
                "contents",
                json!({ "__typename": "Papers", "label": "Deeds" })
            ),
            rep(
                "x3",
                "contents",
                json!({ "__typename": "Goods", "label": "Vase", "value": 300 })
            ),
        ]
    );
}

#[tokio::test]
async fn a_chain_of_requirements_runs_in_order() {
    // duty (customs) needs postage (shipping), which needs weight (warehouse).
    let fed = start().await;
    let answer = fed.query("{ parcels { id duty } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "parcels": [
            { "id": "x1", "duty": 33 }, { "id": "x2", "duty": 15 }, { "id": "x3", "duty": 129 },
        ] } })
    );
    assert_eq!(
        fed.representations("customs"),
        [
            rep("x1", "postage", json!(11)),
            rep("x2", "postage", json!(5)),
            rep("x3", "postage", json!(43))
        ]
    );
    assert_eq!(
        fed.counts(),
        [("warehouse", 1), ("shipping", 1), ("customs", 1)]
    );
}

#[tokio::test]
async fn a_circular_requirement_goes_back_to_the_subgraph_it_started_in() {
    // packing (warehouse) needs insurance (shipping), which needs contents (warehouse).
    let fed = start().await;
    let answer = fed.query("{ parcels { id packing } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "parcels": [
            { "id": "x1", "packing": "box" }, { "id": "x2", "packing": "box" }, { "id": "x3", "packing": "crate" },
        ] } })
    );
    let warehouse = fed.representations("warehouse");
    assert_eq!(
        warehouse,
        [
            rep("x1", "insurance", json!(4)),
            rep("x2", "insurance", json!(1)),
            rep("x3", "insurance", json!(60))
        ]
    );
    assert_eq!(
        fed.counts(),
        [("warehouse", 2), ("shipping", 1), ("customs", 0)]
    );
}

#[tokio::test]
async fn every_requirement_at_once() {
    let fed = start().await;
    let answer = fed
        .query(
            "{ parcels { id weight(unit: KG) postage duty insurance packing \
             contents { label ... on Papers { pages } } } }",
        )
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "parcels": [
            { "id": "x1", "weight": 2.0, "postage": 11, "duty": 33, "insurance": 4, "packing": "box",
              "contents": { "label": "Tea" } },
            { "id": "x2", "weight": 0.5, "postage": 5, "duty": 15, "insurance": 1, "packing": "box",
              "contents": { "label": "Deeds", "pages": 12 } },
            { "id": "x3", "weight": 10.0, "postage": 43, "duty": 129, "insurance": 60, "packing": "crate",
              "contents": { "label": "Vase" } },
        ] } })
    );
}
