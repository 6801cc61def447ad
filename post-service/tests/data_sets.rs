//! The data sets through real HTTP: the seed exactly as the talk had it, generated sets
//! (`--users N`, `--posts M --users N`) that agree across the two services and do not
//! change from run to run, a million posts with working reads and mutations, and bad
//! sizes refused by name.

mod common;

use common::{data, post, Process, Service};
use post_service::Posts;
use serde_json::{json, Value};
use user_service::Users;

const ALL_POSTS: &str = "{ topPosts(count: 10) { pid title content author { id } } }";
const TOP_POSTS_OF: &str = "query($r: [_Any!]!) { _entities(representations: $r) { ... on User { id topPosts(count: 1000000) { pid author { id } } } } }";
const USERS: &str =
    "query($r: [_Any!]!) { _entities(representations: $r) { ... on User { id name } } }";

fn users(ids: impl IntoIterator<Item = String>) -> Value {
    json!({ "r": ids.into_iter().map(|id| json!({ "__typename": "User", "id": id })).collect::<Vec<_>>() })
}

#[tokio::test]
async fn without_flags_the_data_is_the_seed() {
    let user = Service::start(common::user_router(Users::default())).await;
    let posts = Service::start(common::post_router(Posts::default())).await;
    let http = common::client();
    let (status, body) = post(&http, &posts.url(), ALL_POSTS, Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        r#"{"data":{"topPosts":[{"pid":"p1","title":"Post 1","content":"Content 1","author":{"id":"u1"}},{"pid":"p2","title":"Post 2","content":"Content 2","author":{"id":"u2"}},{"pid":"p3","title":"Post 3","content":"Content 3","author":{"id":"u1"}},{"pid":"p4","title":"Post 4","content":"Content 4","author":{"id":"u1"}}]}}"#
    );
    let (_, body) = post(
        &http,
        &user.url(),
        USERS,
        users(["u1", "u2", "u3"].map(String::from)),
    )
    .await;
    assert_eq!(
        body,
        r#"{"data":{"_entities":[{"id":"u1","name":"John"},{"id":"u2","name":"Jane"},null]}}"#
    );
    let (_, body) = post(&http, &user.url(), "{ me { id name } }", Value::Null).await;
    assert_eq!(body, r#"{"data":{"me":{"id":"u1","name":"John"}}}"#);
    let d = data(
        &http,
        &posts.url(),
        TOP_POSTS_OF,
        users(["u1", "u2"].map(String::from)),
    )
    .await;
    let pids: Vec<Vec<&str>> = d["_entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            u["topPosts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["pid"].as_str().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(pids, [vec!["p1", "p3", "p4"], vec!["p2"]]);
}

#[tokio::test]
async fn generated_sets_agree_across_the_two_services() {
    let (n, m) = (500, 5000);
    let user = Service::start(common::user_router(Users::generated(n))).await;
    let posts = Service::start(common::post_router(Posts::generated(m, n, 1))).await;
    let http = common::client();
    // Every user exists in the users subgraph, and no more.
    let ids: Vec<String> = (1..=n + 1).map(|k| format!("u{k}")).collect();
    let d = data(&http, &user.url(), USERS, users(ids.clone())).await;
    let found = d["_entities"].as_array().unwrap();
    for (k, u) in found.iter().take(n as usize).enumerate() {
        assert_eq!(u["name"], format!("User {}", k + 1));
    }
    assert_eq!(found[n as usize], Value::Null);
    // Each user's topPosts lists only its own posts, in id order, and together they
    // list every post exactly once: every post's author is one of the users.
    let d = data(&http, &posts.url(), TOP_POSTS_OF, users(ids)).await;
    let mut seen = vec![false; m as usize];
    for u in d["_entities"].as_array().unwrap() {
        let mine = u["topPosts"].as_array().unwrap();
        let mut last = 0;
        for p in mine {
            assert_eq!(p["author"]["id"], u["id"]);
            let k: usize = p["pid"].as_str().unwrap()[1..].parse().unwrap();
            assert!(k > last, "{} lists p{k} after p{last}", u["id"]);
            last = k;
            assert!(
                !std::mem::replace(&mut seen[k - 1], true),
                "p{k} listed twice"
            );
        }
    }
    assert!(
        seen.iter().all(|&s| s),
        "some post has an author outside u1…u{n}"
    );
    // Authors spread over the users (uniform draws: 10 posts each on average).
    let d = data(
        &http,
        &posts.url(),
        "{ topPosts(count: 5000) { author { id } } }",
        Value::Null,
    )
    .await;
    let authors: std::collections::HashSet<String> = d["topPosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["author"]["id"].as_str().unwrap().to_string())
        .collect();
    assert!(authors.len() > 450, "{} distinct authors", authors.len());
    let d = data(
        &http,
        &posts.url(),
        r#"{ a: getPost(pid: "p5000") { pid } b: getPost(pid: "p5001") { pid } }"#,
        Value::Null,
    )
    .await;
    assert_eq!(d, json!({ "a": { "pid": "p5000" }, "b": null }));
}

#[tokio::test]
async fn the_same_flags_give_the_same_data_and_the_seed_changes_it() {
    let query = "{ topPosts(count: 50) { pid author { id } } }";
    let http = common::client();
    let mut answers = Vec::new();
    for seed in [1, 1, 2] {
        let posts = Service::start(common::post_router(Posts::generated(1000, 100, seed))).await;
        answers.push(data(&http, &posts.url(), query, Value::Null).await);
    }
    assert_eq!(answers[0], answers[1]);
    assert_ne!(answers[0], answers[2]);
}

#[tokio::test]
async fn a_million_posts_read_and_write() {
    let (n, m) = (10_000, 1_000_000);
    let user = Service::start(common::user_router(Users::generated(n))).await;
    let posts = Service::start(common::post_router(Posts::generated(m, n, 1))).await;
    let http = common::client();
    let d = data(
        &http,
        &posts.url(),
        r#"{ getPost(pid: "p1000000") { pid title content author { id } } }"#,
        Value::Null,
    )
    .await;
    assert_eq!(d["getPost"]["title"], "Post 1000000");
    assert_eq!(d["getPost"]["content"], "Content 1000000");
    let author = d["getPost"]["author"]["id"].as_str().unwrap().to_string();
    // The author's own list has that post last (it is the highest id).
    let d = data(&http, &posts.url(), TOP_POSTS_OF, users([author.clone()])).await;
    let mine = d["_entities"][0]["topPosts"].as_array().unwrap();
    assert_eq!(mine.last().unwrap()["pid"], "p1000000");
    assert!(mine.len() > 50 && mine.len() < 200, "{} posts", mine.len());
    // Mutations on the big sets, each followed by what it should have done.
    let steps = [
        (
            posts.url(),
            r#"mutation { updatePostTitle(pid: "p999999", title: "v1") { pid title } }"#,
            json!({ "updatePostTitle": { "pid": "p999999", "title": "v1" } }),
        ),
        (
            posts.url(),
            r#"{ getPost(pid: "p999999") { title } }"#,
            json!({ "getPost": { "title": "v1" } }),
        ),
        (
            user.url(),
            r#"mutation { createUser(name: "New") { id name } }"#,
            json!({ "createUser": { "id": "u10001", "name": "New" } }),
        ),
        (
            user.url(),
            r#"mutation { updateUser(id: "u10000", name: "Last") { id name } }"#,
            json!({ "updateUser": { "id": "u10000", "name": "Last" } }),
        ),
    ];
    for (url, query, expected) in steps {
        assert_eq!(
            data(&http, &url, query, Value::Null).await,
            expected,
            "{query}"
        );
    }
    let unknown = r#"mutation { updatePostTitle(pid: "p1000001", title: "x") { pid } }"#;
    let (_, body) = post(&http, &posts.url(), unknown, Value::Null).await;
    assert!(body.contains(r#"no post with pid \"p1000001\""#), "{body}");
    let (_, body) = post(&http, &user.url(), "{ me { id name } }", Value::Null).await;
    assert_eq!(body, r#"{"data":{"me":{"id":"u1","name":"User 1"}}}"#);
    let r = http
        .post(user.url())
        .header("authorization", "Bearer u10000")
        .json(&json!({ "query": "{ me { id name } }" }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.text().await.unwrap(),
        r#"{"data":{"me":{"id":"u10000","name":"Last"}}}"#
    );
}

#[test]
fn the_binaries_take_the_data_set_flags() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let user = Process::start("user-service", &["--users", "300"]);
    let posts = Process::start(
        "post-service",
        &["--posts", "3000", "--users", "300", "--data-seed", "7"],
    );
    let http = common::client();
    let (u, p) = rt.block_on(async {
        let u = data(
            &http,
            &user.url(),
            USERS,
            users(["u300".to_string(), "u301".to_string()]),
        )
        .await;
        let p = data(
            &http,
            &posts.url(),
            r#"{ getPost(pid: "p3000") { pid author { id } } }"#,
            Value::Null,
        )
        .await;
        (u, p)
    });
    assert_eq!(
        u,
        json!({ "_entities": [{ "id": "u300", "name": "User 300" }, null] })
    );
    // The same author as the in-process set drawn with the same seed.
    let expected = Posts::generated(3000, 300, 7)
        .get("p3000")
        .unwrap()
        .author_id();
    assert_eq!(p["getPost"]["author"]["id"], expected);
}

#[test]
fn bad_sizes_are_refused_by_name() {
    for (name, args, flag) in [
        ("user-service", &["--users", "0"][..], "--users"),
        ("user-service", &["--users", "many"][..], "--users"),
        ("post-service", &["--posts", "10"][..], "--users"),
        ("post-service", &["--users", "10"][..], "--posts"),
        (
            "post-service",
            &["--posts", "0", "--users", "1"][..],
            "--posts",
        ),
        (
            "post-service",
            &["--posts", "100000001", "--users", "1"][..],
            "--posts",
        ),
        ("post-service", &["--data-seed", "3"][..], "--posts"),
    ] {
        let (code, stderr) = common::refused(name, args);
        assert_eq!(code, Some(2), "{name} {args:?}: {stderr}");
        assert!(stderr.contains(flag), "{name} {args:?}: {stderr}");
    }
}
