//! A run of a graph whose type and field names hold `<script>`, and whose every other
//! name a page shows does too: configurations, experiment, run id, descriptions and
//! arguments, subgraphs, error paths and messages, cache namespaces (`Type.field`),
//! strategies, wrong answers, flamegraph notes, the manifest's fields, and the folders of
//! the results (its workload's operation names as well, which no page shows). Its files
//! are written as a run leaves them, its charts, its page, the results index and a
//! comparison page as `loadgen render` and `loadgen compare --html` write them; each of
//! those names must reach them, and only as text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::bench::timeline::Second;
use crate::matrix::cache_figures::{CacheFigures, NamespaceFigures};
use crate::matrix::sampling::ProcessCpu;
use crate::matrix::summary::fixtures::{self, measurement};
use crate::matrix::summary::{Measurement, Summary};
use crate::workload::recorder::OperationReport;
use crate::workload::WorkloadReport;

/// A script named after the place it was put in: `<script>type()</script>`.
fn script(place: &str) -> String {
    format!("<script>{place}()</script>")
}

/// The same as a page must show it.
fn escaped(place: &str) -> String {
    format!("&lt;script&gt;{place}()&lt;/script&gt;")
}

/// The graph's type and field, the one its errors and cache namespaces name.
fn type_name() -> String {
    format!("Product{}", script("type"))
}
fn field_name() -> String {
    format!("price{}", script("field"))
}

/// One round of `config` with every figure that carries a name.
fn round(config: &str, rps: f64) -> Measurement {
    let mut m = measurement(1, config, rps, 10.0);
    let path = format!("product.{}", field_name());
    m.errors.graphql = 3;
    m.error_paths.insert(path.clone(), 3);
    m.error_examples.insert(
        path,
        format!(
            "{}.{} failed: {}",
            type_name(),
            field_name(),
            script("message")
        ),
    );
    m.cpu = vec![
        ProcessCpu {
            name: "gateway".into(),
            cpu_seconds: Some(9.0),
            cores: Some(0.9),
            us_per_request: Some(19.6),
        },
        ProcessCpu {
            name: format!("inventory{}", script("process")),
            cpu_seconds: Some(2.0),
            cores: Some(0.2),
            us_per_request: Some(4.0),
        },
    ];
    m.strategy_decisions
        .insert(format!("{}/store", script("strategy")), 5.0);
    m.timeline = (0..3)
        .map(|second| Second {
            second,
            requests: rps as u64,
            errors: 1,
            p99_ms: 10.0,
            upstream_requests: Some(rps * 4.0),
        })
        .collect();
    let namespace = format!("{}.{}", type_name(), field_name());
    let figures = NamespaceFigures {
        entries: Some(5.0),
        bytes: Some(500.0),
        hits: Some(8.0),
        cross_operation_hits: Some(4.0),
        cross_operation_in_flight: Some(1.0),
    };
    m.cache = Some(CacheFigures {
        entries: Some(5.0),
        bytes: Some(500.0),
        cross_operation_hits: Some(4.0),
        cross_operation_in_flight: Some(1.0),
        by_namespace: BTreeMap::from([(namespace, figures)]),
    });
    m.cache_hits = Some(8.0);
    m.workload = Some(WorkloadReport {
        seed: 1,
        reads_checked: 100,
        stale_reads: 1,
        stale_fraction: Some(0.01),
        stale_age_ms: Default::default(),
        out_of_date_ms: Default::default(),
        wrong_answers: 1,
        wrong_answer_examples: vec![format!("{} for u1", script("wrong"))],
        writes_acked: 0,
        writes_failed: 0,
        write_rate: None,
        operations: vec![OperationReport {
            name: script("operation"),
            write: false,
            requests: rps as u64,
            share: Some(1.0),
            requests_per_sec: rps,
            errors: 3,
            stale_reads: 1,
            p50_ms: 5.0,
            p99_ms: 10.0,
        }],
        per_url: Vec::new(),
    });
    m
}

/// The run: two configurations, every name of it hostile.
fn summary(run_id: &str, rps: [f64; 2]) -> Summary {
    let baseline = format!("no-cache{}", script("baseline"));
    let cached = format!("ttl-0{}", script("config"));
    let mut ms = vec![round(&baseline, rps[0]), round(&cached, rps[1])];
    crate::matrix::aggregation::set_ratios(&mut ms, &|_| baseline.clone());
    let mut s = fixtures::summary(&format!("seed{}", script("experiment")), &baseline, ms);
    s.run_id = format!("{run_id}{}", script("run"));
    for c in &mut s.configs {
        c.description = Some(script("description"));
        c.gateway_args = vec!["--ttl".into(), script("argument")];
        c.subgraph_args = BTreeMap::from([(
            format!("inventory{}", script("subgraph")),
            vec![script("subgraph-argument")],
        )]);
        c.network = format!("redis: 2 ms {}", script("network"));
        c.flamegraph = Some(format!("flame-{}.svg", script("flamegraph")));
        c.flamegraph_note = Some(script("note"));
    }
    s.derive_warnings();
    // What the runner writes when a round's errors stop the run (`matrix::run`).
    s.warnings.insert(
        0,
        format!(
            "**STOPPED**: round 1, {cached}: 3 of the answers carried errors; e.g. at `product.{}` (3 answers): {:?}. The rounds before are kept.",
            field_name(),
            script("example")
        ),
    );
    s
}

/// A manifest whose every field a page shows is hostile.
fn manifest(run_id: &str) -> serde_json::Value {
    serde_json::json!({
        "schema": "loadgen.manifest/1", "run_id": format!("{run_id}{}", script("manifest-run")),
        "timestamp": "2026-12-01T05:35:50Z",
        "git": {"commit": script("commit"), "dirty": true},
        "rustc": format!("rustc {}", script("rustc")), "loadgen_version": script("version"),
        "cpu_model": format!("Xeon {}", script("cpu")), "cores": 2,
        "kernel": script("kernel"), "experiment_file": format!("experiments/{}.toml", script("file")),
        "experiment": format!("name = \"{}\"\n[graph]\nsupergraph = \"{}\"\n", script("experiment-text"), script("graph")),
        "arguments": ["loadgen", "matrix", "--only", script("command")],
        "settings": {"rounds": 1, "duration_s": 10.0, "warmup_s": 2.0, "quick": true},
        "binaries": [{"name": script("binary"), "path": format!("target/{}", script("binary-path")),
            "size_bytes": 1048576, "modified_unix_s": 1796103350u64}]
    })
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A matrix run's folder as the runner leaves it (summary.json, manifest.json).
fn matrix_run(results: &Path, name: &str, rps: [f64; 2]) -> PathBuf {
    let dir = results.join(name);
    let s = summary(name, rps);
    write(
        &dir.join("summary.json"),
        &serde_json::to_string(&s).unwrap(),
    );
    write(&dir.join("manifest.json"), &manifest(name).to_string());
    dir
}

/// `html` shows no script, and shows each of `places` escaped.
fn assert_escaped(what: &str, html: &str, places: &[&str]) {
    assert!(
        !html.to_ascii_lowercase().contains("<script"),
        "{what}: a raw <script>: {html}"
    );
    for place in places {
        assert!(
            html.contains(&escaped(place)),
            "{what}: {place} is not shown escaped: {html}"
        );
    }
}

#[test]
fn a_graph_with_script_names_is_shown_as_text_on_every_page() {
    let base = std::env::temp_dir().join(format!("loadgen-hostile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let results = base.join("results");
    // Folder names hold scripts too (a file name cannot hold `/`, so no closing tag).
    let a = matrix_run(
        &results,
        "20261201-053550-<script>folder()<script>",
        [1000.0, 4600.0],
    );
    let b = matrix_run(&results, "20261202-053550-b", [1010.0, 5600.0]);
    let script_run = results.join("20261201-070000-<script>script-run()<script>");
    write(
        &script_run.join("summary.txt"),
        &format!(
            "commit {} (dirty)\nmachine: {}\nwarning: {}\n**Verdict: {}**\n",
            script("script-commit"),
            script("script-machine"),
            script("script-warning"),
            script("verdict")
        ),
    );
    let stopped = results.join("20261201-060000");
    write(
        &stopped.join(crate::matrix::reaper::INCOMPLETE),
        &format!("stopped by {}\n", script("incomplete")),
    );
    let mut incomplete = manifest("20261201-060000");
    incomplete["experiment"] = format!("name = \"{}\"\n", script("incomplete-experiment")).into();
    write(&stopped.join("manifest.json"), &incomplete.to_string());

    // Each matrix run: summary.md, charts, its page and the index, as `loadgen render`.
    crate::matrix::rerender(&b).unwrap();
    crate::matrix::rerender(&a).unwrap();
    let read = |path: &Path| std::fs::read_to_string(path).unwrap();

    // The charts the lab drew hold the names as escaped text, and are inlined.
    for chart in ["chart.svg", "timeline.svg", "tradeoff.svg"] {
        let svg = read(&a.join(chart));
        assert_escaped(chart, &svg, &["config", "baseline", "experiment", "run"]);
    }
    let page = read(&a.join("index.html"));
    for chart in ["chart.svg", "timeline.svg", "tradeoff.svg"] {
        assert!(
            page.contains(&format!("<figure id=\"{chart}\"><svg")),
            "{chart} not inlined: {page}"
        );
    }
    assert_escaped(
        "the run's page",
        &page,
        &[
            // The run and its configurations.
            "experiment",
            "run",
            "config",
            "baseline",
            "description",
            "argument",
            "subgraph",
            "subgraph-argument",
            "network",
            "flamegraph",
            "note",
            // The graph's type and field in error paths, messages and cache namespaces.
            "type",
            "field",
            "example",
            "process",
            "strategy",
            "wrong",
            // The manifest.
            "manifest-run",
            "commit",
            "rustc",
            "version",
            "cpu",
            "kernel",
            "file",
            "experiment-text",
            "graph",
            "command",
            "binary",
            "binary-path",
        ],
    );
    let namespace = format!("Product{}.price{}", escaped("type"), escaped("field"));
    assert!(
        page.contains(&namespace),
        "the namespace Type.field: {page}"
    );

    let index = read(&results.join("index.html"));
    assert_escaped(
        "the results index",
        &index,
        &[
            "experiment",
            "config",
            "cpu",
            "script-machine",
            "verdict",
            "incomplete",
            "incomplete-experiment",
        ],
    );
    for folder in ["folder", "script-run"] {
        let name = format!("&lt;script&gt;{folder}()&lt;script&gt;");
        assert!(index.contains(&name), "{folder}: {index}");
    }
    // The commit column shows a commit's first characters: `<script>co`, `<script>sc`.
    for commit in ["co", "sc"] {
        let shown = format!("<code>&lt;script&gt;{commit}</code>");
        assert!(index.contains(&shown), "{commit}: {index}");
    }

    let compare = base.join("compare.html");
    crate::matrix::compare::write_page(&a, &b, &compare, 0.02).unwrap();
    let compare = read(&compare);
    assert_escaped(
        "the comparison",
        &compare,
        &["experiment", "run", "config", "baseline", "cpu", "kernel"],
    );
    assert!(compare.contains("<circle"), "rounds drawn: {compare}");

    std::fs::remove_dir_all(&base).ok();
}
