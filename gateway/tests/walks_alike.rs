//! Entity fetches that share walks (`gateway::plan::WalksAlike`), through real HTTP
//! over the commerce graph's four subgraphs: where products and reviews are asked for
//! the same objects in one parallel step, the second fetch takes the first one's walk
//! (its objects, their places and their representations), and the answer is what
//! each object's own query answers; with a cache whose hits add to the data first,
//! the second fetch walks on its own, and the answer is the same again. Where
//! accounts is asked for the authors of the wishlists' reviews in the step that asks
//! inventory for the wishlists' products, it walks on from inventory's objects: the
//! answer is again each object's own, and a failure of that fetch is reported at the
//! place of every author it was for.

mod common;

use commerce_graph::Subgraph as Part;
use common::cache;
use common::commerce::{spent, Shop};
use gateway::plan::{FetchKind, Planner};
use serde_json::{json, Value};
use subgraph_host::faults::{Fate, FaultPlan, Faults};

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

/// How many segments of the path of CHAIN's fetch of the wishlists' reviews' authors
/// lead to the objects it walks on from, those of inventory's fetch.
fn walks_on(planner: &Planner) -> usize {
    let plan = planner.compile_text(CHAIN, &Default::default()).unwrap();
    let authors = (0..plan.fetches.len() as u32)
        .find(|&id| match &plan.fetches[id as usize].kind {
            FetchKind::Entities(groups) => groups[0].paths[0].len() == 10,
            FetchKind::Root(_) => false,
        })
        .expect("a fetch at the wishlists' reviews' authors");
    let (from, len) = plan.walks_alike.on(authors).expect("it walks on");
    assert!(plan.walks_alike.keeps(from));
    let text = plan.fetches[from as usize].query.to_string();
    assert!(text.contains("shippingEstimate"), "inventory's: {text}");
    len
}

#[tokio::test]
async fn a_fetch_whose_path_goes_on_from_another_walks_on_from_its_objects_and_answers_alike() {
    let planner = Planner::from_sdl(&common::commerce::supergraph(), false).unwrap();
    assert_eq!(walks_on(&planner), 7);

    let shop = Shop::start(|_| {}).await;
    let data = shop.data(CHAIN, json!({})).await;
    // Every author's name, as their own query answers it.
    let compared = each_as_alone(&shop, &data).await;
    assert!(compared >= 12, "wishlists compared: {compared}");
}

/// The places of the wishlists' reviews' authors in a CHAIN answer (where a failed
/// fetch for them is reported: at the object it was for).
fn authors_of_wishlists(data: &Value) -> Vec<Value> {
    let mut places = Vec::new();
    for (p, product) in data["topProducts"].as_array().unwrap().iter().enumerate() {
        for (r, review) in product["reviews"].as_array().unwrap().iter().enumerate() {
            let wishlist = review["author"]["wishlist"].as_array().unwrap();
            for (w, item) in wishlist.iter().enumerate() {
                for (i, _) in item["reviews"].as_array().unwrap().iter().enumerate() {
                    places.push(json!([
                        "topProducts",
                        p,
                        "reviews",
                        r,
                        "author",
                        "wishlist",
                        w,
                        "reviews",
                        i,
                        "author"
                    ]));
                }
            }
        }
    }
    places
}

#[tokio::test]
async fn a_failed_fetch_that_walked_on_is_reported_at_each_place_it_was_for() {
    // Accounts answers its first request (the top reviews' authors, with their
    // wishlists) and fails its second (the wishlists' reviews' authors): a seed of
    // its injected errors that does so, found here rather than assumed.
    let fails_second = |seed| {
        let faults = Faults::new(FaultPlan {
            error_rate: 0.5,
            seed,
            ..FaultPlan::default()
        });
        let fate = |k| faults.fate(k, std::time::Duration::ZERO);
        matches!(fate(0), Fate::Answer(_)) && matches!(fate(1), Fate::Error(_))
    };
    let seed = (1..1000).find(|&s| fails_second(s)).expect("such a seed");
    let faults = |part| match part {
        Part::Accounts => FaultPlan {
            error_rate: 0.5,
            seed,
            ..FaultPlan::default()
        },
        _ => FaultPlan::default(),
    };
    // The places, from an answer without faults (the same data set).
    let places = authors_of_wishlists(&Shop::start(|_| {}).await.data(CHAIN, json!({})).await);
    assert!(places.len() >= 12, "authors: {}", places.len());

    let shop = Shop::start_faulty(faults, |_| {}).await;
    let answer = shop.answer(CHAIN, json!({}), &[]).await;
    assert_eq!(spent([0; 4], shop.requests().await)[3], 2, "{answer}");
    let mut reported: Vec<Value> = answer["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("errors in {answer}"))
        .iter()
        .map(|e| e["path"].clone())
        .collect();
    reported.sort_by_key(|p| p.to_string());
    let mut expected = places;
    expected.sort_by_key(|p| p.to_string());
    assert_eq!(reported, expected, "{answer}");
}
