//! Invalidation from outside, through HTTP (issue 55): `POST /invalidate` on the admin
//! listener drops the resolver cache's entries and the response store's answers by
//! reference, type, namespace or all, says how many each level dropped, refuses a bad
//! body by name, and is never served on the public port.

mod common;

use std::sync::Arc;

use common::{cache_with, config_over, post_router, user_router, Server};
use gateway::caching::requests::RequestStrategy;
use serde_json::{json, Value};

const TOP: &str = "{ topPosts(count: 2) { pid title } }";
const POST_1: &str = r#"{ getPost(pid: "p1") { pid title } }"#;

/// The subgraphs, a gateway over them (resolver cache 60 s, responses stored 60 s,
/// namespaces as references as `--admin-listen` sets them) and its admin listener.
struct Rig {
    /// Kept so that user-service serves as long as the rig.
    _user: Server,
    post: Server,
    gateway: Server,
    admin: Server,
    http: reqwest::Client,
}

impl Rig {
    async fn start(response_store: bool) -> Rig {
        let user = Server::start(user_router()).await;
        let post = Server::start(post_router()).await;
        let mut config = config_over(&user, &post);
        config.cache = cache_with(60.0, |s| s.namespace_references = true);
        if response_store {
            config.request_strategy = Some(RequestStrategy::parse("response:ttl=60").unwrap());
        }
        let app = gateway::startup::build_app(&config).await.unwrap();
        let admin = Server::start(gateway::server::admin::router(Arc::clone(&app))).await;
        let gateway = Server::start(gateway::server::router(app)).await;
        Rig {
            _user: user,
            post,
            gateway,
            admin,
            http: reqwest::Client::new(),
        }
    }

    async fn query(&self, query: &str) -> Value {
        let r = self
            .http
            .post(self.gateway.url())
            .json(&json!({ "query": query }))
            .send()
            .await
            .unwrap();
        r.json().await.unwrap()
    }

    /// `POST /invalidate` with `body`; the status and the answer.
    async fn invalidate(&self, body: &str) -> (u16, Value) {
        common::invalidate(&self.http, &self.admin.addr.to_string(), body).await
    }

    /// Requests post-service has answered.
    async fn post_requests(&self) -> u64 {
        let text = common::metrics_of(&self.http, self.post.addr).await;
        common::metric(&text, "subgraph_requests_total").unwrap() as u64
    }
}

#[tokio::test]
async fn each_target_drops_what_it_names_and_counts_it() {
    let rig = Rig::start(false).await;
    rig.query(TOP).await;
    rig.query(POST_1).await;
    let before = rig.post_requests().await;
    rig.query(TOP).await;
    rig.query(POST_1).await;
    assert_eq!(rig.post_requests().await, before, "both cached");

    // One entity: the entries that hold Post:p1 (both queries' roots hold it).
    let (status, answer) = rig.invalidate(r#"{"references":["Post:p1"]}"#).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["dropped"]["resolver"], 2, "{answer}");
    assert_eq!(answer["dropped"]["response"], 0, "{answer}");
    rig.query(TOP).await;
    rig.query(POST_1).await;
    assert_eq!(rig.post_requests().await, before + 2, "both fetched again");

    // One field: only Query.getPost's entry.
    let (_, answer) = rig.invalidate(r#"{"namespaces":["Query.getPost"]}"#).await;
    assert_eq!(answer["dropped"]["resolver"], 1, "{answer}");
    rig.query(TOP).await;
    rig.query(POST_1).await;
    assert_eq!(
        rig.post_requests().await,
        before + 3,
        "getPost alone fetched"
    );

    // A type, then everything.
    let (_, answer) = rig.invalidate(r#"{"types":["Post"]}"#).await;
    assert_eq!(answer["dropped"]["resolver"], 2, "{answer}");
    rig.query(TOP).await;
    let (_, answer) = rig.invalidate(r#"{"all":true}"#).await;
    assert_eq!(answer["dropped"]["resolver"], 1, "{answer}");
}

#[tokio::test]
async fn stored_answers_are_dropped_by_reference_and_by_namespace() {
    let rig = Rig::start(true).await;
    rig.query(TOP).await;
    rig.query(POST_1).await;
    let before = rig.post_requests().await;
    let (_, answer) = rig.invalidate(r#"{"references":["Post:p2"]}"#).await;
    // topPosts(count: 2) holds p1 and p2; getPost(p1) does not hold p2.
    assert_eq!(answer["dropped"]["response"], 1, "{answer}");
    assert_eq!(answer["dropped"]["resolver"], 1, "{answer}");
    rig.query(TOP).await;
    assert_eq!(rig.post_requests().await, before + 1);
    // A namespace drops every stored answer (they are not indexed by field).
    let (_, answer) = rig.invalidate(r#"{"namespaces":["Query.topPosts"]}"#).await;
    assert_eq!(answer["dropped"]["response"], 2, "{answer}");
    assert_eq!(answer["dropped"]["resolver"], 1, "{answer}");
}

#[tokio::test]
async fn a_bad_body_is_refused_naming_what_was_wrong() {
    let rig = Rig::start(false).await;
    for (body, expected) in [
        ("{", "could not be read"),
        (r#"{"references":["p1"]}"#, "is not Type:key"),
        (r#"{"all":true,"types":["Post"]}"#, "names 2 targets"),
    ] {
        let (status, answer) = rig.invalidate(body).await;
        assert_eq!(status, 400, "{body}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(expected), "{body}: {error}");
    }
}

#[tokio::test]
async fn only_the_admin_listener_serves_invalidate() {
    let user = Server::start(user_router()).await;
    let post = Server::start(post_router()).await;
    let admin_port = common::free_port();
    let admin = format!("127.0.0.1:{admin_port}");
    let gateway =
        common::GatewayProcess::start(&user, &post, &["--ttl", "60", "--admin-listen", &admin])
            .await;
    let http = reqwest::Client::new();
    let public = http
        .post(format!("http://{}/invalidate", gateway.addr))
        .body(r#"{"all":true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(public.status(), 404);
    let private = http
        .post(format!("http://{admin}/invalidate"))
        .body(r#"{"all":true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(private.status(), 200);
    let answer: Value = private.json().await.unwrap();
    assert_eq!(answer["dropped"]["resolver"], 0, "{answer}");
}
