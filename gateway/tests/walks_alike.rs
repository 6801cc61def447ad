//! Entity fetches that walk alike (`gateway::plan::WalksAlike`), through real HTTP
//! over the commerce graph's four subgraphs: where products and reviews are asked for
//! the same objects in one parallel step, the second fetch takes the first one's walk
//! (its objects, their places and their representations), and the answer is what
//! each object's own query answers; with a cache whose hits add to the data first,
//! the second fetch walks on its own, and the answer is the same again.

mod common;

use common::cache;
use common::commerce::{spent, Shop};
use gateway::plan::{FetchKind, Planner};
use serde_json::{json, Value};

/// Wishlists' products, asked of products (name, price, and weight for the estimate)
/// and of reviews (their reviews) at the same path, both by `{__typename upc}`; then
/// of inventory (the estimate) by `{__typename upc price weight}`, which walks alike
/// with neither.
const CHAIN: &str = "{ topProducts(first: 4) { upc reviews(first: 2) { author { id wishlist(first: 3) { upc name price shippingEstimate reviews(first: 2) { body rating author { name } } } } } } }";

/// The same, without the wishlists' reviews: what a cache may then hold.
const NAMES: &str = "{ topProducts(first: 4) { upc reviews(first: 2) { author { id wishlist(first: 3) { upc name price shippingEstimate } } } } }";

/// One product, with what CHAIN asks of each wishlist's.
const ONE: &str = "query($upc: ID!) { product(upc: $upc) { upc name price shippingEstimate reviews(first: 2) { body rating author { name } } } }";

/// Every wishlist's product in a CHAIN answer.
fn wishlists(data: &Value) -> Vec<Value> {
    let mut items = Vec::new();
    for product in data["topProducts"].as_array().expect("topProducts") {
        for review in product["reviews"].as_array().expect("reviews") {
            items.extend(
                review["author"]["wishlist"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
            );
        }
    }
    items
}

/// Each of `data`'s wishlist products is what its own query answers; how many there
/// were.
async fn each_as_alone(shop: &Shop, data: &Value) -> usize {
    let items = wishlists(data);
    for item in &items {
        let alone = shop.data(ONE, json!({ "upc": item["upc"] })).await;
        assert_eq!(item, &alone["product"], "in {data}");
    }
    items.len()
}

#[tokio::test]
async fn a_fetch_that_walks_like_another_takes_its_walk_and_answers_alike() {
    let planner = Planner::from_sdl(&common::commerce::supergraph(), false).unwrap();
    let plan = planner.compile_text(CHAIN, &Default::default()).unwrap();
    let pairs: Vec<(u32, u32)> = (0..plan.fetches.len() as u32)
        .filter_map(|id| plan.walks_alike.like(id).map(|like| (like, id)))
        .collect();
    assert_eq!(pairs.len(), 1, "one pair walks alike: {pairs:?}");
    let (a, b) = pairs[0];
    assert!(plan.walks_alike.lends(a));
    for id in [a, b] {
        assert!(matches!(
            plan.fetches[id as usize].kind,
            FetchKind::Entities(_)
        ));
    }
    let texts = [a, b].map(|id| plan.fetches[id as usize].query.to_string());
    assert!(
        texts.iter().any(|t| t.contains("price weight name"))
            && texts.iter().any(|t| t.contains("reviews(first: 2)")),
        "products and reviews at the wishlists: {texts:?}"
    );

    let shop = Shop::start(|_| {}).await;
    let data = shop.data(CHAIN, json!({})).await;
    let compared = each_as_alone(&shop, &data).await;
    assert!(compared >= 12, "wishlists compared: {compared}");
}

#[tokio::test]
async fn after_cache_hits_add_to_the_data_the_fetch_walks_on_its_own_and_answers_alike() {
    let shop = Shop::start(|c| c.cache = cache(10.0)).await;
    shop.data(NAMES, json!({})).await;
    let before = shop.requests().await;
    let data = shop.data(CHAIN, json!({})).await;
    // Everything but the wishlists' reviews and their authors' names was a hit (the
    // products' names and prices among them, merged before the reviews' fetch walked).
    assert_eq!(spent(before, shop.requests().await), [0, 0, 1, 1]);
    let compared = each_as_alone(&shop, &data).await;
    assert!(compared >= 12, "wishlists compared: {compared}");
}
