//! Test rig: the two subgraphs and the gateway, each on its own free 127.0.0.1 port,
//! in this process, spoken to over real HTTP. Other graphs behind the gateway:
//! [`commerce`] (the commerce graph's four subgraphs) and [`namesakes`] (two types
//! that share their ids).
#![allow(dead_code)]

pub mod campaign;
pub mod commerce;
pub mod federated;
pub mod namesakes;
pub mod shared_cache;
pub mod strategies;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use std::time::Instant;

use axum::Router;
use gateway::documents::DocumentLimits;
use gateway::server::request::RequestLimits;
use gateway::startup::{Backoff, GatewayConfig, GraphSource};
use gateway::supergraph::Subgraph;
use serde_json::{json, Value};

/// An HTTP server on a free port; dropping it closes the listener and every connection.
pub struct Server {
    pub addr: SocketAddr,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Server {
    pub async fn start(service: impl Into<gateway::server::Service>) -> Server {
        Server::start_on("127.0.0.1:0".parse().unwrap(), service).await
    }

    pub async fn start_on(
        addr: SocketAddr,
        service: impl Into<gateway::server::Service>,
    ) -> Server {
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(gateway::server::serve(
            listener,
            service.into(),
            Duration::from_millis(500),
            std::future::pending(),
        ));
        Server {
            addr,
            task: Some(task),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/graphql", self.addr)
    }

    /// Stop serving, closing open connections, and wait until the port is released.
    pub async fn stop(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

pub fn user_router() -> Router {
    subgraph_host::router("user", user_service::schema(), Duration::ZERO)
}

pub fn post_router() -> Router {
    post_router_delayed(Duration::ZERO)
}

/// A posts subgraph that holds every response `delay` (its `--delay-ms`).
pub fn post_router_delayed(delay: Duration) -> Router {
    subgraph_host::router("post", post_service::schema(), delay)
}

/// Cache settings: `ttl` seconds, no stale window, no policies.
pub fn cache(ttl: f64) -> Option<gateway::caching::CacheSettings> {
    Some(gateway::caching::CacheSettings {
        storage: gateway::caching::StorageKind::Memory,
        redis: None,
        ttl: Duration::from_secs_f64(ttl),
        stale: Duration::ZERO,
        max_entries: 10_000,
        report_interval: None,
        policies: Default::default(),
        invalidation: true,
        strategies: Vec::new(),
        eviction: Default::default(),
        namespace_references: false,
    })
}

/// [`cache`] settings, changed by `tweak`.
pub fn cache_with(
    ttl: f64,
    tweak: impl FnOnce(&mut gateway::caching::CacheSettings),
) -> Option<gateway::caching::CacheSettings> {
    let mut settings = cache(ttl)?;
    tweak(&mut settings);
    Some(settings)
}

pub fn config(subgraphs: Vec<Subgraph>) -> GatewayConfig {
    GatewayConfig {
        graph: GraphSource::Compose(subgraphs),
        startup: Backoff {
            deadline: Duration::from_secs(10),
            first: Duration::from_millis(20),
            max: Duration::from_millis(200),
        },
        upstream: gateway::upstream::UpstreamSettings::uniform(gateway::upstream::SubgraphLimits {
            request_timeout: Duration::from_secs(5),
            ..Default::default()
        }),
        max_upstream_body_bytes: 64 << 20,
        requests: RequestLimits {
            max_body_bytes: 1 << 20,
            body_read_timeout: Duration::from_millis(500),
            header_read_timeout: Duration::from_millis(500),
            request_timeout: Duration::from_secs(10),
            max_executing: 0,
        },
        documents: DocumentLimits::default(),
        profiling: true,
        cache: None,
        request_strategy: None,
        invalidation: true,
        doc_cache_bytes: 32 << 20,
        shards: 1,
        persisted: Default::default(),
        surrogate_keys: false,
        edge_purge: None,
    }
}

/// user-service, post-service and a gateway over them.
pub struct Lab {
    pub user: Server,
    pub post: Server,
    pub gateway: Server,
    pub http: reqwest::Client,
}

impl Lab {
    pub async fn start() -> Lab {
        Lab::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut GatewayConfig)) -> Lab {
        Lab::start_delayed(Duration::ZERO, tweak).await
    }

    /// With post-service holding every response `post_delay`.
    pub async fn start_delayed(
        post_delay: Duration,
        tweak: impl FnOnce(&mut GatewayConfig),
    ) -> Lab {
        Lab::start_over(user_router(), post_router_delayed(post_delay), tweak).await
    }

    /// With `post` as post-service's router, and the gateway shedding load past
    /// `limits`.
    pub async fn start_custom(
        post: Router,
        limits: gateway::server::load::LoadLimits,
        tweak: impl FnOnce(&mut GatewayConfig),
    ) -> Lab {
        Lab::start_limited(user_router(), post, limits, tweak).await
    }

    /// Over subgraphs of the test's making (faults, `Cache-Control`, ...).
    pub async fn start_over(
        user_router: Router,
        post_router: Router,
        tweak: impl FnOnce(&mut GatewayConfig),
    ) -> Lab {
        Lab::start_limited(
            user_router,
            post_router,
            gateway::server::load::LoadLimits::NONE,
            tweak,
        )
        .await
    }

    async fn start_limited(
        user_router: Router,
        post_router: Router,
        limits: gateway::server::load::LoadLimits,
        tweak: impl FnOnce(&mut GatewayConfig),
    ) -> Lab {
        let user = Server::start(user_router).await;
        let post = Server::start(post_router).await;
        let gateway = gateway_limited(&user, &post, limits, tweak).await;
        Lab {
            user,
            post,
            gateway,
            http: reqwest::Client::new(),
        }
    }

    /// POST a raw body with `Content-Type: application/json`; the status and body text.
    pub async fn post_raw(&self, body: impl Into<reqwest::Body>) -> (u16, String) {
        let r = self
            .http
            .post(self.gateway.url())
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("gateway answers");
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// A POST of the JSON request `body` with `authorization` set to these raw bytes
    /// (any a header may hold, not only UTF-8), or without the header.
    pub fn request_as(&self, body: &str, authorization: Option<&[u8]>) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(self.gateway.url())
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(bytes) = authorization {
            let value = reqwest::header::HeaderValue::from_bytes(bytes).expect("a header value");
            request = request.header("authorization", value);
        }
        request
    }

    /// [`Lab::request_as`], sent; the status.
    pub async fn post_as(&self, body: &str, authorization: Option<&[u8]>) -> u16 {
        let answer = self.request_as(body, authorization).send().await;
        answer.expect("gateway answers").status().as_u16()
    }

    /// POST a JSON request body; the response body as JSON.
    pub async fn post_json(&self, body: &Value) -> Value {
        let r = self
            .http
            .post(self.gateway.url())
            .json(body)
            .send()
            .await
            .expect("gateway answers");
        r.json().await.unwrap()
    }

    /// Run a query; the response body as JSON.
    pub async fn query(&self, query: &str) -> Value {
        self.query_with(query, Value::Null, &[]).await
    }

    pub async fn query_with(
        &self,
        query: &str,
        variables: Value,
        headers: &[(&str, &str)],
    ) -> Value {
        let mut req = self
            .http
            .post(self.gateway.url())
            .json(&serde_json::json!({ "query": query, "variables": variables }));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let r = req.send().await.expect("gateway answers");
        assert_eq!(r.status(), 200);
        r.json().await.unwrap()
    }

    /// The Prometheus text of `server`'s `/metrics`.
    pub async fn metrics(&self, server: &Server) -> String {
        metrics_of(&self.http, server.addr).await
    }

    /// Stop user-service, closing its connections; returns the address it had, for a
    /// restart with `Server::start_on`.
    pub async fn stop_user(&mut self) -> SocketAddr {
        let stopped = std::mem::replace(&mut self.user, Server::start(Router::new()).await);
        let addr = stopped.addr;
        stopped.stop().await;
        addr
    }

    /// Stop post-service, closing its connections; returns the address it had.
    pub async fn stop_post(&mut self) -> SocketAddr {
        let stopped = std::mem::replace(&mut self.post, Server::start(Router::new()).await);
        let addr = stopped.addr;
        stopped.stop().await;
        addr
    }

    /// `subgraph_requests_total` of (user-service, post-service).
    pub async fn subgraph_requests(&self) -> (u64, u64) {
        (
            self.counter(&self.user, "subgraph_requests_total").await,
            self.counter(&self.post, "subgraph_requests_total").await,
        )
    }

    pub async fn counter(&self, server: &Server, name: &str) -> u64 {
        let text = self.metrics(server).await;
        metric(&text, name).unwrap_or_else(|| panic!("{name} missing from:\n{text}")) as u64
    }
}

/// Another in-process gateway over `user` and `post`, configured by `tweak`.
pub async fn gateway_over(
    user: &Server,
    post: &Server,
    tweak: impl FnOnce(&mut GatewayConfig),
) -> Server {
    gateway_limited(user, post, gateway::server::load::LoadLimits::NONE, tweak).await
}

/// The same, shedding load past `limits`.
pub async fn gateway_limited(
    user: &Server,
    post: &Server,
    limits: gateway::server::load::LoadLimits,
    tweak: impl FnOnce(&mut GatewayConfig),
) -> Server {
    let mut cfg = config_over(user, post);
    tweak(&mut cfg);
    let app = gateway::startup::build_app(&cfg)
        .await
        .expect("gateway starts");
    Server::start(gateway::server::router_with_limits(app, limits)).await
}

/// The test configuration of a gateway over `user` and `post`.
pub fn config_over(user: &Server, post: &Server) -> GatewayConfig {
    config(lab_subgraphs(user, post))
}

/// The lab's two subgraphs, `user` and `post`, where these servers listen.
pub fn lab_subgraphs(user: &Server, post: &Server) -> Vec<Subgraph> {
    vec![
        Subgraph {
            name: "user".into(),
            url: user.url(),
        },
        Subgraph {
            name: "post".into(),
            url: post.url(),
        },
    ]
}

/// An in-process gateway over supergraph `sdl`, its subgraphs at `urls` (as
/// `--supergraph FILE --subgraph-url NAME=URL`), configured by `tweak`.
pub async fn gateway_over_supergraph(
    sdl: String,
    urls: Vec<Subgraph>,
    tweak: impl FnOnce(&mut GatewayConfig),
) -> Server {
    let mut cfg = config(Vec::new());
    cfg.graph = GraphSource::Supergraph {
        sdl,
        subgraphs: urls.clone(),
        overrides: urls,
    };
    tweak(&mut cfg);
    let app = gateway::startup::build_app(&cfg)
        .await
        .expect("the gateway starts over the supergraph");
    Server::start(gateway::server::router(app)).await
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A gateway process over the in-process subgraphs, stopped by PID when dropped.
pub struct GatewayProcess {
    pub addr: SocketAddr,
    child: Child,
    pub http: reqwest::Client,
}

impl GatewayProcess {
    pub async fn start(user: &Server, post: &Server, extra: &[&str]) -> GatewayProcess {
        GatewayProcess::start_logged(user, post, extra, Stdio::null()).await
    }

    /// Like [`GatewayProcess::start`], with the gateway's standard error going to
    /// `stderr`.
    pub async fn start_logged(
        user: &Server,
        post: &Server,
        extra: &[&str],
        stderr: impl Into<Stdio>,
    ) -> GatewayProcess {
        GatewayProcess::launch(free_port(), user, post, extra, stderr.into()).await
    }

    /// Like [`GatewayProcess::start`], on `port` (one a test chose earlier, for a
    /// process that must know it first: an edge cache in front).
    pub async fn start_at(
        port: u16,
        user: &Server,
        post: &Server,
        extra: &[&str],
    ) -> GatewayProcess {
        GatewayProcess::launch(port, user, post, extra, Stdio::null()).await
    }

    async fn launch(
        port: u16,
        user: &Server,
        post: &Server,
        extra: &[&str],
        stderr: Stdio,
    ) -> GatewayProcess {
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_gateway"))
            .args(["--listen", &addr.to_string()])
            .args(["--subgraph", &format!("user={}", user.url())])
            .args(["--subgraph", &format!("post={}", post.url())])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start the gateway binary");
        let gateway = GatewayProcess {
            addr,
            child,
            http: reqwest::Client::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let health = gateway
                .http
                .get(format!("http://{addr}/health"))
                .send()
                .await;
            if health.is_ok_and(|r| r.status() == 200) {
                return gateway;
            }
            assert!(Instant::now() < deadline, "the gateway did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn query(&self, query: &str) -> Value {
        let r = self
            .http
            .post(format!("http://{}/graphql", self.addr))
            .json(&json!({ "query": query }))
            .send()
            .await
            .expect("the gateway answers");
        assert_eq!(r.status(), 200);
        r.json().await.unwrap()
    }

    /// POST a JSON request body; the response body as JSON.
    pub async fn post_json(&self, body: &Value) -> Value {
        let r = self
            .http
            .post(format!("http://{}/graphql", self.addr))
            .json(body)
            .send()
            .await
            .expect("the gateway answers");
        r.json().await.unwrap()
    }

    pub async fn metric(&self, name: &str) -> f64 {
        let text = metrics_of(&self.http, self.addr).await;
        metric(&text, name).unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
    }
}

impl GatewayProcess {
    /// Send SIGTERM to the gateway (by its PID) and wait for it to exit.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let signalled = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(signalled.success(), "kill -TERM the gateway");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the gateway") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the gateway did not exit after SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `POST /invalidate` with `body` to the admin listener at `admin`: the status and the
/// JSON answer.
pub async fn invalidate(http: &reqwest::Client, admin: &str, body: &str) -> (u16, Value) {
    let r = http
        .post(format!("http://{admin}/invalidate"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("the admin listener answers");
    (r.status().as_u16(), r.json().await.unwrap())
}

/// The Prometheus text of the `/metrics` of whatever listens at `addr`.
pub async fn metrics_of(http: &reqwest::Client, addr: SocketAddr) -> String {
    http.get(format!("http://{addr}/metrics"))
        .send()
        .await
        .expect("/metrics answers")
        .text()
        .await
        .unwrap()
}

/// The value of the sample written exactly `series` (`name{labels}`) in Prometheus text.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// The resolver cache's counters in a gateway's `/metrics` text.
pub struct CacheCounters(pub String);

impl CacheCounters {
    /// `gateway_cache_<counter>_total` of `namespace` (0 when absent).
    pub fn get(&self, counter: &str, namespace: &str) -> u64 {
        let series = format!("gateway_cache_{counter}_total{{namespace=\"{namespace}\"}}");
        sample(&self.0, &series).map_or(0, |v| v as u64)
    }

    /// Assert that `gateway_cache_<counter>_total` of `namespace` is `expected`,
    /// showing the namespace's counters when it is not.
    #[track_caller]
    pub fn assert(&self, counter: &str, namespace: &str, expected: u64) {
        let got = self.get(counter, namespace);
        if got != expected {
            let label = format!("{{namespace=\"{namespace}\"}}");
            let lines: Vec<&str> = self.0.lines().filter(|l| l.contains(&label)).collect();
            panic!(
                "{counter} of {namespace}: {got}, expected {expected}\n{}",
                lines.join("\n")
            );
        }
    }

    /// The namespaces the cache was asked for (a miss, a hit, a join or a skip).
    pub fn called(&self) -> std::collections::BTreeSet<String> {
        let counters = ["misses", "hits", "dedupes", "skips"];
        self.0
            .lines()
            .filter_map(|l| {
                let rest = counters.iter().find_map(|c| {
                    l.strip_prefix(&format!("gateway_cache_{c}_total{{namespace=\""))
                })?;
                let (namespace, value) = rest.split_once("\"} ")?;
                (value.trim() != "0").then(|| namespace.to_string())
            })
            .collect()
    }
}

/// The value of the first sample named `name` (with any labels) in Prometheus text.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| {
            l.starts_with(name) && matches!(l.as_bytes().get(name.len()), Some(b' ') | Some(b'{'))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The SHA-256 of `text` in lower-case hexadecimal: an APQ hash, and the id of a
/// document in Apollo's manifest.
pub fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The lab's policy that keys `Query.me` by the `authorization` header
/// (`experiments/policies/me-by-user.toml`).
pub fn me_keyed_by_caller() -> gateway::caching::PolicyFile {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../experiments/policies/me-by-user.toml");
    gateway::caching::PolicyFile::load(&path).expect("experiments/policies/me-by-user.toml loads")
}
