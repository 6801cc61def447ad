//! `loadgen matrix` on a graph an experiment brings, end to end with real processes:
//! the commerce graph's committed supergraph, two of its subgraphs started by the
//! runner (`[[services.subgraph]]`) and two started by the test and named by URL
//! (`[graph] subgraphs`), an operations file; and the loud refusals: a subgraph that
//! does not answer, an operation that does not validate against the graph, a document
//! without the variables the file gives, and answers carrying errors past the limit.
//!
//! The service binaries (gateway, commerce-service) must be built next to loadgen's
//! (`cargo build --workspace` before `cargo test --workspace`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use loadgen::matrix::services::{free_ports, ServiceProcess};
use loadgen::matrix::summary::Summary;

// Not every helper is used here (the lab's own graph's are not).
#[allow(dead_code)]
mod support;
use support::{gateway_command_line, loadgen, quick_matrix, require_binaries, scratch};

/// Runs that start services take turns: they load both cores.
static SERVICES: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    SERVICES.lock().unwrap_or_else(|p| p.into_inner())
}

/// The folder of the gateway and commerce-service binaries (loadgen's).
fn bin_dir() -> PathBuf {
    require_binaries(&["gateway", "commerce-service"])
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// Commerce subgraphs started by the test (someone else's, as the runner sees them),
/// stopped by PID when dropped.
struct Theirs {
    processes: Vec<ServiceProcess>,
}

impl Theirs {
    fn start(names: &[&str], dir: &Path) -> Theirs {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ports = free_ports(names.len()).unwrap();
        let processes = names
            .iter()
            .zip(ports)
            .map(|(name, port)| {
                let addr = SocketAddr::from(([127, 0, 0, 1], port));
                let mut p = ServiceProcess::spawn(
                    name,
                    &bin_dir().join("commerce-service"),
                    &[
                        "--subgraph".into(),
                        name.to_string(),
                        "--listen".into(),
                        addr.to_string(),
                    ],
                    addr,
                    &dir.join(format!("theirs-{name}.log")),
                )
                .unwrap();
                runtime
                    .block_on(p.wait_healthy(Duration::from_secs(60)))
                    .unwrap();
                p
            })
            .collect();
        Theirs { processes }
    }

    /// `name = "http://…/graphql"` lines for `[graph.subgraphs]`.
    fn urls(&self) -> String {
        self.processes
            .iter()
            .map(|p| format!("{} = \"http://{}/graphql\"\n", p.name, p.addr))
            .collect()
    }
}

/// An operations file: a product by UPC (Zipf over a list), the front page, a write.
const OPERATIONS: &str = r#"seed = 3
[keys]
upc = { distribution = "zipf", exponent = 0.99, values = ["000000000017", "000000000024", "000000000031", "000000000048"] }

[[operation]]
name = "product"
weight = 6
document = '''
query Product($upc: ID!) {
  product(upc: $upc) {
    upc
    name
    price
    shippingEstimate
  }
}'''
variables = { upc = "{upc}" }
reads = [{ at = "product", type = "Product", id = "upc", version = "price", expect_id = "{upc}" }]

[[operation]]
name = "top"
weight = 3
document = 'query Top { topProducts(first: 3) { upc name price inStock } }'
reads = [{ at = "topProducts[]", type = "Product", id = "upc", version = "price" }]

[[operation]]
name = "reprice"
weight = 1
document = 'mutation Reprice($upc: ID!, $price: Int!) { updatePrice(upc: $upc, price: $price) { upc price } }'
variables = { upc = "{upc}", price = "{#version}" }
write = { type = "Product", id = "{upc}" }
"#;

/// An experiment over the committed supergraph: products and inventory started by the
/// runner, `subgraphs` (`[graph.subgraphs]` lines) for the others; `extra` is appended.
fn experiment(subgraphs: &str, extra: &str) -> String {
    format!(
        r#"name = "own-graph"
baseline = "no-cache"

[graph]
supergraph = "{}"
operations = "ops.toml"

[graph.subgraphs]
{subgraphs}
[[services.subgraph]]
name = "products"
binary = "commerce-service"
args = ["--subgraph", "products"]

[[services.subgraph]]
name = "inventory"
binary = "commerce-service"
args = ["--subgraph", "inventory"]

[load]
connections = 8

[profile]
enabled = false

[[config]]
name = "no-cache"

[[config]]
name = "ttl-10"
gateway = ["--ttl", "10"]
{extra}"#,
        repo("commerce-graph/supergraph/supergraph.graphql").display()
    )
}

fn matrix(config: &Path, run: &Path, extra: &[&str]) -> Output {
    Command::new(loadgen())
        .args(["matrix", "--quick", "--duration", "1s", "--warmup", "0s"])
        .args(extra)
        .arg("--config")
        .arg(config)
        .arg("--out")
        .arg(run)
        .arg("--bin-dir")
        .arg(bin_dir())
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The 1-based line of `file` that holds `needle`.
fn line_of(file: &Path, needle: &str) -> usize {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} is not in {}", file.display()))
        + 1
}

#[test]
fn a_graph_it_brings_is_measured_end_to_end() {
    let _turn = one_at_a_time();
    let dir = scratch("own-graph-e2e");
    let theirs = Theirs::start(&["reviews", "accounts"], &dir);
    std::fs::write(dir.join("ops.toml"), OPERATIONS).unwrap();
    let config = dir.join("own.toml");
    std::fs::write(&config, experiment(&theirs.urls(), "")).unwrap();
    let run = dir.join("run");
    quick_matrix(
        &config,
        &run,
        &bin_dir(),
        &["--duration", "1s", "--warmup", "0s"],
    );

    let summary: Summary =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary.configs.len(), 2);
    for c in &summary.configs {
        let m = &c.rounds[0];
        assert!(m.requests > 0, "{}: no requests", c.name);
        assert_eq!(c.errors_total, 0, "{}", c.name);
        let w = m.workload.as_ref().expect("a workload report");
        assert!(w.reads_checked > 0 && w.wrong_answers == 0, "{w:?}");
        assert!(w.writes_acked > 0, "the reprices were acknowledged: {w:?}");
        // CPU of every process the runner started: the gateway, its two subgraphs, loadgen.
        let names: Vec<&str> = m.cpu.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["gateway", "products", "inventory", "loadgen"],
            "{}",
            c.name
        );
        // Two of the subgraphs are someone else's: their requests come from the gateway's counter.
        assert!(
            m.upstream_per_request.is_some_and(|u| u > 0.0),
            "{}",
            c.name
        );
        assert_eq!(
            c.subgraph_args["products"],
            ["--subgraph", "products"],
            "{:?}",
            c.subgraph_args
        );
    }
    let cached = &summary.configs[1].median;
    let cache = cached.cache.as_ref().expect("cache figures at TTL 10");
    assert!(cache.entries.is_some_and(|e| e > 0.0), "{cache:?}");
    assert!(cache.bytes.is_some_and(|b| b > 0.0), "{cache:?}");
    assert!(cache.cross_operation_hits.is_some(), "{cache:?}");
    // The gateway was started from the supergraph, with the URLs of both kinds.
    let line = gateway_command_line(&run, "r1-ttl-10");
    assert!(line.iter().any(|a| a == "--supergraph"), "{line:?}");
    let overrides: Vec<&String> = line
        .iter()
        .filter(|a| {
            a.starts_with("products=")
                || a.starts_with("reviews=")
                || a.starts_with("accounts=")
                || a.starts_with("inventory=")
        })
        .collect();
    assert_eq!(overrides.len(), 4, "{line:?}");
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(
        md.contains("| config | gateway | products | inventory | loadgen |"),
        "{md}"
    );
    assert!(
        md.contains("**Cache memory and reuse across operations**"),
        "{md}"
    );
    drop(theirs);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_subgraph_that_does_not_answer_stops_the_run_before_anything_starts() {
    let dir = scratch("own-graph-unreachable");
    std::fs::write(dir.join("ops.toml"), OPERATIONS).unwrap();
    let dead = free_ports(2).unwrap();
    let config = dir.join("dead.toml");
    let urls = format!(
        "reviews = \"http://127.0.0.1:{}/graphql\"\naccounts = \"http://127.0.0.1:{}/graphql\"\n",
        dead[0], dead[1]
    );
    std::fs::write(&config, experiment(&urls, "")).unwrap();
    let run = dir.join("run");
    let output = matrix(&config, &run, &[]);
    let e = stderr(&output);
    assert!(!output.status.success());
    // The first in name order: accounts.
    let line = line_of(&config, "accounts = ");
    assert!(
        e.contains(&format!(
            "{}:{line}: subgraph \"accounts\" at http://127.0.0.1:{}/graphql is unreachable",
            config.display(),
            dead[1]
        )),
        "{e}"
    );
    assert!(!run.exists(), "nothing started, no run folder");

    // A supergraph's own URL: the refusal names the supergraph's line.
    let text = std::fs::read_to_string(repo("commerce-graph/supergraph/supergraph.graphql"))
        .unwrap()
        .replace("127.0.0.1:3013", &format!("127.0.0.1:{}", dead[0]))
        .replace("127.0.0.1:3014", &format!("127.0.0.1:{}", dead[1]));
    let supergraph = dir.join("supergraph.graphql");
    std::fs::write(&supergraph, text).unwrap();
    let own = experiment("", "").replace(
        &repo("commerce-graph/supergraph/supergraph.graphql")
            .display()
            .to_string(),
        &supergraph.display().to_string(),
    );
    std::fs::write(&config, own).unwrap();
    let output = matrix(&config, &run, &[]);
    let e = stderr(&output);
    assert!(!output.status.success());
    let line = line_of(&supergraph, "name: \"accounts\"");
    assert!(
        e.contains(&format!(
            "{}:{line}: subgraph \"accounts\"",
            supergraph.display()
        )) && e.contains("unreachable"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_operation_that_does_not_validate_stops_the_run_at_its_line() {
    let _turn = one_at_a_time();
    let dir = scratch("own-graph-invalid");
    let theirs = Theirs::start(&["reviews", "accounts"], &dir);
    let ops = dir.join("ops.toml");
    // A field the schema does not have, in the middle of a document.
    std::fs::write(
        &ops,
        OPERATIONS.replace("    shippingEstimate\n", "    shippingEstimat\n"),
    )
    .unwrap();
    let config = dir.join("invalid.toml");
    std::fs::write(&config, experiment(&theirs.urls(), "")).unwrap();
    let run = dir.join("run");
    let output = matrix(&config, &run, &[]);
    let e = stderr(&output);
    assert!(!output.status.success());
    let line = line_of(&ops, "shippingEstimat");
    assert!(
        e.contains(&format!(
            "{}:{line}: operation \"product\" does not validate against the gateway's graph",
            ops.display()
        )),
        "{e}"
    );
    assert!(e.contains("shippingEstimat"), "{e}");
    assert!(!run.join("summary.json").exists());
    // A mutation is validated too (and not run): a variable of the wrong type.
    std::fs::write(
        &ops,
        OPERATIONS.replace("price = \"{#version}\"", "price = \"{version}\""),
    )
    .unwrap();
    let output = matrix(&config, &dir.join("run-2"), &[]);
    let e = stderr(&output);
    assert!(!output.status.success());
    let line = line_of(&ops, "price = \"{version}\"");
    assert!(
        e.contains(&format!(
            "{}:{line}: operation \"reprice\" does not validate",
            ops.display()
        )),
        "{e}"
    );
    drop(theirs);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_document_without_the_variables_the_file_gives_is_refused_at_its_line() {
    let dir = scratch("own-graph-variables");
    let ops = dir.join("ops.toml");
    let text = OPERATIONS
        .replace("query Product($upc: ID!) {", "query Product {")
        .replace("product(upc: $upc) {", "product(upc: \"000000000017\") {");
    std::fs::write(&ops, text).unwrap();
    let config = dir.join("vars.toml");
    std::fs::write(
        &config,
        experiment("reviews = \"http://127.0.0.1:9/graphql\"\n", ""),
    )
    .unwrap();
    let output = matrix(&config, &dir.join("run"), &[]);
    let e = stderr(&output);
    assert!(!output.status.success());
    let line = line_of(&ops, "variables = { upc");
    assert!(
        e.contains(&format!(
            "{}:{line}: workload.operation \"product\": the document declares no variables, but variables gives upc",
            ops.display()
        )),
        "{e}"
    );
    // In a loadgen bench --workload of the same file, the same refusal.
    let output = Command::new(loadgen())
        .args([
            "bench",
            "--url",
            "http://127.0.0.1:9/graphql",
            "-d",
            "1s",
            "--workload",
        ])
        .arg(&ops)
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains(&format!("{}:{line}:", ops.display())),
        "{}",
        stderr(&output)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn answers_with_errors_past_the_limit_stop_the_run_and_say_so() {
    let _turn = one_at_a_time();
    let dir = scratch("own-graph-errors");
    let theirs = Theirs::start(&["reviews", "accounts"], &dir);
    std::fs::write(dir.join("ops.toml"), OPERATIONS).unwrap();
    let config = dir.join("errors.toml");
    // Inventory fails a third of its answers: every shippingEstimate it owes is an
    // error. Answers are not checked (`check = false`), so the file's limit decides.
    let faulty = r#"
[[config]]
name = "faulty"
check = false
max_error_rate = 0.02
gateway = ["--ttl", "0"]
subgraphs = { inventory = ["--error-rate", "0.35"] }
"#;
    std::fs::write(&config, experiment(&theirs.urls(), faulty)).unwrap();
    let run = dir.join("run");
    let output = matrix(&config, &run, &[]);
    let e = stderr(&output);
    assert!(!output.status.success(), "{e}");
    assert!(
        e.contains("STOPPED: round 1, faulty:") && e.contains("past the limit of 2.0%"),
        "{e}"
    );
    assert!(e.contains("GraphQL"), "{e}");
    // What was measured is kept, and says so.
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(md.contains("**STOPPED**: round 1, faulty"), "{md}");
    let row = md.lines().find(|l| l.starts_with("| faulty |")).unwrap();
    assert!(row.contains("% of") || row.contains("%: GraphQL"), "{row}");
    let page = std::fs::read_to_string(run.join("index.html")).unwrap();
    assert!(
        page.contains("STOPPED") && page.contains("GraphQL"),
        "the page says so"
    );

    // With the limit raised on the command line, the run goes through and reports them.
    let run = dir.join("run-through");
    let output = matrix(&config, &run, &["--max-error-rate", "1"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary: Summary =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let faulty = summary.configs.iter().find(|c| c.name == "faulty").unwrap();
    assert!(faulty.rounds[0].errors.graphql > 0);
    assert_eq!(faulty.max_error_rate, Some(1.0));
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    let row = md.lines().find(|l| l.starts_with("| faulty |")).unwrap();
    assert!(row.contains("%: GraphQL"), "{row}");
    let page = std::fs::read_to_string(run.join("index.html")).unwrap();
    assert!(
        page.contains("GraphQL errors"),
        "the page warns of the failed requests"
    );
    drop(theirs);
    std::fs::remove_dir_all(&dir).ok();
}
