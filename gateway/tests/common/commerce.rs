//! The commerce graph behind the gateway: its four subgraphs (products, inventory,
//! reviews, accounts) served in this process on free 127.0.0.1 ports over one small
//! data set, and a gateway over the committed supergraph
//! (`commerce-graph/supergraph/supergraph.graphql`, made by a standard composer)
//! with each subgraph's URL overridden, as `--subgraph-url NAME=URL` does.

use std::time::Duration;

use commerce_graph::{executor, Scale, Subgraph as Part};
use gateway::startup::GatewayConfig;
use gateway::supergraph::Subgraph;
use serde_json::{json, Value};
use subgraph_host::faults::{Delay, FaultPlan};

use super::{gateway_over_supergraph, metric, metrics_of, CacheCounters, Server};

/// The data set: small, so that every answer is cheap, with reviews that mention
/// products and users.
pub const SCALE: Scale = Scale {
    products: 40,
    users: 12,
    reviews_per_product: 3,
    seed: 1,
};

/// The committed supergraph's text.
pub fn supergraph() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../commerce-graph/supergraph/supergraph.graphql");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The four subgraphs and a gateway over them.
pub struct Shop {
    /// In [`Part::ALL`]'s order: products, inventory, reviews, accounts.
    pub parts: Vec<Server>,
    pub gateway: Server,
    pub http: reqwest::Client,
}

impl Shop {
    /// Subgraphs that answer at once, and a gateway configured by `tweak`.
    pub async fn start(tweak: impl FnOnce(&mut GatewayConfig)) -> Shop {
        Shop::start_delayed(Duration::ZERO, tweak).await
    }

    /// Every subgraph holding each answer `delay` (their `--delay-ms`), so that
    /// concurrent client requests overlap upstream.
    pub async fn start_delayed(delay: Duration, tweak: impl FnOnce(&mut GatewayConfig)) -> Shop {
        let faults = |_| FaultPlan {
            delay: Delay::Fixed(delay),
            ..FaultPlan::default()
        };
        Shop::start_faulty(faults, tweak).await
    }

    /// Each subgraph injecting what `faults` gives for it.
    pub async fn start_faulty(
        faults: impl Fn(Part) -> FaultPlan,
        tweak: impl FnOnce(&mut GatewayConfig),
    ) -> Shop {
        let mut parts = Vec::new();
        for part in Part::ALL {
            let options = subgraph_host::Options {
                faults: faults(part),
                ..subgraph_host::Options::default()
            };
            let router =
                subgraph_host::router_with(part.name(), executor::executors(part, SCALE), options);
            parts.push(Server::start(router).await);
        }
        let urls: Vec<Subgraph> = Part::ALL
            .iter()
            .zip(&parts)
            .map(|(part, server)| Subgraph {
                name: part.name().into(),
                url: server.url(),
            })
            .collect();
        let gateway = gateway_over_supergraph(supergraph(), urls, tweak).await;
        Shop {
            parts,
            gateway,
            http: reqwest::Client::new(),
        }
    }

    /// The whole answer of `query` with `variables`, sent with `headers`.
    pub async fn answer(&self, query: &str, variables: Value, headers: &[(&str, &str)]) -> Value {
        let mut req = self
            .http
            .post(self.gateway.url())
            .json(&json!({ "query": query, "variables": variables }));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let r = req.send().await.expect("the gateway answers");
        assert_eq!(r.status(), 200);
        r.json().await.unwrap()
    }

    /// `data` of `query`, failing on errors.
    pub async fn data(&self, query: &str, variables: Value) -> Value {
        self.data_as(query, variables, &[]).await
    }

    /// `data` of `query` sent with `headers`, failing on errors.
    pub async fn data_as(&self, query: &str, variables: Value, headers: &[(&str, &str)]) -> Value {
        let answer = self.answer(query, variables, headers).await;
        assert!(answer.get("errors").is_none(), "{query} -> {answer}");
        answer["data"].clone()
    }

    /// `data` of `query` asked of subgraph `part` directly (not through the gateway).
    pub async fn direct(&self, part: Part, query: &str) -> Value {
        let url = self.parts[part as usize].url();
        let r = self
            .http
            .post(url)
            .json(&json!({ "query": query }))
            .send()
            .await
            .expect("the subgraph answers");
        let answer: Value = r.json().await.unwrap();
        assert!(answer.get("errors").is_none(), "{query} -> {answer}");
        answer["data"].clone()
    }

    /// `subgraph_requests_total` of each subgraph, in [`Part::ALL`]'s order.
    pub async fn requests(&self) -> [u64; 4] {
        let mut out = [0; 4];
        for (i, server) in self.parts.iter().enumerate() {
            let text = metrics_of(&self.http, server.addr).await;
            out[i] = metric(&text, "subgraph_requests_total")
                .unwrap_or_else(|| panic!("subgraph_requests_total missing from:\n{text}"))
                as u64;
        }
        out
    }

    /// The gateway's cache counters.
    pub async fn counters(&self) -> CacheCounters {
        CacheCounters(metrics_of(&self.http, self.gateway.addr).await)
    }

    // What the subgraphs themselves say, asked directly.

    /// Product `index`'s price and weight, from products.
    pub async fn price_and_weight(&self, index: u32) -> (i64, i64) {
        let q = format!(
            r#"{{ product(upc: "{}") {{ price weight }} }}"#,
            SCALE.upc(index)
        );
        let d = self.direct(Part::Products, &q).await;
        let int = |k: &str| d["product"][k].as_i64().unwrap();
        (int("price"), int("weight"))
    }

    /// User `id`'s name and the UPCs of their wishlist, from accounts.
    pub async fn user(&self, id: &str) -> (String, Vec<String>) {
        let q = format!(r#"{{ user(id: "{id}") {{ name wishlist {{ upc }} }} }}"#);
        let d = self.direct(Part::Accounts, &q).await;
        let upcs = d["user"]["wishlist"].as_array().unwrap();
        (
            d["user"]["name"].as_str().unwrap().into(),
            upcs.iter()
                .map(|p| p["upc"].as_str().unwrap().into())
                .collect(),
        )
    }

    /// The first review of the data set that `wanted` accepts, as reviews has it: its
    /// `id`, `author { id }`, `product { upc }` and `mentions` (by `__typename` and
    /// key).
    pub async fn review_where(&self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let all = SCALE.products * SCALE.reviews_per_product;
        let q = format!(
            "{{ latestReviews(first: {all}) {{ id author {{ id }} product {{ upc }} mentions {{ __typename ... on Product {{ upc }} ... on User {{ id }} }} }} }}"
        );
        let d = self.direct(Part::Reviews, &q).await;
        let reviews = d["latestReviews"].as_array().unwrap();
        let found = reviews.iter().find(|r| wanted(r));
        found
            .unwrap_or_else(|| panic!("no review of the data set {what}: {d}"))
            .clone()
    }
}

/// The keys (`key`) of the mentions of type `ty` in `review`, in order.
pub fn mentioned(review: &Value, ty: &str, key: &str) -> Vec<String> {
    let mentions = review["mentions"].as_array().unwrap().iter();
    let of_type = mentions.filter(|m| m["__typename"] == ty);
    of_type.map(|m| m[key].as_str().unwrap().into()).collect()
}

/// The subgraph requests between `before` and `after`, per subgraph.
pub fn spent(before: [u64; 4], after: [u64; 4]) -> [u64; 4] {
    std::array::from_fn(|i| after[i] - before[i])
}
