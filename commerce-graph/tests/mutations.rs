//! Writes through real HTTP: each subgraph's mutations change what later reads see
//! (a price, a stock level, a new review in every list it joins, a name, a wishlist),
//! bad arguments are GraphQL errors with a path that change nothing, and each answer's
//! `Cache-Control` is what the schema's hints say.

mod common;

use commerce_graph::{Scale, Subgraph};
use common::{rep, strings, Graph};
use serde_json::{json, Value};

/// The first error's message and path of `answer`, which must have no data change.
fn error(answer: &Value) -> (String, Value) {
    let e = &answer["errors"][0];
    (
        e["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no error in {answer}"))
            .to_string(),
        e["path"].clone(),
    )
}

#[tokio::test]
async fn update_price_changes_the_price_read_after_it() {
    let graph = Graph::start(Scale::DEFAULT).await;
    let upc = Scale::DEFAULT.upc(2);
    const SET: &str =
        "mutation($u: ID!, $p: Int!) { updatePrice(upc: $u, price: $p) { upc price } }";
    let d = graph
        .data(Subgraph::Products, SET, json!({ "u": upc, "p": 1234 }))
        .await;
    assert_eq!(d["updatePrice"], json!({ "upc": upc, "price": 1234 }));
    let d = graph
        .data(
            Subgraph::Products,
            "{ topProducts(first: 3) { price } }",
            Value::Null,
        )
        .await;
    assert_eq!(d["topProducts"][2]["price"], 1234);
    for (variables, wanted) in [
        (json!({ "u": upc, "p": -1 }), "price -1"),
        (
            json!({ "u": "000000000000", "p": 5 }),
            "no product with upc",
        ),
    ] {
        let (message, path) = error(&graph.answer(Subgraph::Products, SET, variables).await);
        assert!(message.contains(wanted), "{message}");
        assert_eq!(path, json!(["updatePrice"]));
    }
    let d = graph
        .data(
            Subgraph::Products,
            "{ topProducts(first: 3) { price } }",
            Value::Null,
        )
        .await;
    assert_eq!(d["topProducts"][2]["price"], 1234);
}

#[tokio::test]
async fn restock_fills_an_empty_shelf() {
    let graph = Graph::start(Scale::DEFAULT).await;
    let d = graph
        .data(
            Subgraph::Inventory,
            "{ outOfStock(first: 3) { upc quantity inStock } }",
            Value::Null,
        )
        .await;
    let empty = strings(&d["outOfStock"], "upc");
    assert_eq!(empty.len(), 3);
    assert_eq!(d["outOfStock"][0]["inStock"], false);
    const RESTOCK: &str =
        "mutation($u: ID!, $q: Int!) { restock(upc: $u, quantity: $q) { upc quantity inStock } }";
    let d = graph
        .data(
            Subgraph::Inventory,
            RESTOCK,
            json!({ "u": empty[0], "q": 12 }),
        )
        .await;
    assert_eq!(
        d["restock"],
        json!({ "upc": empty[0], "quantity": 12, "inStock": true })
    );
    let d = graph
        .data(
            Subgraph::Inventory,
            RESTOCK,
            json!({ "u": empty[0], "q": 3 }),
        )
        .await;
    assert_eq!(d["restock"]["quantity"], 15);
    let d = graph
        .data(
            Subgraph::Inventory,
            "{ outOfStock(first: 3) { upc } }",
            Value::Null,
        )
        .await;
    assert!(!strings(&d["outOfStock"], "upc").contains(&empty[0]));
    let (message, path) = error(
        &graph
            .answer(
                Subgraph::Inventory,
                RESTOCK,
                json!({ "u": empty[1], "q": 0 }),
            )
            .await,
    );
    assert!(message.contains("quantity 0"), "{message}");
    assert_eq!(path, json!(["restock"]));
}

#[tokio::test]
async fn a_new_review_joins_every_list() {
    let graph = Graph::start(Scale::DEFAULT).await;
    let upc = Scale::DEFAULT.upc(9);
    const ADD: &str = "mutation($u: ID!, $a: ID!, $r: Int!, $b: String!) { addReview(upc: $u, authorId: $a, rating: $r, body: $b) { id rating body author { id username } product { upc } } }";
    let d = graph
        .data(
            Subgraph::Reviews,
            ADD,
            json!({ "u": upc, "a": "u77", "r": 2, "b": "Broke in a week." }),
        )
        .await;
    let review = &d["addReview"];
    assert_eq!(review["id"], "r5001");
    assert_eq!(review["author"]["username"], Scale::DEFAULT.username(76));
    let d = graph
        .entities(
            Subgraph::Reviews,
            json!([rep("Product", "upc", &upc), rep("User", "id", "u77")]),
            "... on Product { reviewCount reviews { id } } ... on User { reviews { id } }",
        )
        .await;
    assert_eq!(d[0]["reviewCount"], 6);
    assert_eq!(strings(&d[0]["reviews"], "id").last().unwrap(), "r5001");
    assert_eq!(strings(&d[1]["reviews"], "id").last().unwrap(), "r5001");
    let d = graph
        .data(
            Subgraph::Reviews,
            "{ latestReviews(first: 2) { id } review(id: \"r5001\") { body } }",
            Value::Null,
        )
        .await;
    assert_eq!(strings(&d["latestReviews"], "id"), ["r5001", "r5000"]);
    assert_eq!(d["review"]["body"], "Broke in a week.");
    for (variables, wanted) in [
        (
            json!({ "u": upc, "a": "u77", "r": 6, "b": "x" }),
            "rating 6",
        ),
        (
            json!({ "u": upc, "a": "u501", "r": 3, "b": "x" }),
            "no user with id",
        ),
        (
            json!({ "u": "1", "a": "u7", "r": 3, "b": "x" }),
            "no product with upc",
        ),
        (
            json!({ "u": upc, "a": "u7", "r": 3, "b": "  " }),
            "not blank",
        ),
    ] {
        let (message, path) = error(&graph.answer(Subgraph::Reviews, ADD, variables).await);
        assert!(message.contains(wanted), "{message}");
        assert_eq!(path, json!(["addReview"]));
    }
    let d = graph
        .data(
            Subgraph::Reviews,
            "{ latestReviews(first: 1) { id } }",
            Value::Null,
        )
        .await;
    assert_eq!(d["latestReviews"][0]["id"], "r5001");
}

#[tokio::test]
async fn names_and_wishlists_change_by_mutation() {
    let graph = Graph::start(Scale::DEFAULT).await;
    let d = graph
        .data(
            Subgraph::Accounts,
            "mutation { updateName(id: \"u3\", name: \"Ada Quist\") { name username } }",
            Value::Null,
        )
        .await;
    assert_eq!(d["updateName"]["name"], "Ada Quist");
    assert_eq!(d["updateName"]["username"], Scale::DEFAULT.username(2));
    let before = Scale::DEFAULT.wishlist(2).len();
    let upc = Scale::DEFAULT.upc(999);
    const ADD: &str =
        "mutation($u: ID!) { addToWishlist(userId: \"u3\", upc: $u) { wishlist { upc } } }";
    let d = graph
        .data(Subgraph::Accounts, ADD, json!({ "u": upc }))
        .await;
    let list = strings(&d["addToWishlist"]["wishlist"], "upc");
    let grown = if Scale::DEFAULT.wishlist(2).contains(&999) {
        before
    } else {
        before + 1
    };
    assert_eq!((list.len(), list.last().unwrap()), (grown, &upc));
    // Adding it again changes nothing.
    let d = graph
        .data(Subgraph::Accounts, ADD, json!({ "u": upc }))
        .await;
    assert_eq!(strings(&d["addToWishlist"]["wishlist"], "upc"), list);
    let d = graph
        .data(
            Subgraph::Accounts,
            "{ user(id: \"u3\") { name wishlist { upc } } }",
            Value::Null,
        )
        .await;
    assert_eq!(d["user"]["name"], "Ada Quist");
    assert_eq!(strings(&d["user"]["wishlist"], "upc"), list);
    let (message, path) = error(
        &graph
            .answer(Subgraph::Accounts, ADD, json!({ "u": "000000000000" }))
            .await,
    );
    assert!(message.contains("no product with upc"), "{message}");
    assert_eq!(path, json!(["addToWishlist"]));
    let (message, _) = error(
        &graph
            .answer(
                Subgraph::Accounts,
                "mutation { updateName(id: \"u3\", name: \"\") { name } }",
                Value::Null,
            )
            .await,
    );
    assert!(message.contains("not blank"), "{message}");
    // A negative count is an error on the field, not an empty list.
    let (message, path) = error(
        &graph
            .answer(
                Subgraph::Accounts,
                "{ users(first: -1) { id } }",
                Value::Null,
            )
            .await,
    );
    assert!(message.contains("first"), "{message}");
    assert_eq!(path, json!(["users"]));
}

#[tokio::test]
async fn answers_carry_the_schemas_cache_hints() {
    let graph = Graph::start(Scale::DEFAULT).await;
    let cases = [
        (
            Subgraph::Products,
            "{ topProducts { name } }",
            Some("max-age=60"),
        ),
        (
            Subgraph::Products,
            "{ topProducts { name price } }",
            Some("max-age=10"),
        ),
        (
            Subgraph::Inventory,
            "{ outOfStock { quantity } }",
            Some("max-age=5"),
        ),
        (
            Subgraph::Reviews,
            "{ review(id: \"r1\") { body } }",
            Some("max-age=60"),
        ),
        (
            Subgraph::Reviews,
            "{ latestReviews { body } }",
            Some("max-age=10"),
        ),
        (
            Subgraph::Accounts,
            "{ user(id: \"u1\") { name } }",
            Some("max-age=30"),
        ),
        (Subgraph::Accounts, "{ me { name } }", Some("private")),
        (
            Subgraph::Accounts,
            "mutation { updateName(id: \"u1\", name: \"A\") { id } }",
            Some("no-cache"),
        ),
    ];
    for (subgraph, query, wanted) in cases {
        let r = graph
            .http
            .post(graph.service(subgraph).url())
            .json(&json!({ "query": query }))
            .send()
            .await
            .unwrap();
        let header = r
            .headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap().to_string());
        match wanted {
            Some(w) => assert!(
                header.as_deref().is_some_and(|h| h.contains(w)),
                "{query}: {header:?}, wanted {w}"
            ),
            None => assert_eq!(header, None, "{query}"),
        }
    }
}
