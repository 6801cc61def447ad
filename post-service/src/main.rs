//! `post-service`: serves the posts subgraph over HTTP (`--listen`, `--delay-ms`).

fn main() {
    subgraph_host::main(
        "post-service",
        "post",
        ([127, 0, 0, 1], 3002).into(),
        post_service::schema,
    );
}
