//! The lab's own graph (user-service and post-service) through the gateway's two ways
//! in, side by side: composed by the gateway itself (`--subgraph NAME=URL`), and read
//! from a supergraph file, both the one `gateway compose` prints and the one a
//! standard composer (`@theguild/federation-composition`) made from the same two
//! subgraphs' SDL (graph `lab`, in `tests/supergraphs/lab/`).
//!
//! Each way gets fresh subgraphs and the same operations, in the same order: the
//! seed query, entity chains both ways, variables, fragments, mutations followed by
//! reads, and errors (validation, a subgraph's own, a planning one). The answers must
//! be identical byte for byte, status included; a few are also checked against the
//! answer they must be, so that three equally wrong gateways cannot pass.

mod common;

use std::process::Command;
use std::time::Duration;

use common::federated::committed::check_served_sdl;
use common::{lab_subgraphs, post_router, user_router, Server};
use gateway::startup::GraphSource;
use serde_json::{json, Value as Json};

const GRAPH: &str = "lab";

const SEED: &str = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";
const SEED_ANSWER: &str = r#"{"data":{"me":{"id":"u1","name":"John","nickname":"John","topPosts":[{"pid":"p1","author":{"id":"u1"}},{"pid":"p3","author":{"id":"u1"}}]},"topPosts":[{"pid":"p1"},{"pid":"p2"}]}}"#;

/// The operations, in order, with their variables.
fn operations() -> Vec<(&'static str, Json)> {
    vec![
        (SEED, Json::Null),
        // Entity chains: post to author to posts to author, and back.
        (
            r#"{ getPost(pid: "p2") { title author { name topPosts(count: 3) { pid author { name topPosts(count: 1) { content } } } } } missing: getPost(pid: "p9") { pid author { name } } }"#,
            Json::Null,
        ),
        (
            "{ topPosts(count: 4) { pid author { name topPosts(count: 2) { pid title } } } }",
            Json::Null,
        ),
        // Variables, with a default and an operation name.
        (
            "query Posts($n: Int! = 2, $pid: ID!) { topPosts(count: $n) { pid title } one: getPost(pid: $pid) { author { id name } } }",
            json!({ "pid": "p3" }),
        ),
        (
            "query Posts($n: Int! = 2, $pid: ID!) { topPosts(count: $n) { pid title } one: getPost(pid: $pid) { author { id name } } }",
            json!({ "n": 3, "pid": "p1" }),
        ),
        // Fragments: named, nested, inline, with a condition.
        (
            "query($full: Boolean!) { me { ...Who topPosts(count: 2) { ...PostBits } } } \
             fragment Who on User { id ... on User { name } } \
             fragment PostBits on Post { pid title @include(if: $full) author { ...Who } }",
            json!({ "full": true }),
        ),
        (
            "query($full: Boolean!) { me { ...Who topPosts(count: 2) { ...PostBits } } } \
             fragment Who on User { id ... on User { name } } \
             fragment PostBits on Post { pid title @include(if: $full) author { ...Who } }",
            json!({ "full": false }),
        ),
        // Mutations, then reads that must see them.
        (
            r#"mutation { a: createUser(name: "Ann") { id name } b: updateUser(id: "u3", name: "Anna") { id name } c: updatePostTitle(pid: "p1", title: "Fresh") { pid title author { name } } }"#,
            Json::Null,
        ),
        (
            r#"{ getPost(pid: "p1") { title author { name } } me { topPosts(count: 1) { title } } }"#,
            Json::Null,
        ),
        (
            "mutation($id: ID!, $name: String!) { updateUser(id: $id, name: $name) { id name } }",
            json!({ "id": "u2", "name": "Jo" }),
        ),
        (
            "{ topPosts(count: 4) { pid author { id name } } }",
            Json::Null,
        ),
        // Errors: a subgraph's own (with a path), validation, a bad variable.
        (
            r#"mutation { bad: updateUser(id: "u99", name: "x") { id } ok: createUser(name: "Cy") { id } }"#,
            Json::Null,
        ),
        ("{ me { id nope } }", Json::Null),
        ("{ getPost { pid } }", Json::Null),
        ("query($n: Int!) { topPosts(count: $n) { pid } }", json!({ "n": "two" })),
        ("{ __typename me { __typename } }", Json::Null),
    ]
}

/// Where the gateway's graph comes from.
#[derive(Debug, Clone, Copy)]
enum Way {
    /// `--subgraph NAME=URL`: the gateway composes the subgraphs' SDL.
    Composed,
    /// `--supergraph FILE` with what `gateway compose` prints.
    GatewayComposeFile,
    /// `--supergraph FILE` with the standard composer's supergraph, URLs overridden.
    StandardComposerFile,
}

/// `gateway compose --subgraph user=… --subgraph post=…`, run as the binary.
fn gateway_compose(user: &Server, post: &Server) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .arg("compose")
        .args(["--subgraph", &format!("user={}", user.url())])
        .args(["--subgraph", &format!("post={}", post.url())])
        .output()
        .expect("run gateway compose");
    assert!(
        out.status.success(),
        "gateway compose: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// Fresh subgraphs, a gateway over them the `way` says, and every operation's
/// status and body.
async fn answers(way: Way) -> Vec<(u16, String)> {
    let user = Server::start(user_router()).await;
    let post = Server::start(post_router()).await;
    let mut config = common::config(lab_subgraphs(&user, &post));
    match way {
        Way::Composed => {}
        Way::GatewayComposeFile => {
            let sdl = tokio::task::block_in_place(|| gateway_compose(&user, &post));
            let listed = gateway::supergraph::join::subgraphs_of(&sdl).expect("a supergraph");
            config.graph = GraphSource::Supergraph {
                sdl,
                subgraphs: listed,
                overrides: Vec::new(),
            };
        }
        Way::StandardComposerFile => {
            let sdl = std::fs::read_to_string(
                common::federated::committed::graph_dir(GRAPH).join("supergraph.graphql"),
            )
            .expect("the committed supergraph");
            let listed = gateway::supergraph::join::subgraphs_of(&sdl).expect("a supergraph");
            config.graph = GraphSource::Supergraph {
                sdl,
                subgraphs: listed,
                overrides: lab_subgraphs(&user, &post),
            };
        }
    }
    let app = gateway::startup::build_app(&config)
        .await
        .expect("the gateway starts");
    let gateway = Server::start(gateway::server::router(app)).await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut out = Vec::new();
    for (query, variables) in operations() {
        let r = http
            .post(gateway.url())
            .json(&json!({ "query": query, "variables": variables }))
            .send()
            .await
            .expect("the gateway answers");
        out.push((r.status().as_u16(), r.text().await.unwrap()));
    }
    out
}

#[tokio::test]
async fn committed_sdl_files_are_what_the_subgraphs_serve() {
    let user = Server::start(user_router()).await;
    let post = Server::start(post_router()).await;
    check_served_sdl(GRAPH, &[("user", user.url()), ("post", post.url())]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composed_and_supergraph_files_answer_byte_for_byte_alike() {
    let composed = answers(Way::Composed).await;
    let gateway_file = answers(Way::GatewayComposeFile).await;
    let standard_file = answers(Way::StandardComposerFile).await;
    let ops = operations();
    for (i, (query, variables)) in ops.iter().enumerate() {
        assert_eq!(
            composed[i], gateway_file[i],
            "`gateway compose` file differs on {query} {variables}"
        );
        assert_eq!(
            composed[i], standard_file[i],
            "standard composer's file differs on {query} {variables}"
        );
    }
    // And they are the right answers, not three alike wrong ones.
    let body = |i: usize| -> Json { serde_json::from_str(&composed[i].1).unwrap() };
    assert_eq!(composed[0], (200, SEED_ANSWER.to_string()));
    assert_eq!(
        body(8),
        json!({ "data": { "getPost": { "title": "Fresh", "author": { "name": "John" } },
                          "me": { "topPosts": [{ "title": "Fresh" }] } } })
    );
    assert_eq!(
        composed[11].1,
        r#"{"data":{"bad":null,"ok":{"id":"u4"}},"errors":[{"message":"no user with id \"u99\"","path":["bad"]}]}"#
    );
    assert_eq!(
        composed[12].1,
        r#"{"errors":[{"message":"Unknown field \"nope\" on type \"User\".","locations":[{"line":1,"column":11}]}]}"#
    );
    assert_eq!(
        composed[13].1,
        r#"{"errors":[{"message":"Field \"getPost\" argument \"pid\" of type \"Query\" is required but not provided","locations":[{"line":1,"column":3}]}]}"#
    );
    assert_eq!(
        composed[14].1,
        r#"{"errors":[{"message":"variable $n of type Int! got \"two\""}]}"#
    );
    // Every operation but the errors got data and no error.
    for (i, (status, text)) in composed.iter().enumerate() {
        assert_eq!(*status, 200, "{text}");
        if !(11..15).contains(&i) {
            assert!(
                !body(i)["data"].is_null() && body(i)["errors"].is_null(),
                "{text}"
            );
        }
    }
}
