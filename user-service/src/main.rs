//! `user-service`: serves the users subgraph over HTTP (`--listen`, `--delay-ms`).

fn main() {
    subgraph_host::main(
        "user-service",
        "user",
        ([127, 0, 0, 1], 3001).into(),
        user_service::schema,
    );
}
