//! The gateway's default runtime, one current-thread runtime per core (`--shards`):
//! connections spread evenly over the shards, every shard serves the same caches,
//! and a drain reaches every shard. (SIGTERM under load on shards: `drain.rs`.)

mod common;

use std::time::Duration;

use common::{metric, metrics_of, GatewayProcess, Server};

const SEED: &str = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";
const SEED_ANSWER: &str = r#"{"data":{"me":{"id":"u1","name":"John","nickname":"John","topPosts":[{"pid":"p1","author":{"id":"u1"}},{"pid":"p3","author":{"id":"u1"}}]},"topPosts":[{"pid":"p1"},{"pid":"p2"}]}}"#;

/// `gateway_shard_connections_open` per shard, shard 0 first.
fn open_per_shard(text: &str) -> Vec<u64> {
    (0..)
        .map_while(|i| {
            common::sample(
                text,
                &format!("gateway_shard_connections_open{{shard=\"{i}\"}}"),
            )
        })
        .map(|v| v as u64)
        .collect()
}

/// One client with one keep-alive connection, kept open while the client lives.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap()
}

async fn seed(http: &reqwest::Client, gateway: &GatewayProcess) -> String {
    http.post(format!("http://{}/graphql", gateway.addr))
        .json(&serde_json::json!({ "query": SEED }))
        .send()
        .await
        .expect("the gateway answers")
        .text()
        .await
        .unwrap()
}

async fn subgraph_requests(http: &reqwest::Client, user: &Server, post: &Server) -> (u64, u64) {
    let count = |text: String| metric(&text, "subgraph_requests_total").unwrap() as u64;
    (
        count(metrics_of(http, user.addr).await),
        count(metrics_of(http, post.addr).await),
    )
}

#[tokio::test]
async fn connections_spread_evenly_over_the_shards_which_share_one_cache() {
    let user = Server::start(common::user_router()).await;
    let post = Server::start(common::post_router()).await;
    let mut gateway = GatewayProcess::start(&user, &post, &["--shards", "3", "--ttl", "10"]).await;
    let probe = client();

    // The first request fills the cache; the others, on every shard, are answered
    // from it: the subgraphs see no further request.
    let clients: Vec<reqwest::Client> = (0..6).map(|_| client()).collect();
    assert_eq!(seed(&clients[0], &gateway).await, SEED_ANSWER);
    let after_first = subgraph_requests(&probe, &user, &post).await;
    assert!(after_first.0 > 0 && after_first.1 > 0, "{after_first:?}");
    for http in &clients[1..] {
        assert_eq!(seed(http, &gateway).await, SEED_ANSWER);
    }
    assert_eq!(
        subgraph_requests(&probe, &user, &post).await,
        after_first,
        "every shard reads the one cache"
    );

    // Six client connections, the start-up probe's, and this one: placed each on
    // the shard with the fewest, so no shard has two more than another.
    let text = metrics_of(&probe, gateway.addr).await;
    let open = open_per_shard(&text);
    assert_eq!(open.len(), 3, "{text}");
    let (least, most) = (open.iter().min().unwrap(), open.iter().max().unwrap());
    assert!(
        open.iter().sum::<u64>() >= 7 && most - least <= 1,
        "open connections per shard: {open:?}"
    );

    // SIGTERM closes the idle keep-alive connections on every shard, and exits 0.
    let status = tokio::time::timeout(Duration::from_secs(20), gateway.terminate())
        .await
        .expect("the drain ends");
    assert!(status.success(), "{status:?}");
    drop(clients);
}

#[tokio::test]
async fn the_pool_and_one_thread_report_no_shards() {
    let user = Server::start(common::user_router()).await;
    let post = Server::start(common::post_router()).await;
    for args in [&["--worker-threads", "2"][..], &["--shards", "1"][..]] {
        let gateway = GatewayProcess::start(&user, &post, args).await;
        assert_eq!(seed(&client(), &gateway).await, SEED_ANSWER, "{args:?}");
        let text = metrics_of(&gateway.http, gateway.addr).await;
        assert!(
            !text.contains("gateway_shard_connections_open"),
            "{args:?}: {text}"
        );
    }
}
