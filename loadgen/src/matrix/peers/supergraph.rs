//! The supergraph a peer that takes one is given: the experiment's own supergraph file
//! with each `@join__graph(url:)` replaced by where the runner reaches that subgraph, or,
//! for a graph without a file, the supergraph the lab's gateway composes from the
//! subgraphs (`gateway compose`, bounded, a child that dies with loadgen).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, Context};

use crate::matrix::graph::GraphSpec;
use crate::matrix::reaper::TrackedChild;

/// Longest `gateway compose`.
const COMPOSE_DEADLINE: Duration = Duration::from_secs(60);

/// Write the supergraph of `graph`, its subgraphs at `urls`, to `file`.
pub fn write(
    graph: &GraphSpec,
    gateway: &Path,
    urls: &[(String, String)],
    file: &Path,
) -> anyhow::Result<PathBuf> {
    match &graph.supergraph {
        Some(own) => {
            let text = std::fs::read_to_string(own)
                .with_context(|| format!("reading {}", own.display()))?;
            let urls: BTreeMap<&str, &str> =
                urls.iter().map(|(n, u)| (n.as_str(), u.as_str())).collect();
            std::fs::write(file, with_urls(&text, &urls))
                .with_context(|| format!("writing {}", file.display()))?;
        }
        None => compose(gateway, urls, file)?,
    }
    Ok(file.to_path_buf())
}

/// `sdl` with the URL of every `@join__graph(name: "N", url: "…")` whose N is in `urls`
/// replaced.
pub fn with_urls(sdl: &str, urls: &BTreeMap<&str, &str>) -> String {
    let mut out = String::with_capacity(sdl.len());
    for line in sdl.split_inclusive('\n') {
        out.push_str(&replaced(line, urls).unwrap_or_else(|| line.to_string()));
    }
    out
}

fn replaced(line: &str, urls: &BTreeMap<&str, &str>) -> Option<String> {
    let join = line.find("@join__graph(")?;
    let quoted = |key: &str| -> Option<(usize, usize)> {
        let at = line[join..].find(&format!("{key}: \""))? + join + key.len() + 3;
        let end = line[at..].find('"')? + at;
        Some((at, end))
    };
    let (name_start, name_end) = quoted("name")?;
    let url = urls.get(&line[name_start..name_end])?;
    let (url_start, url_end) = quoted("url")?;
    Some(format!("{}{url}{}", &line[..url_start], &line[url_end..]))
}

/// `gateway compose --subgraph NAME=URL…` into `file`.
fn compose(gateway: &Path, urls: &[(String, String)], file: &Path) -> anyhow::Result<()> {
    let out =
        std::fs::File::create(file).with_context(|| format!("creating {}", file.display()))?;
    let mut command = Command::new(gateway);
    command
        .arg("compose")
        .args(["--startup-timeout-secs", "30"])
        .stdin(Stdio::null())
        .stdout(out);
    for (name, url) in urls {
        command.arg("--subgraph").arg(format!("{name}={url}"));
    }
    TrackedChild::run_to_end("gateway compose", &mut command, COMPOSE_DEADLINE).map_err(|e| {
        anyhow!("composing the supergraph a peer gateway is given (the experiment has no supergraph file): {e:#}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_subgraphs_url_is_replaced_by_name() {
        let sdl = "enum join__Graph {\n  ACCOUNTS @join__graph(name: \"accounts\", url: \"http://127.0.0.1:3014/graphql\")\n  REVIEWS @join__graph(name: \"reviews\", url: \"http://127.0.0.1:3013/graphql\")\n}\n";
        let urls: BTreeMap<&str, &str> = [("accounts", "http://127.0.0.1:40001/graphql")].into();
        let out = with_urls(sdl, &urls);
        assert!(
            out.contains("name: \"accounts\", url: \"http://127.0.0.1:40001/graphql\""),
            "{out}"
        );
        assert!(
            out.contains("name: \"reviews\", url: \"http://127.0.0.1:3013/graphql\""),
            "{out}"
        );
        assert_eq!(out.lines().count(), sdl.lines().count());
    }
}
