//! Federation: `@interfaceObject` (graph `interface_object`, in
//! `tests/supergraphs/interface_object/`).
//!
//! Devices in three subgraphs. `devices` owns the entity interface
//! `Device @key(fields: "id")` and its types `Phone` and `Laptop`; `support` and
//! `telemetry` know only the interface, as an object type (`@interfaceObject`), and add
//! fields to every device whatever its type. `support` also returns devices itself
//! (`recalled`): it cannot say which type each is, so a concrete type's fields, or
//! `__typename`, must be asked of `devices` with the interface's name in the
//! representation. Each test asserts the whole answer and what each subgraph was sent.

mod common;

use async_graphql::dynamic::{Directive, Interface, Object};
use async_graphql::Value;
use common::federated::schema::{computed, field, ifield, lookup, Subgraph};
use serde_json::{json, Value as Json};

const GRAPH: &str = "interface_object";

fn devices_table() -> Json {
    json!([
        { "__typename": "Phone", "id": "d1", "model": "Pixel", "dialCode": "+33" },
        { "__typename": "Laptop", "id": "d2", "model": "ThinkPad", "ram": 32 },
        { "__typename": "Phone", "id": "d3", "model": "Fairphone", "dialCode": "+31" },
    ])
}

fn devices() -> Subgraph {
    let all = devices_table();
    let table = devices_table();
    let device = |name: &str, own: &str, ty: &str| {
        Object::new(name)
            .key("id")
            .implement("Device")
            .field(field("id", "ID!"))
            .field(field("model", "String!"))
            .field(field(own, ty))
    };
    Subgraph::new(
        "devices",
        Object::new("Query").field(computed("devices", "[Device!]!", move |_, _| {
            Ok(all.clone())
        })),
    )
    // `@key` as a plain directive: async-graphql would make an interface given
    // `.key()` a member of `_Entity`, and refuse it (a union's members are objects).
    .with(
        Interface::new("Device")
            .directive(Directive::new("key").argument("fields", Value::from("id")))
            .field(ifield("id", "ID!"))
            .field(ifield("model", "String!")),
    )
    .with(device("Phone", "dialCode", "String!"))
    .with(device("Laptop", "ram", "Int!"))
    // A representation names the interface (`Device`) or a concrete type: either
    // way the device of that id, as its concrete type.
    .entities(move |rep| {
        let found = table
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["id"] == rep["id"]);
        found.cloned().unwrap_or(Json::Null)
    })
}

fn support_table() -> Json {
    let t = |title: &str| json!({ "title": title });
    json!([
        { "__typename": "Device", "id": "d1", "warrantyYears": 2, "tickets": [t("Cracked screen")] },
        { "__typename": "Device", "id": "d2", "warrantyYears": 3, "tickets": [] },
        { "__typename": "Device", "id": "d3", "warrantyYears": 5, "tickets": [t("Battery"), t("Camera")] },
    ])
}

fn support() -> Subgraph {
    let recalled = {
        let s = support_table();
        json!([s[2], s[1]])
    };
    Subgraph::new(
        "support",
        Object::new("Query").field(computed("recalled", "[Device!]!", move |_, _| {
            Ok(recalled.clone())
        })),
    )
    .with(
        Object::new("Device")
            .key("id")
            .interface_object()
            .field(field("id", "ID!"))
            .field(field("warrantyYears", "Int!"))
            .field(field("tickets", "[Ticket!]!")),
    )
    .with(Object::new("Ticket").field(field("title", "String!")))
    .entities(lookup(support_table(), &["id"]))
}

fn telemetry() -> Subgraph {
    let seen = |id: &str, at: &str| json!({ "__typename": "Device", "id": id, "lastSeen": at });
    let table = json!([
        seen("d1", "2026-11-30"),
        seen("d2", "2026-12-01"),
        seen("d3", "2026-10-02")
    ]);
    Subgraph::new(
        "telemetry",
        Object::new("Query").field(computed("telemetryVersion", "Int!", |_, _| Ok(json!(2)))),
    )
    .with(
        Object::new("Device")
            .key("id")
            .interface_object()
            .field(field("id", "ID!"))
            .field(field("lastSeen", "String!")),
    )
    .entities(lookup(table, &["id"]))
}

crate::federated_graph!(GRAPH, [devices(), support(), telemetry()]);

fn device(id: &str) -> Json {
    json!({ "__typename": "Device", "id": id })
}

#[tokio::test]
async fn interface_objects_add_fields_to_every_implementation() {
    let fed = start().await;
    let answer = fed
        .query(
            "{ devices { __typename id model warrantyYears lastSeen \
             ... on Phone { dialCode } ... on Laptop { ram } } }",
        )
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "devices": [
            { "__typename": "Phone", "id": "d1", "model": "Pixel", "warrantyYears": 2,
              "lastSeen": "2026-11-30", "dialCode": "+33" },
            { "__typename": "Laptop", "id": "d2", "model": "ThinkPad", "warrantyYears": 3,
              "lastSeen": "2026-12-01", "ram": 32 },
            { "__typename": "Phone", "id": "d3", "model": "Fairphone", "warrantyYears": 5,
              "lastSeen": "2026-10-02", "dialCode": "+31" },
        ] } })
    );
    // The subgraphs that know only the interface are sent its name.
    let all = [device("d1"), device("d2"), device("d3")];
    assert_eq!(fed.representations("support"), all);
    assert_eq!(fed.representations("telemetry"), all);
    assert_eq!(
        fed.counts(),
        [("devices", 1), ("support", 1), ("telemetry", 1)]
    );
}

#[tokio::test]
async fn an_interface_objects_own_fields_need_no_concrete_type() {
    let fed = start().await;
    let answer = fed
        .query("{ recalled { id warrantyYears tickets { title } } }")
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "recalled": [
            { "id": "d3", "warrantyYears": 5, "tickets": [{ "title": "Battery" }, { "title": "Camera" }] },
            { "id": "d2", "warrantyYears": 3, "tickets": [] },
        ] } })
    );
    assert_eq!(
        fed.counts(),
        [("devices", 0), ("support", 1), ("telemetry", 0)]
    );
}

#[tokio::test]
async fn a_concrete_type_behind_an_interface_object_is_asked_of_the_interfaces_owner() {
    let fed = start().await;
    let answer = fed
        .query(
            "{ recalled { __typename id model ... on Laptop { ram } ... on Phone { dialCode } lastSeen } }",
        )
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "recalled": [
            { "__typename": "Phone", "id": "d3", "model": "Fairphone", "dialCode": "+31", "lastSeen": "2026-10-02" },
            { "__typename": "Laptop", "id": "d2", "model": "ThinkPad", "ram": 32, "lastSeen": "2026-12-01" },
        ] } })
    );
    assert_eq!(fed.representations("devices"), [device("d3"), device("d2")]);
}

#[tokio::test]
async fn typename_alone_behind_an_interface_object_is_the_concrete_type() {
    let fed = start().await;
    let answer = fed.query("{ recalled { __typename } }").await;
    assert_eq!(
        answer,
        json!({ "data": { "recalled": [{ "__typename": "Phone" }, { "__typename": "Laptop" }] } })
    );
    assert_eq!(
        fed.counts(),
        [("devices", 1), ("support", 1), ("telemetry", 0)]
    );
}
