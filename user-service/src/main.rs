//! `user-service`: serves the users subgraph over HTTP. `--help` lists the flags: the
//! host's (`--listen`, delays, faults, drain) and the data set's (`--users N`).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    subgraph_host::main(
        "user-service",
        "user",
        ([127, 0, 0, 1], 3001).into(),
        |data: user_service::DataArgs| {
            user_service::executors(user_service::Users::from_args(&data))
        },
    );
}
