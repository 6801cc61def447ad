//! The committed files of a graph (`tests/supergraphs/<graph>/`), checked against what
//! its subgraphs serve and against the record of what the supergraph was composed
//! from (`composed-from.txt`); under `FEDERATION_SDL=write`, written instead.

use std::path::PathBuf;

use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};

use super::host::Running;

/// Where graph `graph`'s files are.
pub fn graph_dir(graph: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/supergraphs")
        .join(graph)
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const RECOMPOSE: &str = "run scripts/compose-federation-tests.sh and commit what it writes";

/// Check that each running subgraph serves the SDL of its committed file, and that
/// the committed supergraph was composed from exactly those files (under
/// `FEDERATION_SDL=write`: write the served SDL into the files instead).
pub(super) async fn check_sdl(graph: &str, running: &[Running]) {
    let served: Vec<(&str, String)> = running.iter().map(|r| (r.name, r.server.url())).collect();
    check_served_sdl(graph, &served).await;
}

/// [`check_sdl`] for subgraphs served by anything: (name, URL) pairs.
pub async fn check_served_sdl(graph: &str, served: &[(&str, String)]) {
    let dir = graph_dir(graph);
    let http = reqwest::Client::new();
    let write = std::env::var("FEDERATION_SDL").is_ok_and(|v| v == "write");
    for (name, url) in served {
        let answer: Json = http
            .post(url)
            .json(&json!({ "query": "{ _service { sdl } }" }))
            .send()
            .await
            .expect("the subgraph answers")
            .json()
            .await
            .expect("JSON");
        let served = answer["data"]["_service"]["sdl"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no SDL in {answer}"));
        let file = dir.join(format!("{name}.graphql"));
        if write {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&file, served).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            committed == served,
            "{} is not the SDL subgraph {name} serves: {RECOMPOSE}",
            file.display(),
        );
    }
    if write {
        return;
    }
    let record = dir.join("composed-from.txt");
    let text = std::fs::read_to_string(&record)
        .unwrap_or_else(|e| panic!("{}: {e}: {RECOMPOSE}", record.display()));
    let mut inputs = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (hash, name) = line
            .split_once("  ")
            .unwrap_or_else(|| panic!("{}: bad line {line:?}", record.display()));
        let bytes = std::fs::read(dir.join(name)).unwrap_or_default();
        assert_eq!(
            sha256(&bytes),
            hash,
            "{graph}/{name} is not the file the supergraph was composed from: {RECOMPOSE}"
        );
        if name != "supergraph.graphql" {
            inputs.push(name.trim_end_matches(".graphql").to_string());
        }
    }
    let mut names: Vec<String> = served.iter().map(|(n, _)| n.to_string()).collect();
    names.sort();
    inputs.sort();
    assert_eq!(
        inputs, names,
        "{graph}'s supergraph was composed from other subgraphs: {RECOMPOSE}"
    );
}
