//! A real edge cache in front of the gateway, through HTTP (issue 55): Debian's Varnish
//! with the lab's VCL (`local-varnish/lab.vcl`) before a gateway process with
//! `--surrogate-keys --edge-purge`. A private answer is never served to another caller;
//! a mutation through the gateway, and `POST /invalidate`, purge the entities they name
//! so that the next read through the edge is fresh, and only those.
//!
//! Each test starts its own Varnish on a free port and stops it by PID. Without
//! varnishd installed these tests fail, naming the package (`scripts/test.sh` installs
//! it).

mod common;

use std::time::Duration;

use common::{post_router, post_router_delayed, user_router, GatewayProcess, Server};
use local_varnish::LocalVarnish;
use serde_json::{json, Value};

const POST_1: &str = r#"{ getPost(pid: "p1") { pid title } }"#;
const POST_2: &str = r#"{ getPost(pid: "p2") { pid title } }"#;
const ME: &str = "{ me { id name } }";

/// The gateway's flags: resolver cache 60 s, surrogate keys, purging the edge at
/// `purge`, the admin listener on `admin`.
fn flags<'a>(purge: &'a str, admin: &'a str) -> [&'a str; 7] {
    [
        "--ttl",
        "60",
        "--surrogate-keys",
        "--edge-purge",
        purge,
        "--admin-listen",
        admin,
    ]
}

/// The subgraphs, a gateway process (resolver cache 60 s, surrogate keys, purging the
/// edge, admin listener) and Varnish in front of it.
struct Rig {
    _user: Server,
    post: Server,
    gateway: GatewayProcess,
    admin: String,
    edge: LocalVarnish,
    http: reqwest::Client,
}

impl Rig {
    async fn start() -> Rig {
        Rig::start_over(Server::start(post_router()).await).await
    }

    /// The rig over `post` (a delayed post-service, say).
    async fn start_over(post: Server) -> Rig {
        let user = Server::start(user_router()).await;
        // Varnish first, so that the gateway knows where to purge; it answers 503
        // until the gateway behind it is up.
        let gateway_port = common::free_port();
        let edge = LocalVarnish::start(gateway_port).unwrap_or_else(|e| panic!("{e}"));
        let admin = format!("127.0.0.1:{}", common::free_port());
        let purge = edge.purge_url();
        let gateway =
            GatewayProcess::start_at(gateway_port, &user, &post, &flags(&purge, &admin)).await;
        Rig {
            _user: user,
            post,
            gateway,
            admin,
            edge,
            http: reqwest::Client::new(),
        }
    }

    /// GET `query` through the edge (with `authorization` when given): the answer's
    /// data and whether the edge served it from what it kept.
    async fn get(&self, query: &str, authorization: Option<&str>) -> (Value, bool) {
        let mut request = self.http.get(format!(
            "http://{}/graphql?query={}",
            self.edge.addr,
            encode(query)
        ));
        if let Some(token) = authorization {
            request = request.header("authorization", token);
        }
        let r = request.send().await.expect("the edge answers");
        if r.status() != 200 {
            let log = std::process::Command::new("varnishlog")
                .args(["-d", "-n", &self.edge.dir.join("n").display().to_string()])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            panic!("{}: {:?}\n{:?}", r.status(), r.text().await, log);
        }
        let hit = r.headers().get("x-edge").and_then(|v| v.to_str().ok()) == Some("hit");
        let body: Value = r.json().await.unwrap();
        (body["data"].clone(), hit)
    }

    /// The title of `pid` sent straight to post-service, behind the gateway's back.
    async fn retitle_at_the_subgraph(&self, pid: &str, title: &str) {
        let mutation =
            format!(r#"mutation {{ updatePostTitle(pid: "{pid}", title: "{title}") {{ pid }} }}"#);
        let r = self
            .http
            .post(self.post.url())
            .json(&json!({ "query": mutation }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }

    async fn invalidate(&self, body: &str) -> (u16, Value) {
        common::invalidate(&self.http, &self.admin, body).await
    }
}

/// `text` as a query-string value.
fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

#[tokio::test]
async fn a_private_answer_is_never_served_to_another_caller() {
    let rig = Rig::start().await;
    // `me` is private: with a credential (the edge passes it) and without one (the
    // answer's `Cache-Control: private` keeps it out), each caller gets their own.
    for _ in 0..2 {
        for (token, id) in [
            (Some("Bearer u2"), "u2"),
            (Some("Bearer u1"), "u1"),
            (None, "u1"),
        ] {
            let (data, hit) = rig.get(ME, token).await;
            assert_eq!(data["me"]["id"], id, "{token:?}: {data}");
            assert!(!hit, "{token:?}: a private answer came from the edge");
        }
    }
    let counters = rig.edge.counters().unwrap();
    assert_eq!(counters.hits, 0, "{counters:?}");
    // A public answer is kept: the second read is the edge's.
    assert!(!rig.get(POST_1, None).await.1);
    assert!(rig.get(POST_1, None).await.1);
}

#[tokio::test]
async fn a_mutation_through_the_gateway_purges_what_it_returned_at_the_edge() {
    let rig = Rig::start().await;
    for query in [POST_1, POST_2] {
        rig.get(query, None).await;
        assert!(rig.get(query, None).await.1, "{query} kept at the edge");
    }
    let renamed = rig
        .gateway
        .post_json(&json!({
            "query": r#"mutation { updatePostTitle(pid: "p1", title: "Renamed at the gateway") { pid title } }"#
        }))
        .await;
    assert_eq!(renamed["data"]["updatePostTitle"]["pid"], "p1", "{renamed}");
    let (data, hit) = rig.get(POST_1, None).await;
    assert!(!hit, "the purged answer was served");
    assert_eq!(data["getPost"]["title"], "Renamed at the gateway");
    // Only what the mutation returned: p2's answer is still the edge's.
    assert!(rig.get(POST_2, None).await.1, "p2 was purged too");
    assert_eq!(rig.gateway.metric("gateway_edge_purges_total").await, 1.0);
}

#[tokio::test]
async fn invalidate_reaches_the_edge_and_a_missing_edge_is_named() {
    let rig = Rig::start().await;
    let (before, _) = rig.get(POST_2, None).await;
    assert!(rig.get(POST_2, None).await.1);
    // Behind the gateway's back: the edge (and the gateway's cache) still serve the
    // old title until told.
    rig.retitle_at_the_subgraph("p2", "Renamed behind the back")
        .await;
    let (stale, hit) = rig.get(POST_2, None).await;
    assert!(hit);
    assert_eq!(stale, before);
    let (status, answer) = rig.invalidate(r#"{"references":["Post:p2"]}"#).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["edge"], "purged", "{answer}");
    assert_eq!(answer["dropped"]["resolver"], 1, "{answer}");
    let (fresh, hit) = rig.get(POST_2, None).await;
    assert!(!hit);
    assert_eq!(fresh["getPost"]["title"], "Renamed behind the back");

    // An edge that is not there: the gateway's levels are dropped, the answer is 503
    // and names the edge.
    let user = Server::start(user_router()).await;
    let post = Server::start(post_router()).await;
    let admin = format!("127.0.0.1:{}", common::free_port());
    let nowhere = format!("http://127.0.0.1:{}/", common::free_port());
    let _gateway = GatewayProcess::start(&user, &post, &flags(&nowhere, &admin)).await;
    let (status, answer) = common::invalidate(&rig.http, &admin, r#"{"all":true}"#).await;
    assert_eq!(status, 503);
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.contains("the edge at") && error.contains(&nowhere),
        "{error}"
    );
}

#[tokio::test]
async fn an_answer_that_a_purge_overlapped_is_not_kept() {
    // post-service holds every answer 300 ms: a read of posts and their authors is
    // still executing when a mutation of a user, 100 ms in, purges the edge.
    let rig =
        Rig::start_over(Server::start(post_router_delayed(Duration::from_millis(300))).await).await;
    let url = |count: u32| {
        let query = format!("{{ topPosts(count: {count}) {{ pid author {{ id name }} }} }}");
        format!(
            "http://{}/graphql?query={}",
            rig.gateway.addr,
            encode(&query)
        )
    };
    let read = |url: String| {
        let http = rig.http.clone();
        async move {
            let r = http.get(url).send().await.unwrap();
            let cache_control = r.headers()["cache-control"].to_str().unwrap().to_string();
            (cache_control, r.text().await.unwrap())
        }
    };
    let alone = read(url(2)).await;
    assert!(alone.0.starts_with("public"), "{alone:?}");
    // Another count: not in the gateway's resolver cache, so it waits on post-service.
    let overlapped = tokio::spawn(read(url(3)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let renamed = rig
        .gateway
        .post_json(&json!({ "query": r#"mutation { updateUser(id: "u2", name: "Renamed") { id name } }"# }))
        .await;
    assert_eq!(renamed["data"]["updateUser"]["id"], "u2", "{renamed}");
    let (cache_control, body) = overlapped.await.unwrap();
    assert_eq!(cache_control, "no-store", "{body}");
}
