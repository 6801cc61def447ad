//! Rig of the federation tests: subgraphs built in the test with async-graphql's
//! `dynamic` schemas over JSON data, each served on a free 127.0.0.1 port (axum), and a
//! gateway in this process started from a supergraph that a standard composer made.
//!
//! A graph lives in `tests/supergraphs/<graph>/`: one `<subgraph>.graphql` per subgraph
//! (what it serves as `_service { sdl }`), the `supergraph.graphql` that
//! `@theguild/federation-composition` composed from them, and `composed-from.txt`, the
//! SHA-256 of each file the composer read and wrote. [`Federation::start`] refuses to
//! run a test when a subgraph serves other SDL than its file, or when a file is not the
//! one the supergraph was composed from: a schema change must be recomposed with
//! `scripts/compose-federation-tests.sh` (which sets `FEDERATION_SDL=write`, under
//! which the rig writes the served SDL into the files instead of comparing).
//!
//! - [`schema`]: building subgraphs. Data are JSON: an object field returns a JSON
//!   object (its `__typename`, when it has one, names its concrete type),
//!   [`schema::field`] reads the parent's member of its name, and [`schema::computed`]
//!   works its value out of the parent and the arguments;
//! - [`host`]: serving them; each records the requests it gets ([`Federation::log`]),
//!   and may hold them or rewrite its answers before they leave
//!   ([`Subgraph::tamper`]): the faults a correct async-graphql subgraph cannot make;
//! - [`committed`]: the graph's files, checked (or written);
//! - here, [`Federation`]: the subgraphs and a gateway over the supergraph, and what
//!   the tests ask of them; and `federated_graph!`, the `subgraphs()`, `start()` and
//!   committed-SDL test a graph's test file starts with.

pub mod committed;
pub mod host;
pub mod schema;

use gateway::startup::{GatewayConfig, GraphSource};
use serde_json::{json, Value as Json};

use host::{Logged, Running};
use schema::Subgraph;

use super::Server;

/// What every file of one graph's federation tests starts with, for the graph `$graph`
/// served by the subgraphs `$subgraph, …` (each an expression building one
/// [`Subgraph`]): `subgraphs()`, `start()` (the subgraphs and a gateway:
/// [`Federation::start`]), and the test that the graph's committed SDL files are what
/// those subgraphs serve ([`Federation::check`]).
#[macro_export]
macro_rules! federated_graph {
    ($graph:expr, [$($subgraph:expr),+ $(,)?]) => {
        fn subgraphs() -> Vec<$crate::common::federated::schema::Subgraph> {
            vec![$($subgraph),+]
        }

        async fn start() -> $crate::common::federated::Federation {
            $crate::common::federated::Federation::start($graph, subgraphs()).await
        }

        #[tokio::test]
        async fn committed_sdl_files_are_what_the_subgraphs_serve() {
            $crate::common::federated::Federation::check($graph, subgraphs()).await;
        }
    };
}

/// A graph's subgraphs and a gateway over its committed supergraph.
pub struct Federation {
    pub subgraphs: Vec<Running>,
    pub gateway: Server,
    pub http: reqwest::Client,
}

impl Federation {
    /// Serve `subgraphs`, check their SDL against graph `graph`'s files, and start a
    /// gateway from its supergraph with every subgraph's URL overridden.
    pub async fn start(graph: &str, subgraphs: Vec<Subgraph>) -> Federation {
        Federation::start_with(graph, subgraphs, |_| {}).await
    }

    pub async fn start_with(
        graph: &str,
        subgraphs: Vec<Subgraph>,
        tweak: impl FnOnce(&mut GatewayConfig),
    ) -> Federation {
        let mut running = Vec::new();
        for s in subgraphs {
            running.push(host::serve(s).await);
        }
        committed::check_sdl(graph, &running).await;
        let sdl = std::fs::read_to_string(committed::graph_dir(graph).join("supergraph.graphql"))
            .expect("the committed supergraph");
        let listed = gateway::supergraph::join::subgraphs_of(&sdl).expect("a supergraph");
        let overrides = running
            .iter()
            .map(|r| gateway::supergraph::Subgraph {
                name: r.name.to_string(),
                url: r.server.url(),
            })
            .collect();
        let mut config = super::config(Vec::new());
        config.graph = GraphSource::Supergraph {
            sdl,
            subgraphs: listed,
            overrides,
        };
        tweak(&mut config);
        let app = gateway::startup::build_app(&config)
            .await
            .expect("the gateway starts");
        let gateway = Server::start(gateway::server::router_with_limits(
            app,
            gateway::server::load::LoadLimits::NONE,
        ))
        .await;
        let federation = Federation {
            subgraphs: running,
            gateway,
            http: reqwest::Client::new(),
        };
        // What the SDL check asked is not the test's.
        federation.clear_logs();
        federation
    }

    /// Serve `subgraphs` and check their SDL only (the test each family keeps, which
    /// `FEDERATION_SDL=write` turns into the writer of the files).
    pub async fn check(graph: &str, subgraphs: Vec<Subgraph>) {
        let mut running = Vec::new();
        for s in subgraphs {
            running.push(host::serve(s).await);
        }
        committed::check_sdl(graph, &running).await;
    }

    fn subgraph(&self, name: &str) -> &Running {
        self.subgraphs
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no subgraph {name}"))
    }

    /// The requests subgraph `name` received, in order.
    pub fn log(&self, name: &str) -> Vec<Logged> {
        self.subgraph(name).log()
    }

    /// The representations subgraph `name` was sent, in order (every variable that
    /// is a list of objects with a `__typename`).
    pub fn representations(&self, name: &str) -> Vec<Json> {
        let mut out = Vec::new();
        for logged in self.log(name) {
            for value in logged
                .variables
                .as_object()
                .into_iter()
                .flatten()
                .map(|(_, v)| v)
            {
                if let Some(items) = value.as_array() {
                    if items.iter().all(|i| i.get("__typename").is_some()) {
                        out.extend(items.iter().cloned());
                    }
                }
            }
        }
        out
    }

    /// How many requests subgraph `name` received.
    pub fn requests(&self, name: &str) -> usize {
        self.subgraph(name).requests()
    }

    /// The request counts of every subgraph, by name (in the order they were given).
    pub fn counts(&self) -> Vec<(&'static str, usize)> {
        self.subgraphs
            .iter()
            .map(|s| (s.name, s.requests()))
            .collect()
    }

    /// Forget what the subgraphs received so far.
    pub fn clear_logs(&self) {
        for s in &self.subgraphs {
            s.clear_log();
        }
    }

    /// Where subgraph `name` listens.
    pub fn subgraph_addr(&self, name: &str) -> std::net::SocketAddr {
        self.subgraph(name).server.addr
    }

    /// Stop subgraph `name` (its port then refuses connections).
    pub async fn stop(&mut self, name: &str) {
        let at = self
            .subgraphs
            .iter()
            .position(|s| s.name == name)
            .unwrap_or_else(|| panic!("no subgraph {name}"));
        let stopped = self.subgraphs.remove(at);
        stopped.server.stop().await;
    }

    /// POST `{"query", "variables"}`; the status and the body as sent.
    pub async fn raw(&self, query: &str, variables: Json) -> (u16, String) {
        let r = self
            .http
            .post(self.gateway.url())
            .json(&json!({ "query": query, "variables": variables }))
            .send()
            .await
            .expect("the gateway answers");
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// Run an operation; the answer as JSON (the status must be 200).
    pub async fn query_with(&self, query: &str, variables: Json) -> Json {
        let (status, body) = self.raw(query, variables).await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }

    pub async fn query(&self, query: &str) -> Json {
        self.query_with(query, Json::Null).await
    }

    /// The gateway's `gateway_upstream_requests_total` for subgraph `name`.
    pub async fn upstream_requests(&self, name: &str) -> u64 {
        let text = self.metrics().await;
        let series = format!("gateway_upstream_requests_total{{subgraph=\"{name}\"}}");
        super::sample(&text, &series).unwrap_or_else(|| panic!("no {series} in:\n{text}")) as u64
    }

    /// The Prometheus text of the gateway's `/metrics`.
    pub async fn metrics(&self) -> String {
        super::metrics_of(&self.http, self.gateway.addr).await
    }
}
