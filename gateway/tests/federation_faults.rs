//! Federation: never a silently wrong answer (graph `faults`, in
//! `tests/supergraphs/faults/`).
//!
//! Two subgraphs: `products` owns products and the interface `Item`, which the hidden
//! type `Draft` (`@inaccessible`) also implements; `reviews` adds each product's
//! `score`, `rank` and `stars`. The subgraphs here misbehave on purpose, through
//! answers rewritten after async-graphql wrote them, or by being down: a field left
//! out, a value of the wrong kind, an `_entities` list one short, an object of a type
//! the public schema hides, an error for one entity. Each time the gateway must answer
//! with a GraphQL error at the path of what it could not answer, never with data that
//! looks right and is not. (A hidden enum value is in `federation_directives.rs`.)

mod common;

use async_graphql::dynamic::{Interface, Object};
use common::federated::schema::{arg, computed, field, ifield, lookup, Subgraph};
use common::federated::Federation;
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const GRAPH: &str = "faults";

fn products() -> Subgraph {
    let all = json!([
        { "__typename": "Product", "id": "p1", "title": "Kettle" },
        { "__typename": "Product", "id": "p2", "title": "Lamp" },
    ]);
    let (list, items) = (all.clone(), all.clone());
    Subgraph::new(
        "products",
        Object::new("Query")
            .field(computed("products", "[Product!]!", move |_, _| {
                Ok(list.clone())
            }))
            .field(
                // Drafts are hidden from the public schema, but this subgraph returns one.
                computed("search", "[Item]!", move |_, _| {
                    let draft = json!({ "__typename": "Draft", "id": "d1", "title": "Unreleased" });
                    Ok(json!([items[0], draft]))
                })
                .argument(arg("term", "String!")),
            ),
    )
    .with(
        Interface::new("Item")
            .field(ifield("id", "ID!"))
            .field(ifield("title", "String!")),
    )
    .with(
        Object::new("Product")
            .key("id")
            .implement("Item")
            .field(field("id", "ID!"))
            .field(field("title", "String!")),
    )
    .with(
        Object::new("Draft")
            .inaccessible()
            .implement("Item")
            .field(field("id", "ID!"))
            .field(field("title", "String!")),
    )
    .entities(lookup(all, &["id"]))
}

/// `reviews`, its answers rewritten by `tamper`.
fn reviews(tamper: impl Fn(&str, &mut Json) + Send + Sync + 'static) -> Subgraph {
    let table = json!([
        { "__typename": "Product", "id": "p1", "score": 9, "rank": 1, "stars": [5, 4] },
        { "__typename": "Product", "id": "p2", "score": 7, "rank": 2, "stars": [3] },
    ]);
    Subgraph::new(
        "reviews",
        Object::new("Query").field(computed("reviewsVersion", "Int!", |_, _| Ok(json!(1)))),
    )
    .with(
        Object::new("Product")
            .key("id")
            .field(field("id", "ID!"))
            .field(field("score", "Int"))
            .field(field("rank", "Int!"))
            .field(field("stars", "[Int!]!"))
            .field(computed("verdict", "String", |p, _| {
                match p["id"].as_str() {
                    Some("p2") => Err("the verdict service is down for p2".into()),
                    _ => Ok(json!("buy")),
                }
            })),
    )
    .entities(lookup(table, &["id"]))
    .tamper(tamper)
}

fn subgraphs_with(tamper: impl Fn(&str, &mut Json) + Send + Sync + 'static) -> Vec<Subgraph> {
    vec![products(), reviews(tamper)]
}

/// The second entity of an `_entities` answer, to rewrite.
fn second_entity(answer: &mut Json) -> Option<&mut Json> {
    answer.pointer_mut("/data/_entities/1")
}

/// `{ products { id FIELD } }`'s data when p1's value is `p1` and p2's is null.
fn p2_null(field: &str, p1: i64) -> Json {
    json!({ "products": [{ "id": "p1", field: p1 }, { "id": "p2", field: null }] })
}

/// The answer to `{ products { id FIELD } }` with `data`, when p2's `field` failed with
/// `message`.
fn failed_at_p2(data: Json, field: &str, message: &str) -> Json {
    json!({
        "data": data,
        "errors": [{
            "message": message,
            "locations": [{ "line": 1, "column": 17 }],
            "path": ["products", 1, field],
        }],
    })
}

async fn start_with(tamper: impl Fn(&str, &mut Json) + Send + Sync + 'static) -> Federation {
    Federation::start(GRAPH, subgraphs_with(tamper)).await
}

#[tokio::test]
async fn committed_sdl_files_are_what_the_subgraphs_serve() {
    Federation::check(GRAPH, subgraphs_with(|_, _| {})).await;
}

#[tokio::test]
async fn an_entitys_error_is_reported_below_the_object_it_was_fetched_for() {
    // async-graphql's dynamic schema leaves the field out of the entity and gives the
    // error no path; a subgraph that does it right answers as rewritten here.
    let fed = start_with(|_, answer| {
        if let Some(Json::Object(p2)) = second_entity(answer) {
            p2.insert("verdict".into(), Json::Null);
            answer["errors"][0]["path"] = json!(["_entities", 1, "verdict"]);
        }
    })
    .await;
    let answer = fed
        .query("{ products { id score rank stars verdict } }")
        .await;
    assert_eq!(
        answer,
        json!({
            "data": { "products": [
                { "id": "p1", "score": 9, "rank": 1, "stars": [5, 4], "verdict": "buy" },
                { "id": "p2", "score": 7, "rank": 2, "stars": [3], "verdict": null },
            ] },
            "errors": [{
                "message": "the verdict service is down for p2",
                "path": ["products", 1, "verdict"],
            }],
        })
    );
}

#[tokio::test]
async fn an_entity_fetchs_error_without_a_path_is_reported_at_every_object_it_was_for() {
    let fed = start_with(|_, _| {}).await;
    let answer = fed.query("{ products { id verdict } }").await;
    let error = |i: usize| json!({ "message": "the verdict service is down for p2", "path": ["products", i] });
    assert_eq!(
        answer,
        json!({
            "data": { "products": [{ "id": "p1", "verdict": "buy" }, { "id": "p2", "verdict": null }] },
            "errors": [error(0), error(1)],
        })
    );
}

#[tokio::test]
async fn a_field_a_subgraph_leaves_out_is_an_error_at_its_path() {
    let fed = start_with(|_, answer| {
        if let Some(Json::Object(p2)) = second_entity(answer) {
            p2.remove("score");
            p2.remove("rank");
        }
    })
    .await;
    let answer = fed.query("{ products { id score } }").await;
    assert_eq!(
        answer,
        failed_at_p2(
            p2_null("score", 9),
            "score",
            "Product.score could not be resolved: no subgraph answer holds it"
        )
    );
    // A non-null one nulls its parent, up to the nearest nullable place (here all of
    // `data`), with that one error.
    let answer = fed.query("{ products { id rank } }").await;
    assert_eq!(
        answer,
        failed_at_p2(
            Json::Null,
            "rank",
            "Product.rank could not be resolved: no subgraph answer holds it"
        )
    );
}

#[tokio::test]
async fn a_value_of_the_wrong_kind_is_an_error_not_passed_on() {
    let fed = start_with(|_, answer| {
        if let Some(p2) = second_entity(answer) {
            if p2.get("score").is_some() {
                p2["score"] = json!("high");
            }
            if p2.get("stars").is_some() {
                p2["stars"] = json!(3);
            }
        }
    })
    .await;
    let answer = fed.query("{ products { id score } }").await;
    assert_eq!(
        answer,
        failed_at_p2(
            p2_null("score", 9),
            "score",
            "a subgraph returned something other than an Int (a 32-bit integer) for Product.score"
        )
    );
    let answer = fed.query("{ products { id stars } }").await;
    assert_eq!(
        answer,
        failed_at_p2(
            Json::Null,
            "stars",
            "a subgraph returned something other than a list for Product.stars"
        )
    );
}

#[tokio::test]
async fn an_entities_answer_one_short_is_an_error_for_the_missing_one() {
    let fed = start_with(|_, answer| {
        if let Some(Json::Array(entities)) = answer.pointer_mut("/data/_entities") {
            entities.pop();
        }
    })
    .await;
    let answer = fed.query("{ products { id score } }").await;
    assert_eq!(
        answer,
        failed_at_p2(
            p2_null("score", 9),
            "score",
            "Product.score could not be resolved: no subgraph answer holds it"
        )
    );
}

#[tokio::test]
async fn an_object_of_a_hidden_type_is_an_error_not_an_answer() {
    let fed = start_with(|_, _| {}).await;
    let answer = fed
        .query("{ search(term: \"\") { __typename id title } }")
        .await;
    assert_eq!(
        answer,
        json!({
            "data": { "search": [{ "__typename": "Product", "id": "p1", "title": "Kettle" }, null] },
            "errors": [{
                "message": "a subgraph returned an object of type Draft, which the schema does not expose",
                "path": ["search", 1],
            }],
        })
    );
}

#[tokio::test]
async fn a_subgraph_down_for_an_entity_fetch_is_an_error_at_each_entity() {
    let mut fed = start_with(|_, _| {}).await;
    let addr = fed.subgraph_addr("reviews");
    fed.stop("reviews").await;
    let answer = fed.query("{ products { id title score } }").await;
    let error = |i: usize| {
        json!({
            "message": format!("subgraph reviews is unavailable: connect {addr}: Connection refused (os error 111)"),
            "locations": [{ "line": 1, "column": 23 }],
            "path": ["products", i, "score"],
        })
    };
    assert_eq!(
        answer,
        json!({
            "data": { "products": [
                { "id": "p1", "title": "Kettle", "score": null },
                { "id": "p2", "title": "Lamp", "score": null },
            ] },
            "errors": [error(0), error(1)],
        })
    );
    assert_eq!(fed.requests("products"), 1);
}

#[tokio::test]
async fn answers_laid_out_otherwise_than_the_last_are_still_read_by_their_keys() {
    // The response writer reads each field first where it found it in the answer
    // before (the plan keeps that place). Here every other products answer, and
    // within one answer every other product, has one member more in front of the
    // rest, so those places are wrong half of the time.
    let answers = Arc::new(AtomicUsize::new(0));
    let shifted = products().tamper(move |_, answer| {
        let n = answers.fetch_add(1, Ordering::Relaxed);
        if let Some(Json::Array(list)) = answer.pointer_mut("/data/products") {
            for (i, product) in list.iter_mut().enumerate() {
                if let (Json::Object(product), 1) = (product, (n + i) % 2) {
                    // Sorted keys: after `__typename`, before `id`.
                    product.insert("_extra".into(), json!(n));
                }
            }
        }
    });
    let fed = Federation::start(GRAPH, vec![shifted, reviews(|_, _| {})]).await;
    let expected = json!({ "data": { "products": [
        { "title": "Kettle", "id": "p1", "score": 9 },
        { "title": "Lamp", "id": "p2", "score": 7 },
    ] } });
    for _ in 0..4 {
        assert_eq!(fed.query("{ products { title id score } }").await, expected);
    }
    assert_eq!(fed.requests("products"), 4);
}

#[tokio::test]
async fn entity_answers_laid_out_otherwise_than_the_last_are_still_read_by_their_keys() {
    // A hint names the answer of a product's view that held the field (here the
    // second, `reviews`' entity answer) and its place there. Every other `reviews`
    // answer, and within one answer every other product, has one member more in
    // front of the rest, so the places are wrong half of the time: for the scalar
    // `score` and for the list `stars`, which is that answer's alone.
    let answers = Arc::new(AtomicUsize::new(0));
    let fed = start_with(move |_, answer| {
        let n = answers.fetch_add(1, Ordering::Relaxed);
        if let Some(Json::Array(list)) = answer.pointer_mut("/data/_entities") {
            for (i, product) in list.iter_mut().enumerate() {
                if let (Json::Object(product), 1) = (product, (n + i) % 2) {
                    product.insert("_extra".into(), json!(n));
                }
            }
        }
    })
    .await;
    let expected = json!({ "data": { "products": [
        { "id": "p1", "score": 9, "title": "Kettle", "stars": [5, 4] },
        { "id": "p2", "score": 7, "title": "Lamp", "stars": [3] },
    ] } });
    for _ in 0..4 {
        assert_eq!(
            fed.query("{ products { id score title stars } }").await,
            expected
        );
    }
    assert_eq!(fed.requests("reviews"), 4);
}

#[tokio::test]
async fn a_key_a_subgraph_was_not_asked_for_is_never_read() {
    // `products` was asked for each product's `id`, and answers `score` and `stars`
    // too, with other values; the plan says `reviews` answers those two. Its answer
    // comes first in each product's view, so a gateway that looked for every key in
    // every answer would take its `score`, and merge its `stars` into the list
    // `reviews` gave: data that looks right and is not.
    let talkative = products().tamper(|_, answer| {
        if let Some(Json::Array(list)) = answer.pointer_mut("/data/products") {
            for product in list.iter_mut() {
                if let Json::Object(product) = product {
                    product.insert("score".into(), json!(0));
                    product.insert("stars".into(), json!([0, 0, 0]));
                }
            }
        }
    });
    let fed = Federation::start(GRAPH, vec![talkative, reviews(|_, _| {})]).await;
    let expected = json!({ "data": { "products": [
        { "id": "p1", "score": 9, "stars": [5, 4] },
        { "id": "p2", "score": 7, "stars": [3] },
    ] } });
    // Twice: the second request reads where the first found each field.
    for _ in 0..2 {
        assert_eq!(fed.query("{ products { id score stars } }").await, expected);
    }
}
