//! The HTTP harness every subgraph shares (the first graph's two, the commerce graph's four).
//!
//! A subgraph crate owns its schema and data; this crate owns everything around it that
//! the lab needs to be identical on every side, one role per module:
//!
//! - [`cli`]: the command line (`--listen`, delays, faults, the document cache,
//!   `--drain-timeout`, `--cache-control`) and its value parsers;
//! - [`graphql`]: the `/graphql`, `/health` and `/metrics` routes, and the
//!   `authorization` header handed to resolvers as a [`Bearer`];
//! - [`decode`]: the GraphQL request out of the HTTP body (a fast path for one JSON
//!   object, async-graphql's own reader for everything else);
//! - [`faults`]: the injected fate of each request (outages, hangs, errors, delays),
//!   deterministic with a seed;
//! - [`documents`]: the parsed-document cache in front of the executor;
//! - [`validated`]: when a request may skip validation its document has passed before;
//! - [`metrics`]: the counters on `/metrics`;
//! - [`server`]: HTTP/1.1 connections, and the graceful drain on SIGTERM/SIGINT that lets
//!   the matrix runner stop a service by PID without cutting requests;
//! - [`ids`], [`random`] and [`groups`]: what the data sets share, the id scheme, the
//!   deterministic draws they are generated with, and rows grouped by their owner.

pub mod cli;
pub mod decode;
pub mod documents;
pub mod faults;
pub mod graphql;
pub mod groups;
pub mod ids;
pub mod metrics;
pub mod random;
pub mod server;
pub mod validated;

use async_graphql::Executor;
use std::net::SocketAddr;

pub use cli::HostArgs;
pub use graphql::{router, router_with, Bearer, Executors, Options};
pub use server::{serve, shutdown_signal, Drained};

/// The whole `main` of subgraph binary `binary`: parse the host's flags and the
/// service's own (`A`, its data set), build the executor from the latter, serve it as
/// `service` (default address `default_listen`), and exit 1 with a message on failure.
/// The executor is built before the port is bound, so a service that answers `/health`
/// has its whole data set in memory.
pub fn main<A: clap::Args + clap::FromArgMatches, E: Executor>(
    binary: &'static str,
    service: &'static str,
    default_listen: SocketAddr,
    executors: impl FnOnce(A) -> Executors<E>,
) {
    let about =
        format!("The {service} subgraph of graphql-cache-lab (default --listen {default_listen})");
    main_with(binary, about, |data: A| {
        Ok(Served {
            service,
            default_listen,
            executors: executors(data),
        })
    });
}

/// What a subgraph binary serves, once its own flags are read: a binary that hosts
/// several subgraphs (`commerce-service --subgraph …`) picks one here.
pub struct Served<E> {
    /// The name on its log lines and `/metrics` samples.
    pub service: &'static str,
    /// Where it listens without `--listen`.
    pub default_listen: SocketAddr,
    pub executors: Executors<E>,
}

/// [`main`] for a binary whose flags `A` decide which service it is: `serve` reads them
/// and builds what is served, or refuses them with a message naming the flags (printed
/// as `error: …`, exit 2, like a bad value of the host's own flags).
pub fn main_with<A: clap::Args + clap::FromArgMatches, E: Executor>(
    binary: &'static str,
    about: String,
    serve: impl FnOnce(A) -> Result<Served<E>, String>,
) {
    use clap::{Args, Command, FromArgMatches};
    let command = A::augment_args(HostArgs::augment_args(Command::new(binary).about(about)));
    let matches = command.get_matches();
    let (args, data) = match (
        HostArgs::from_arg_matches(&matches),
        A::from_arg_matches(&matches),
    ) {
        (Ok(a), Ok(d)) => (a, d),
        (Err(e), _) | (_, Err(e)) => e.exit(),
    };
    let refuse = |message: String| -> ! {
        eprintln!("error: {message}");
        std::process::exit(2);
    };
    let faults = args.fault_plan().unwrap_or_else(|m| refuse(m));
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{binary}: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let started = std::time::Instant::now();
    let served = serve(data).unwrap_or_else(|m| refuse(m));
    let service = served.service;
    eprintln!(
        "{service}: data set ready in {:.3} s, RSS {} (peak {})",
        started.elapsed().as_secs_f64(),
        memory("VmRSS:"),
        memory("VmHWM:")
    );
    let options = Options {
        faults,
        document_cache_bytes: args.document_cache_bytes,
        cache_control: args.cache_control,
    };
    let router = router_with(service, served.executors, options);
    let addr = args.listen.unwrap_or(served.default_listen);
    if let Err(e) = runtime.block_on(server::run(service, addr, router, args.drain_timeout)) {
        eprintln!("{binary}: {e:#}");
        std::process::exit(1);
    }
}

/// A memory figure of this process from `/proc/self/status` (`VmRSS:`, `VmHWM:`), in
/// MiB, or `?` where there is no such file.
fn memory(field: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with(field))?;
            let kib: f64 = line[field.len()..]
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()?;
            Some(format!("{:.1} MiB", kib / 1024.0))
        })
        .unwrap_or_else(|| "?".into())
}
