//! `post-service`: serves the posts subgraph over HTTP. `--help` lists the flags: the
//! host's (`--listen`, delays, faults, drain) and the data set's (`--posts M --users N
//! --data-seed S`).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    subgraph_host::main(
        "post-service",
        "post",
        ([127, 0, 0, 1], 3002).into(),
        |data: post_service::DataArgs| {
            post_service::executors(post_service::Posts::from_args(&data))
        },
    );
}
