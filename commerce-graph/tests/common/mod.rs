//! Test rig for the commerce graph, on the shared rig (`subgraph-rig`): the four
//! subgraphs on free 127.0.0.1 ports, in this process or as real `commerce-service`
//! processes stopped by PID, spoken to over real HTTP.
#![allow(dead_code, unused_imports)]

use std::path::PathBuf;

use commerce_graph::{executor, Scale, Subgraph};
use serde_json::{json, Value};
use subgraph_host::Options;

pub use subgraph_rig::{client, data, labelled_metric, post, Process, Service};

/// `subgraph` served in this process over a fresh data set at `scale`, with the host's
/// default options.
pub async fn start(subgraph: Subgraph, scale: Scale) -> Service {
    Service::start(subgraph_host::router_with(
        subgraph.name(),
        executor::executors(subgraph, scale),
        Options::default(),
    ))
    .await
}

/// The four subgraphs over the same data set, as a gateway would see them.
pub struct Graph {
    pub products: Service,
    pub inventory: Service,
    pub reviews: Service,
    pub accounts: Service,
    pub http: reqwest::Client,
}

impl Graph {
    pub async fn start(scale: Scale) -> Graph {
        Graph {
            products: start(Subgraph::Products, scale).await,
            inventory: start(Subgraph::Inventory, scale).await,
            reviews: start(Subgraph::Reviews, scale).await,
            accounts: start(Subgraph::Accounts, scale).await,
            http: client(),
        }
    }

    pub fn service(&self, subgraph: Subgraph) -> &Service {
        match subgraph {
            Subgraph::Products => &self.products,
            Subgraph::Inventory => &self.inventory,
            Subgraph::Reviews => &self.reviews,
            Subgraph::Accounts => &self.accounts,
        }
    }

    /// `data` of `query` on `subgraph`, failing on errors.
    pub async fn data(&self, subgraph: Subgraph, query: &str, variables: Value) -> Value {
        data(&self.http, &self.service(subgraph).url(), query, variables).await
    }

    /// The whole answer of `query` on `subgraph` (errors and all).
    pub async fn answer(&self, subgraph: Subgraph, query: &str, variables: Value) -> Value {
        let (status, body) =
            post(&self.http, &self.service(subgraph).url(), query, variables).await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// `_entities` of `representations` on `subgraph`, selecting `selection` (e.g.
    /// `... on Product { name }`).
    pub async fn entities(
        &self,
        subgraph: Subgraph,
        representations: Value,
        selection: &str,
    ) -> Vec<Value> {
        let query = format!(
            "query($r: [_Any!]!) {{ _entities(representations: $r) {{ __typename {selection} }} }}"
        );
        let d = self
            .data(subgraph, &query, json!({ "r": representations }))
            .await;
        d["_entities"].as_array().unwrap().clone()
    }
}

/// The built `commerce-service` binary.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_commerce-service"))
}

/// `commerce-service` with `args` as a process on a free port, stopped by PID.
pub fn process(args: &[&str]) -> Process {
    Process::start(&binary(), args)
}

/// Run `commerce-service` with arguments it should refuse: its exit code and standard
/// error.
pub fn refused(args: &[&str]) -> (Option<i32>, String) {
    subgraph_rig::refused(&binary(), args)
}

/// `{"__typename": typename, key: value}`.
pub fn rep(typename: &str, key: &str, value: &str) -> Value {
    json!({ "__typename": typename, key: value })
}

/// The strings at `key` of each object in `list`.
pub fn strings(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| v[key].as_str().unwrap().to_string())
        .collect()
}
