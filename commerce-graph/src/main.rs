//! `commerce-service`: serves one of the commerce graph's four subgraphs over HTTP.
//! `--subgraph products|inventory|reviews|accounts` picks it; `--help` lists the other
//! flags: the host's (`--listen`, delays, faults, drain, `--cache-control`) and the data
//! set's (`--products N --users N --reviews-per-product N --data-seed S`, the same for
//! all four).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use commerce_graph::{executor, ServiceArgs, Subgraph};

fn main() {
    let ports = Subgraph::ALL
        .map(|s| format!("{} {}", s.name(), s.default_listen()))
        .join(", ");
    subgraph_host::main_with(
        "commerce-service",
        format!("One subgraph of graphql-cache-lab's commerce graph (default --listen: {ports})"),
        |args: ServiceArgs| {
            let scale = args.data.scale()?;
            Ok(subgraph_host::Served {
                service: args.subgraph.name(),
                default_listen: args.subgraph.default_listen(),
                executors: executor::executors(args.subgraph, scale),
            })
        },
    );
}
