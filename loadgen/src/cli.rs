//! The command line: subcommands, flags, and their checks.
//!
//! Parsing errors come from clap and name the flag; checks that need more than one flag
//! or a file happen in [`BenchArgs::plan`] and name the flag too.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::bench::engine::{BenchPlan, StopRule};
use crate::bench::request_template::{BodySource, RequestTemplate};

#[derive(Debug, Parser)]
#[command(
    name = "loadgen",
    version,
    about = "Load generator and experiment-matrix runner of graphql-cache-lab"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load one URL (closed loop, or open loop with --rate) and report latency and errors.
    Bench(BenchArgs),
    /// Run an experiment file: every configuration, in interleaved rounds.
    Matrix(MatrixArgs),
    /// Print two matrix runs side by side (with --html, write them as a page).
    Compare(CompareArgs),
    /// Read an A/A run (experiments/a-a.toml) and report how often the intervals and
    /// `compare`'s verdicts call a difference where none exists, and how wide they are.
    Calibrate(CalibrateArgs),
    /// List the field's gateways the matrix can run in place of the lab's (`peer = "NAME"`),
    /// or install them (`loadgen peers install [NAME…]`).
    Peers(PeersArgs),
    /// Write a run's summary.md, charts and page again from its summary.json and manifest.json.
    Render(RenderArgs),
    /// Write run pages (RUN/index.html) and the results index (index.html beside the runs)
    /// from the files in the run folders.
    Report(ReportArgs),
    /// Serve the calibration target (fixed answers, known delays) for comparisons.
    Target(TargetArgs),
    /// A TCP proxy that delays every byte by half an RTT each way (latency without netem).
    Netproxy(NetproxyArgs),
    /// Measure how close the RTT `netproxy` adds is to its setting on this machine, and
    /// its CPU per chunk (scripts/netproxy-accuracy.sh records a run).
    NetproxyAccuracy(NetproxyAccuracyArgs),
}

/// `loadgen bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// URL to load, http only (e.g. http://127.0.0.1:3000/graphql). Repeatable: with
    /// several, connection i goes to URL i % n (round robin).
    #[arg(long, required = true)]
    pub url: Vec<String>,
    /// Keep-alive connections, each with one request in flight.
    #[arg(short = 'c', long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub connections: u64,
    /// Worker threads [default: all cores].
    #[arg(short = 't', long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub threads: Option<u64>,
    /// Length of the measured window (e.g. 10s, 500ms, 2m) [default: 10s].
    #[arg(short = 'd', long, value_parser = parse_duration, conflicts_with = "requests")]
    pub duration: Option<Duration>,
    /// Stop after this many requests instead of after a duration.
    #[arg(short = 'n', long, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Load sent before the measured window, not counted.
    #[arg(long, value_parser = parse_duration_or_zero, default_value = "0s")]
    pub warmup: Duration,
    /// HTTP method [default: POST with a body, GET without].
    #[arg(short = 'm', long)]
    pub method: Option<String>,
    /// Request header `Name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Send this file's bytes as the body.
    #[arg(long, conflicts_with = "query_file")]
    pub body_file: Option<PathBuf>,
    /// Send this GraphQL document as `{"query": ...}` JSON.
    #[arg(long)]
    pub query_file: Option<PathBuf>,
    /// GraphQL variables as a JSON object (with --query-file).
    #[arg(long, requires = "query_file")]
    pub variables: Option<String>,
    /// The operation of the --query-file document to run (`operationName`), for a
    /// document of several.
    #[arg(long, requires = "query_file", conflicts_with = "unique_literals")]
    pub operation_name: Option<String>,
    /// Replace every `{{n}}` of the document, the variables (or the --body-file) by a
    /// number unique to each request of the run: every request is a new document
    /// (or new variables).
    #[arg(long)]
    pub unique_literals: bool,
    /// Send the `[workload]` of this TOML file (an experiment file, or one holding only
    /// that table; or an operations file, or the one an experiment's `[graph]` names)
    /// instead of one request: a weighted mix of operations with keys drawn
    /// from distributions, writes that carry versions, and every answer checked for
    /// stale reads and wrong answers (format in loadgen/README.md).
    #[arg(long, conflicts_with_all = ["body_file", "query_file", "unique_literals", "method"])]
    pub workload: Option<PathBuf>,
    /// With --workload: replace the file's seed.
    #[arg(long, requires = "workload")]
    pub seed: Option<u64>,
    /// Give up on a request after this long and count a timeout.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub timeout: Duration,
    /// Open loop: send this many requests per second in total, on a fixed schedule.
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Print one JSON object (schema in loadgen/README.md) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Do not draw the live progress line.
    #[arg(long)]
    pub no_progress: bool,
}

impl BenchArgs {
    /// Validate and read everything the run needs.
    pub fn plan(&self) -> anyhow::Result<BenchPlan> {
        let workload = match &self.workload {
            None => None,
            Some(path) => {
                let mut workload = crate::workload::load::any(path)
                    .map_err(|e| anyhow::anyhow!("--workload {}: {e}", path.display()))?;
                if let Some(seed) = self.seed {
                    workload.seed = seed;
                }
                Some(std::sync::Arc::new(workload))
            }
        };
        let body = match (&self.body_file, &self.query_file) {
            (Some(path), None) => BodySource::Raw(
                std::fs::read(path)
                    .map_err(|e| anyhow::anyhow!("--body-file {}: {e}", path.display()))?,
            ),
            (None, Some(path)) => {
                let query = std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("--query-file {}: {e}", path.display()))?;
                match &self.operation_name {
                    None => BodySource::GraphQl {
                        query,
                        variables: self.variables.clone(),
                    },
                    Some(name) => {
                        let mut body = serde_json::Map::new();
                        body.insert("query".into(), query.into());
                        body.insert("operationName".into(), name.clone().into());
                        if let Some(v) = &self.variables {
                            let value: serde_json::Value = serde_json::from_str(v)
                                .map_err(|e| anyhow::anyhow!("--variables: {e}"))?;
                            body.insert("variables".into(), value);
                        }
                        BodySource::Json(serde_json::Value::Object(body).to_string().into_bytes())
                    }
                }
            }
            // A workload renders its own bodies; the template keeps the JSON content type.
            (None, None) if workload.is_some() => BodySource::GraphQl {
                query: String::new(),
                variables: None,
            },
            (None, None) => BodySource::Empty,
            (Some(_), Some(_)) => {
                anyhow::bail!("--body-file and --query-file are mutually exclusive")
            }
        };
        let templates = self
            .url
            .iter()
            .map(|url| {
                RequestTemplate::with_numbering(
                    url,
                    self.method.as_deref(),
                    &self.headers,
                    body.clone(),
                    self.unique_literals,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let stop = match (self.requests, self.duration) {
            (Some(n), _) => StopRule::Requests(n),
            (None, Some(d)) => StopRule::After(d),
            (None, None) => StopRule::After(Duration::from_secs(10)),
        };
        Ok(BenchPlan {
            templates,
            connections: usize::try_from(self.connections)?,
            threads: match self.threads {
                Some(t) => usize::try_from(t)?,
                None => crate::proc_usage::available_cores(),
            },
            stop,
            warmup: self.warmup,
            timeout: self.timeout,
            rate: self.rate,
            progress: !self.no_progress && !self.json,
            progress_bars: None,
            workload,
        })
    }
}

/// `loadgen matrix`.
#[derive(Debug, Clone, Args)]
pub struct MatrixArgs {
    /// Experiment file (TOML).
    #[arg(long, default_value = "experiments/seed.toml")]
    pub config: PathBuf,
    /// Directory for this run's files [default: results/RUN-ID].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A short run for CI: one round, a few seconds per configuration.
    #[arg(long)]
    pub quick: bool,
    /// Rounds; every round runs every configuration once, interleaved [default: 5, 1 with --quick; chosen by the A/A calibration, docs/matrix.md].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: Option<u32>,
    /// Measured window per configuration and round [default: 10s, 3s with --quick].
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Warm-up before each measured window [default: 2s, 1s with --quick].
    #[arg(long, value_parser = parse_duration_or_zero)]
    pub warmup: Option<Duration>,
    /// Where the gateway, user-service and post-service binaries are [default: next to loadgen].
    #[arg(long)]
    pub bin_dir: Option<PathBuf>,
    /// Install the peers the experiment runs (`peer = "NAME"`) that are not installed
    /// yet, instead of refusing them (`scripts/run-matrix.sh` passes it).
    #[arg(long)]
    pub install_peers: bool,
    /// Run only these configurations of the file (comma-separated names).
    #[arg(long, value_delimiter = ',', conflicts_with = "skip")]
    pub only: Vec<String>,
    /// Run every configuration of the file but these (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
    /// Stop the run when more than this share of a round's answers carry errors
    /// (0 to 1; 1: never), over every configuration's `max_error_rate` [default: the
    /// file's, else 0.01 for configurations whose answers are checked].
    #[arg(long, value_parser = parse_share)]
    pub max_error_rate: Option<f64>,
}

/// A share from 0 to 1.
fn parse_share(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is not a share from 0 to 1"))
    }
}

impl MatrixArgs {
    /// Refuses flags that would cancel one another: `--quick` sets the rounds and
    /// both windows, so with `--rounds`, `--duration` and `--warmup` all given it would
    /// do nothing but mark a full run as indicative.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.quick && self.rounds.is_some() && self.duration.is_some() && self.warmup.is_some() {
            anyhow::bail!(
                "--quick and --rounds, --duration and --warmup: the three replace everything --quick sets, so it would only mark the run as quick; drop --quick or one of them"
            );
        }
        Ok(())
    }
}

/// `loadgen compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The first run: its directory or its summary.json.
    pub a: PathBuf,
    /// The second run: its directory or its summary.json.
    pub b: PathBuf,
    /// Also write the comparison as a page to this file (e.g. compare.html): per
    /// configuration A, B, B/A and every round, opened from disk.
    #[arg(long, value_name = "OUT")]
    pub html: Option<PathBuf>,
    /// The noise threshold in percent: a change counts as improved or regressed only
    /// when its whole 95% interval lies beyond it [default: 2].
    #[arg(long, value_name = "PERCENT", value_parser = noise_percent)]
    pub noise: Option<f64>,
}

/// `--noise` as a share (2% → 0.02), or the default.
pub fn noise_share(noise: Option<f64>) -> f64 {
    noise.map_or(crate::matrix::compare::DEFAULT_NOISE, |p| p / 100.0)
}

fn noise_percent(text: &str) -> Result<f64, String> {
    match text.trim_end_matches('%').parse::<f64>() {
        Ok(p) if p.is_finite() && (0.0..100.0).contains(&p) => Ok(p),
        _ => Err(format!(
            "--noise {text}: a percentage from 0 to under 100, e.g. 2"
        )),
    }
}

/// `loadgen peers`.
#[derive(Debug, Clone, Args)]
pub struct PeersArgs {
    #[command(subcommand)]
    pub action: Option<PeersAction>,
}

/// What `loadgen peers` does besides listing.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum PeersAction {
    /// Install peers (all when none is named): `npm ci` of each one's committed lock.
    Install {
        /// Peers to install, by name.
        names: Vec<String>,
    },
}

/// `loadgen calibrate`.
#[derive(Debug, Clone, Args)]
pub struct CalibrateArgs {
    /// The A/A run: its directory (results/RUN-ID) or its summary.json.
    pub run: PathBuf,
    /// The noise threshold in percent, as `loadgen compare --noise` [default: 2].
    #[arg(long, value_name = "PERCENT", value_parser = noise_percent)]
    pub noise: Option<f64>,
}

/// `loadgen report`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Matrix run folders (results/RUN-ID): each gets its index.html, and the folder
    /// holding them its index.html of every run.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub dirs: Vec<PathBuf>,
    /// Every matrix run in this folder (e.g. results) gets its page, and the folder its
    /// index.html.
    #[arg(long, value_name = "RESULTS")]
    pub all: Option<PathBuf>,
    /// Draw each run's charts again from its summary.json first (after loadgen's charts
    /// changed); summary.md and the measurements are left as they are.
    #[arg(long)]
    pub charts: bool,
}

/// `loadgen render`.
#[derive(Debug, Clone, Args)]
pub struct RenderArgs {
    /// The run's directory (results/RUN-ID).
    pub dir: PathBuf,
}

/// `loadgen target`.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// Delay of every answer on paths without their own behaviour, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u64,
    /// Runtime worker threads of the server.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub threads: u64,
    /// Answer this file's bytes (as application/json) instead of `{"data":{"ok":true}}`,
    /// on every path without a body of its own: a captured answer of any size.
    #[arg(long, value_name = "FILE")]
    pub body: Option<std::path::PathBuf>,
    /// Answer a POST to /NAME with what the subgraph NAME answered that same request
    /// body in this folder's recording (scripts/lib/exchange_recorder.py's
    /// NNN-NAME.request.json and NNN-NAME.answer.json), and 404 to any request it does
    /// not hold: a graph's subgraphs replayed at the cost of bare exchanges.
    #[arg(long, value_name = "DIR", conflicts_with = "body")]
    pub replay: Option<std::path::PathBuf>,
}

/// `loadgen netproxy`.
#[derive(Debug, Clone, Args)]
pub struct NetproxyArgs {
    /// Address to listen on (port 0: any free port; the first line printed names it).
    #[arg(long)]
    pub listen: std::net::SocketAddr,
    /// Where to forward, HOST:PORT.
    #[arg(long)]
    pub to: String,
    /// Round-trip time to add: half of it in each direction (e.g. 500us, 2ms; 0 forwards
    /// without delay).
    #[arg(long, value_parser = parse_duration_or_zero)]
    pub rtt: Duration,
    /// Standard deviation of a normal sample added to each chunk's one-way delay (order
    /// is kept: a chunk never overtakes the one ahead of it).
    #[arg(long, value_parser = parse_duration_or_zero, default_value = "0s")]
    pub jitter: Duration,
    /// Seed of the jitter samples (one stream per connection and direction).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Most connections proxied at once; more are refused (reset).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub max_connections: u64,
}

/// `loadgen netproxy-accuracy`.
#[derive(Debug, Clone, Args)]
pub struct NetproxyAccuracyArgs {
    /// Round-trip times to measure (repeatable).
    #[arg(long, value_parser = parse_duration, default_values = ["500us", "1ms", "5ms"])]
    pub rtt: Vec<Duration>,
    /// Concurrent connections pinging at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub connections: u64,
    /// Measured pings per connection, per setting and round (half before, half after
    /// the other path's).
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(2..=100_000))]
    pub pings: u64,
    /// Pause between two pings of a connection.
    #[arg(long, value_parser = parse_duration_or_zero, default_value = "1ms")]
    pub pause: Duration,
    /// Rounds; each measures every setting once, the order rotating.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Also write every measurement, as one JSON object, to this file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// A positive duration: `10s`, `500ms`, `2m`, `1.5s`, `250us`, `500000ns`, or bare seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = parse_duration_or_zero(text)?;
    if d.is_zero() {
        return Err("must be more than zero".into());
    }
    Ok(d)
}

/// Like [`parse_duration`], but zero is allowed.
pub fn parse_duration_or_zero(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 10s, 500ms or 2m"))?;
    let seconds = match unit.trim() {
        "" | "s" | "sec" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "ns" => value / 1e9,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} (use ns, us, ms, s, m or h)"
            ))
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

fn parse_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if !(rate.is_finite() && rate > 0.0) {
        return Err("must be a positive number of requests per second".into());
    }
    Ok(rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("2500ns"), Ok(Duration::from_nanos(2500)));
        assert_eq!(parse_duration_or_zero("0s"), Ok(Duration::ZERO));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("3 days").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn bad_flags_are_named() {
        let err = Cli::try_parse_from([
            "loadgen",
            "bench",
            "--url",
            "http://127.0.0.1:1/",
            "--duration",
            "soon",
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("--duration"), "{err}");
        let err = Cli::try_parse_from([
            "loadgen",
            "bench",
            "--url",
            "http://127.0.0.1:1/",
            "--rate",
            "0",
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("--rate"), "{err}");
        let err = Cli::try_parse_from([
            "loadgen",
            "bench",
            "--url",
            "http://127.0.0.1:1/",
            "-c",
            "0",
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("--connections"), "{err}");
        let err = Cli::try_parse_from([
            "loadgen",
            "bench",
            "--url",
            "http://x/",
            "-d",
            "1s",
            "-n",
            "5",
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("--requests") || err.contains("--duration"),
            "{err}"
        );
    }

    #[test]
    fn missing_files_are_named() {
        let Command::Bench(args) = Cli::try_parse_from([
            "loadgen",
            "bench",
            "--url",
            "http://127.0.0.1:1/graphql",
            "--query-file",
            "/nonexistent/q.graphql",
        ])
        .unwrap()
        .command
        else {
            panic!("expected bench")
        };
        let err = args.plan().unwrap_err().to_string();
        assert!(err.starts_with("--query-file"), "{err}");
    }
}
