//! `gateway`: the federating GraphQL gateway of graphql-cache-lab. This binary parses
//! the command line ([`gateway::cli`]), starts the runtimes ([`gateway::runtime`]: one
//! current-thread runtime per core, or a pool), and
//! serves until SIGINT or SIGTERM, draining; or runs a subcommand.

use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use gateway::caching::requests::RequestStrategy;
use gateway::caching::RedisTarget;
use gateway::cli::{Cli, Command, ComposeArgs, RedisGcArgs};
use gateway::runtime::Runtimes;
use gateway::server::connections::ServeOptions;
use gateway::server::load::LoadLimits;
use gateway::startup::{Backoff, GatewayConfig};

/// The `mimalloc` build's allocator (docs/cpu-and-peers.md, "Allocator and hashing").
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "gateway=info,cache_core=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let shape = cli.runtime_shape();
    let runtimes = match Runtimes::start(shape) {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "gateway: cannot start the runtime ({}): {e}",
                shape.describe()
            );
            std::process::exit(1);
        }
    };
    let code = runtimes.block_on(main_in_runtime(cli, &matches, &runtimes));
    drop(runtimes);
    std::process::exit(code);
}

/// Whether the flag whose clap id is `id` was given on the command line.
fn given_in(matches: &ArgMatches, id: &str) -> bool {
    matches.value_source(id) == Some(ValueSource::CommandLine)
}

/// Everything `main` does once the runtime runs: the exit code.
async fn main_in_runtime(cli: Cli, matches: &ArgMatches, runtimes: &Runtimes) -> i32 {
    match &cli.command {
        Some(Command::RedisGc(args)) => return redis_gc(args).await,
        Some(Command::Strategies) => {
            print!("{}", cache_core::strategies::catalogue());
            print!("\n{}", RequestStrategy::catalogue());
            return 0;
        }
        Some(Command::Compose(args)) => return compose(args).await,
        None => {}
    }
    let config = match cli.config(&|id| given_in(matches, id)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gateway: {e}");
            return 2;
        }
    };
    if let Err(e) = run(&cli, config, runtimes).await {
        eprintln!("gateway: {e:#}");
        return 1;
    }
    0
}

async fn run(cli: &Cli, config: GatewayConfig, runtimes: &Runtimes) -> anyhow::Result<()> {
    let app = gateway::startup::build_app(&config).await?;
    let listener = tokio::net::TcpListener::bind(cli.listen)
        .await
        .map_err(|e| anyhow::anyhow!("--listen {}: cannot bind: {e}", cli.listen))?;
    eprintln!(
        "gateway listening on http://{}/graphql ({})",
        listener.local_addr()?,
        cli.runtime_shape().describe()
    );
    if let Some(admin) = cli.admin_listen {
        let listener = tokio::net::TcpListener::bind(admin)
            .await
            .map_err(|e| anyhow::anyhow!("--admin-listen {admin}: cannot bind: {e}"))?;
        eprintln!(
            "gateway admin on http://{}/invalidate",
            listener.local_addr()?
        );
        let routes = gateway::server::admin::router(app.clone());
        let timeout = config.requests.header_read_timeout;
        // It lives as long as the process: the drain below is the public port's.
        tokio::spawn(gateway::server::serve(
            listener,
            routes,
            timeout,
            std::future::pending(),
        ));
    }
    let router = gateway::server::router_with_limits(
        app.clone(),
        LoadLimits {
            max_connections: cli.max_connections,
            max_requests: cli.max_concurrent_requests,
        },
    );
    let options = ServeOptions {
        header_read_timeout: config.requests.header_read_timeout,
        drain_timeout: cli.drain_timeout,
        shards: runtimes.shards(),
    };
    let shards = std::sync::Arc::new(options.shards.clone());
    app.metrics
        .add_source(&shards, gateway::server::connections::shard_gauges);
    let drained = gateway::server::serve_draining(listener, router, options, stop_signal()).await;
    let answered = app.metrics.requests_answered();
    if drained.cut == 0 {
        eprintln!("gateway: drained, every request answered ({answered} GraphQL requests in all)");
    } else {
        eprintln!(
            "gateway: --drain-timeout {:?} ran out; closed {} connection(s) with requests still in progress ({answered} GraphQL requests answered in all)",
            cli.drain_timeout, drained.cut
        );
    }
    Ok(())
}

/// `gateway compose`: the supergraph the gateway composes for these subgraphs.
async fn compose(args: &ComposeArgs) -> i32 {
    let Ok(deadline) = Duration::try_from_secs_f64(args.startup_timeout_secs) else {
        eprintln!(
            "gateway compose: --startup-timeout-secs must be a non-negative number of seconds"
        );
        return 2;
    };
    let backoff = Backoff {
        deadline,
        first: Duration::from_millis(50),
        max: Duration::from_secs(2),
    };
    match gateway::startup::compose(&args.subgraphs, &backoff).await {
        Ok(sdl) => {
            print!("{sdl}");
            0
        }
        Err(e) => {
            eprintln!("gateway compose: {e:#}");
            1
        }
    }
}

/// `gateway redis-gc`: one lazy chunk or one strict pass; prints its report and
/// returns the exit code.
async fn redis_gc(args: &RedisGcArgs) -> i32 {
    use cache_core::storage::GcMode;
    let Ok(timeout) = Duration::try_from_secs_f64(args.timeout) else {
        eprintln!("gateway redis-gc: --timeout must be a non-negative number of seconds");
        return 2;
    };
    let target = match (&args.redis, &args.redis_cluster) {
        (Some(url), _) => RedisTarget::Single(url.clone()),
        (None, Some(cluster)) => cluster.clone(),
        (None, None) => {
            eprintln!("gateway redis-gc: give --redis URL or --redis-cluster URL[,URL...]");
            return 2;
        }
    };
    let store = match target.store_builder().command_timeout(timeout).build() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gateway redis-gc: {}: {e}", target.describe());
            return 2;
        }
    };
    let mode = if args.strict {
        GcMode::Strict
    } else {
        store.resume_gc_at(args.cursor);
        GcMode::Lazy {
            chunk: usize::try_from(args.chunk).unwrap_or(usize::MAX),
        }
    };
    match store.gc(mode).await {
        Ok(r) => {
            println!(
                "redis-gc ({}): scanned {} reference sets with {} members; removed {} members of expired entries and {} emptied sets; cursor {} ({})",
                if args.strict { "strict" } else { "lazy" },
                r.scanned_sets,
                r.scanned_members,
                r.removed_members,
                r.removed_sets,
                r.cursor,
                if r.cursor == 0 {
                    "the pass is complete"
                } else {
                    "continue with --cursor"
                }
            );
            0
        }
        Err(e) => {
            eprintln!("gateway redis-gc: {}: {e}", target.describe());
            1
        }
    }
}

/// Resolves on SIGINT or SIGTERM, so the matrix runner can stop the gateway by PID.
async fn stop_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! { _ = tokio::signal::ctrl_c() => {}, _ = term.recv() => {} }
}
