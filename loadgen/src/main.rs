//! The `loadgen` command: parses the command line and runs one subcommand.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use loadgen::bench::report::BenchReport;
use loadgen::cli::{BenchArgs, Cli, Command, CompareArgs, TargetArgs};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench(&args),
        Command::Target(args) => target(&args),
        Command::Matrix(args) => loadgen::matrix::run(&args).map(|_| ()),
        Command::Compare(args) => compare(&args),
        Command::Calibrate(args) => {
            loadgen::matrix::calibration::run(&args.run, loadgen::cli::noise_share(args.noise))
        }
        Command::Peers(args) => match &args.action {
            None => loadgen::matrix::peers::listing::print(),
            Some(loadgen::cli::PeersAction::Install { names }) => {
                loadgen::matrix::peers::listing::install_named(names)
            }
        },
        Command::Render(args) => loadgen::matrix::rerender(&args.dir),
        Command::Report(args) => loadgen::matrix::report::run(&args),
        Command::Netproxy(args) => loadgen::netproxy::run(&args),
        Command::NetproxyAccuracy(args) => loadgen::netproxy::accuracy::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loadgen: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn bench(args: &BenchArgs) -> anyhow::Result<()> {
    let plan = args.plan()?;
    let result = loadgen::bench::engine::run(&plan)?;
    let report = BenchReport::new(&plan, &result);
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
        for w in report.warnings() {
            eprintln!("warning: {w}");
        }
    } else {
        print!("{}", report.to_text());
    }
    if let Some(w) = report.workload.as_ref().filter(|w| w.wrong_answers > 0) {
        anyhow::bail!(
            "WRONG ANSWERS: {} answer(s) could not be right (another caller's data, another entity's); see above",
            w.wrong_answers
        );
    }
    Ok(())
}

fn target(args: &TargetArgs) -> anyhow::Result<()> {
    let body = match &args.body {
        Some(path) => bytes::Bytes::from(
            std::fs::read(path).map_err(|e| anyhow::anyhow!("--body {}: {e}", path.display()))?,
        ),
        None => bytes::Bytes::from_static(loadgen::target_server::OK_BODY),
    };
    let replay = match &args.replay {
        Some(dir) => {
            Some(loadgen::replay::Replay::load(dir).map_err(|e| anyhow::anyhow!("--replay: {e}"))?)
        }
        None => None,
    };
    let replaying = replay.as_ref().map(|r| r.len());
    let setup = loadgen::target_server::Setup {
        default_delay: Duration::from_millis(args.delay_ms),
        body,
        replay,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::try_from(args.threads)?)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| anyhow::anyhow!("--listen {}: {e}", args.listen))?;
        println!("target listening on http://{}", listener.local_addr()?);
        if let (Some(n), Some(dir)) = (replaying, &args.replay) {
            println!("replaying {n} recorded exchanges from {}", dir.display());
        }
        tokio::select! {
            _ = loadgen::target_server::serve(listener, setup) => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(())
    })
}

fn compare(args: &CompareArgs) -> anyhow::Result<()> {
    let a = loadgen::matrix::compare::load_summary(&args.a)?;
    let b = loadgen::matrix::compare::load_summary(&args.b)?;
    print!(
        "{}",
        loadgen::matrix::compare::render(&a, &b, loadgen::cli::noise_share(args.noise))
    );
    if let Some(out) = &args.html {
        loadgen::matrix::compare::write_page(
            &args.a,
            &args.b,
            out,
            loadgen::cli::noise_share(args.noise),
        )?;
        eprintln!("loadgen compare: page written to {}", out.display());
    }
    Ok(())
}
