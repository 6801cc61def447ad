//! The graph a run federates: the lab's own (user-service and post-service, composed
//! by the gateway), or one the experiment file brings.
//!
//! ```toml
//! [graph]
//! supergraph = "../commerce-graph/supergraph/supergraph.graphql"  # --supergraph FILE
//! operations = "own-graph/operations.toml"     # what is sent (instead of [query] / [workload])
//! subgraphs = { reviews = "http://127.0.0.1:3013/graphql" }   # not started: at a URL
//!
//! [[services.subgraph]]                         # started by the runner, per round
//! name = "products"                             # its name in the supergraph
//! binary = "commerce-service"                   # beside loadgen (or --bin-dir), or a path
//! args = ["--subgraph", "products"]
//! # path = "/graphql", health = "/health", listen = "--listen", metrics = true
//! ```
//!
//! With a supergraph, the gateways start with `--supergraph FILE` and a
//! `--subgraph-url NAME=URL` for every subgraph the runner starts or the file gives a
//! URL for; the others are reached at the supergraph's own URLs. Without one, the
//! gateways compose the subgraphs themselves (`--subgraph NAME=URL`, every subgraph).
//! Every subgraph the runner does not start must answer a `{ __typename }` query
//! before anything starts ([`GraphSpec::check_reachable`]); a refusal names the file
//! and the line where its URL was written.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper::Method;
use serde::Deserialize;

use super::http_probe;
use super::settings::{POST_SERVICE, USER_SERVICE};
use crate::workload::source::Place;

/// How long a subgraph the runner does not start has to answer the probe.
const PROBE_DEADLINE: Duration = Duration::from_secs(5);

/// `[graph]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphFile {
    #[serde(default)]
    pub supergraph: Option<String>,
    #[serde(default)]
    pub operations: Option<String>,
    /// How the operations' reads are sent (`"GET"` or `"POST"`), over the file's own
    /// `read_method`: GET lets an edge cache in front keep them.
    #[serde(default)]
    pub read_method: Option<String>,
    #[serde(default)]
    pub subgraphs: BTreeMap<String, String>,
}

/// One `[[services.subgraph]]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubgraphServiceFile {
    pub name: String,
    pub binary: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub health: Option<String>,
    #[serde(default)]
    pub listen: Option<String>,
    #[serde(default)]
    pub metrics: Option<bool>,
}

/// A subgraph the runner starts, fresh for every configuration and round.
#[derive(Debug, Clone, PartialEq)]
pub struct Started {
    /// Its process name (logs, CPU figures): `user-service`, or the subgraph's name.
    pub process: String,
    /// A file name beside loadgen (or in `--bin-dir`), or a path.
    pub binary: String,
    /// Arguments every configuration passes before its own.
    pub args: Vec<String>,
    /// Its GraphQL endpoint, its health endpoint (must answer 200), and the flag that
    /// takes the address to listen on (`--listen 127.0.0.1:PORT`).
    pub path: String,
    pub health: String,
    pub listen: String,
    /// Whether it serves `/metrics` with `subgraph_requests_total` (subgraph-host does).
    pub metrics: bool,
    /// Its key in `[config.network]` (`user_service`, or the subgraph's name).
    pub network: String,
}

/// Where a subgraph is.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Started(Started),
    /// Someone else's, at this URL, written at this place.
    At {
        url: String,
        place: Place,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SubgraphSpec {
    /// Its name for the gateway (`--subgraph NAME=…`, the supergraph's `join__graph` name).
    pub name: String,
    pub source: Source,
}

/// The graph of an experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphSpec {
    /// `--supergraph` (relative to the working directory), if the file names one.
    pub supergraph: Option<PathBuf>,
    /// The operations file `[graph] operations` names.
    pub operations: Option<PathBuf>,
    /// `[graph] read_method`: how those operations' reads are sent.
    pub read_method: Option<String>,
    pub subgraphs: Vec<SubgraphSpec>,
    /// The lab's own two subgraphs, as configured by `user_service`/`post_service`.
    pub lab: bool,
}

#[derive(Deserialize)]
struct Spans {
    #[serde(default)]
    graph: Option<GraphSpans>,
    #[serde(default)]
    services: Option<ServicesSpans>,
}

#[derive(Deserialize)]
struct GraphSpans {
    #[serde(default)]
    subgraphs: BTreeMap<String, toml::Spanned<toml::Value>>,
}

#[derive(Deserialize)]
struct ServicesSpans {
    #[serde(default)]
    subgraph: Vec<toml::Spanned<toml::Value>>,
}

impl GraphSpec {
    /// The lab's own graph.
    pub fn lab() -> GraphSpec {
        let started = |name: &str, process: &str, network: &str| SubgraphSpec {
            name: name.into(),
            source: Source::Started(Started {
                process: process.into(),
                binary: process.into(),
                args: Vec::new(),
                path: "/graphql".into(),
                health: "/health".into(),
                listen: "--listen".into(),
                metrics: true,
                network: network.into(),
            }),
        };
        GraphSpec {
            supergraph: None,
            operations: None,
            read_method: None,
            subgraphs: vec![
                started("user", USER_SERVICE, super::network::USER_SERVICE),
                started("post", POST_SERVICE, super::network::POST_SERVICE),
            ],
            lab: true,
        }
    }

    /// Validate `[graph]` and `[[services.subgraph]]` of the experiment file `path`
    /// (whose text is `text`; files are relative to `base_dir`). `dir` replaces
    /// `{dir}` in arguments. Errors name the key, and the line where it helps.
    pub fn resolve(
        graph: Option<GraphFile>,
        services: Vec<SubgraphServiceFile>,
        text: &str,
        path: &Path,
        base_dir: &Path,
    ) -> Result<GraphSpec, String> {
        if graph.is_none() && services.is_empty() {
            return Ok(GraphSpec::lab());
        }
        let graph = graph.unwrap_or_default();
        let spans = toml::from_str::<Spans>(text).ok();
        let place = |offset: usize| Place {
            file: path.to_path_buf(),
            line: crate::workload::source::line_at(text, offset),
        };
        let url_place = |name: &str| {
            spans
                .as_ref()
                .and_then(|s| s.graph.as_ref())
                .and_then(|g| g.subgraphs.get(name))
                .map(|v| place(v.span().start))
        };
        let service_place = |i: usize| {
            spans
                .as_ref()
                .and_then(|s| s.services.as_ref())
                .and_then(|s| s.subgraph.get(i))
                .map(|v| place(v.span().start))
        };
        let at_line = |p: Option<Place>, message: String| match p {
            Some(p) => format!("{p}: {message}"),
            None => message,
        };
        let supergraph = graph.supergraph.as_ref().map(|f| base_dir.join(f));
        let declared = match &supergraph {
            Some(file) => Some(supergraph_subgraphs(file).map_err(|e| {
                format!(
                    "graph.supergraph {:?}: {e}",
                    graph.supergraph.as_deref().unwrap_or("")
                )
            })?),
            None => None,
        };
        let mut subgraphs: Vec<SubgraphSpec> = Vec::new();
        for (i, s) in services.iter().enumerate() {
            let at = format!("services.subgraph #{} ({:?})", i + 1, s.name);
            if s.name.is_empty()
                || !s
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            {
                return Err(at_line(
                    service_place(i),
                    format!(
                        "{at}: name must be non-empty and use only letters, digits, '-' and '_'"
                    ),
                ));
            }
            if subgraphs.iter().any(|k| k.name == s.name) {
                return Err(at_line(
                    service_place(i),
                    format!("{at}: the name is used twice"),
                ));
            }
            if [USER_SERVICE, POST_SERVICE, "gateway", "loadgen", "redis"]
                .iter()
                .any(|reserved| {
                    s.name == *reserved
                        || s.name.starts_with("gateway-")
                        || s.name.starts_with("netproxy")
                })
            {
                return Err(at_line(
                    service_place(i),
                    format!("{at}: the name is one the runner uses for its own processes"),
                ));
            }
            if let Some(known) = &declared {
                if !known.iter().any(|(n, _, _)| *n == s.name) {
                    return Err(at_line(
                        service_place(i),
                        format!(
                            "{at}: the supergraph has no subgraph {:?} (it has {})",
                            s.name,
                            names(known)
                        ),
                    ));
                }
            }
            if s.binary.is_empty() {
                return Err(at_line(service_place(i), format!("{at}.binary is empty")));
            }
            let endpoint = |key: &str, value: &Option<String>, default: &str| {
                let v = value.clone().unwrap_or_else(|| default.to_string());
                if v.starts_with('/') {
                    Ok(v)
                } else {
                    Err(at_line(
                        service_place(i),
                        format!("{at}.{key} {v:?} must start with '/'"),
                    ))
                }
            };
            let listen = s.listen.clone().unwrap_or_else(|| "--listen".into());
            if !listen.starts_with('-') {
                return Err(at_line(
                    service_place(i),
                    format!("{at}.listen {listen:?} must be a flag (e.g. --listen)"),
                ));
            }
            if s.args
                .iter()
                .any(|a| *a == listen || a.starts_with(&format!("{listen}=")))
            {
                return Err(at_line(
                    service_place(i),
                    format!("{at}.args passes {listen}, which the runner sets itself"),
                ));
            }
            let dir = base_dir.display().to_string();
            subgraphs.push(SubgraphSpec {
                name: s.name.clone(),
                source: Source::Started(Started {
                    process: s.name.clone(),
                    binary: s.binary.replace(super::experiment::DIR_PLACEHOLDER, &dir),
                    args: s
                        .args
                        .iter()
                        .map(|a| a.replace(super::experiment::DIR_PLACEHOLDER, &dir))
                        .collect(),
                    path: endpoint("path", &s.path, "/graphql")?,
                    health: endpoint("health", &s.health, "/health")?,
                    listen,
                    metrics: s.metrics.unwrap_or(true),
                    network: s.name.clone(),
                }),
            });
        }
        for (name, url) in &graph.subgraphs {
            let at = format!("graph.subgraphs.{name}");
            if subgraphs.iter().any(|k| k.name == *name) {
                return Err(at_line(
                    url_place(name),
                    format!("{at}: {name:?} is also a [[services.subgraph]] the runner starts"),
                ));
            }
            if let Some(known) = &declared {
                if !known.iter().any(|(n, _, _)| n == name) {
                    return Err(at_line(
                        url_place(name),
                        format!(
                            "{at}: the supergraph has no subgraph {name:?} (it has {})",
                            names(known)
                        ),
                    ));
                }
            }
            parse_url(url).map_err(|e| at_line(url_place(name), format!("{at} = {url:?}: {e}")))?;
            subgraphs.push(SubgraphSpec {
                name: name.clone(),
                source: Source::At {
                    url: url.clone(),
                    place: url_place(name).unwrap_or(Place {
                        file: path.to_path_buf(),
                        line: 1,
                    }),
                },
            });
        }
        // The supergraph's own URLs for the subgraphs nobody else gave.
        for (name, url, place) in declared.iter().flatten() {
            if !subgraphs.iter().any(|k| k.name == *name) {
                subgraphs.push(SubgraphSpec {
                    name: name.clone(),
                    source: Source::At {
                        url: url.clone(),
                        place: place.clone(),
                    },
                });
            }
        }
        if subgraphs.is_empty() {
            return Err(
                "[graph] names no subgraph: give a supergraph, graph.subgraphs or [[services.subgraph]]"
                    .into(),
            );
        }
        Ok(GraphSpec {
            supergraph,
            operations: graph.operations.as_ref().map(|f| base_dir.join(f)),
            read_method: graph.read_method.clone(),
            subgraphs,
            lab: false,
        })
    }

    /// The subgraphs the runner starts, in order.
    pub fn started(&self) -> impl Iterator<Item = (&str, &Started)> {
        self.subgraphs.iter().filter_map(|s| match &s.source {
            Source::Started(started) => Some((s.name.as_str(), started)),
            Source::At { .. } => None,
        })
    }

    /// The subgraphs at URLs of their own.
    pub fn external(&self) -> impl Iterator<Item = (&str, &str, &Place)> {
        self.subgraphs.iter().filter_map(|s| match &s.source {
            Source::At { url, place } => Some((s.name.as_str(), url.as_str(), place)),
            Source::Started(_) => None,
        })
    }

    /// Whether every subgraph is started by the runner and counts its requests: then
    /// the subgraphs' own counters give the requests they received.
    pub fn counts_every_subgraph(&self) -> bool {
        self.subgraphs
            .iter()
            .all(|s| matches!(&s.source, Source::Started(st) if st.metrics))
    }

    /// The gateway's arguments for this graph, given the URLs the started subgraphs
    /// are reached at (by name).
    pub fn gateway_args(&self, reached: &BTreeMap<String, String>) -> Vec<String> {
        let url_of = |s: &SubgraphSpec| match &s.source {
            Source::Started(_) => reached.get(&s.name).cloned(),
            Source::At { url, .. } => Some(url.clone()),
        };
        let mut args = Vec::new();
        match &self.supergraph {
            Some(file) => {
                args.push("--supergraph".to_string());
                args.push(file.display().to_string());
                for s in &self.subgraphs {
                    // A supergraph's own URL needs no override.
                    if let (Source::Started(_), Some(url)) = (&s.source, url_of(s)) {
                        args.push("--subgraph-url".into());
                        args.push(format!("{}={url}", s.name));
                    }
                }
                for (name, url, place) in self.external() {
                    if place.file != *file {
                        args.push("--subgraph-url".into());
                        args.push(format!("{name}={url}"));
                    }
                }
            }
            None => {
                for s in &self.subgraphs {
                    if let Some(url) = url_of(s) {
                        args.push("--subgraph".into());
                        args.push(format!("{}={url}", s.name));
                    }
                }
            }
        }
        args
    }

    /// Every subgraph's name and URL in the graph's order, the started ones where they
    /// are reached: what a peer gateway that composes the subgraphs itself is given.
    pub fn subgraph_urls(&self, reached: &BTreeMap<String, String>) -> Vec<(String, String)> {
        self.subgraphs
            .iter()
            .filter_map(|s| {
                let url = match &s.source {
                    Source::Started(_) => reached.get(&s.name).cloned(),
                    Source::At { url, .. } => Some(url.clone()),
                }?;
                Some((s.name.clone(), url))
            })
            .collect()
    }

    /// Ask every subgraph the runner does not start `{ __typename }`; the first that
    /// does not answer with GraphQL stops the run, naming where its URL was written.
    pub async fn check_reachable(&self) -> Result<(), String> {
        for (name, url, place) in self.external() {
            probe(url)
                .await
                .map_err(|e| format!("{place}: subgraph {name:?} at {url} is unreachable: {e}"))?;
        }
        Ok(())
    }
}

fn names(known: &[(String, String, Place)]) -> String {
    known
        .iter()
        .map(|(n, _, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `http://host:port/path` → the address and the path.
pub fn parse_url(url: &str) -> Result<(String, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or("only http:// URLs are supported")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err("the URL has no host".into());
    }
    let authority = if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    Ok((authority, path.to_string()))
}

/// POST `{ __typename }` to `url`: Ok when a GraphQL answer comes back.
async fn probe(url: &str) -> Result<(), String> {
    let (authority, path) = parse_url(url)?;
    let addr: SocketAddr = tokio::net::lookup_host(&authority)
        .await
        .map_err(|e| format!("cannot resolve {authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("{authority} resolves to no address"))?;
    let answer = http_probe::request(
        addr,
        Method::POST,
        &path,
        &[],
        Some(r#"{"query":"{ __typename }"}"#.into()),
        PROBE_DEADLINE,
    )
    .await
    .map_err(|e| format!("{e:#}"))?;
    let graphql = serde_json::from_slice::<serde_json::Value>(&answer.body)
        .ok()
        .is_some_and(|v| v.get("data").is_some() || v.get("errors").is_some());
    if answer.status != 200 || !graphql {
        return Err(format!(
            "answered HTTP {} without a GraphQL response ({:.80}); is {path} its GraphQL endpoint?",
            answer.status,
            answer.text()
        ));
    }
    Ok(())
}

/// The subgraphs a supergraph file declares: each `join__graph(name:, url:)` with the
/// place it is written at.
pub fn supergraph_subgraphs(file: &Path) -> Result<Vec<(String, String, Place)>, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some(at) = line.find("@join__graph(") else {
            continue;
        };
        let args = &line[at..];
        let quoted = |key: &str| {
            let start = args.find(&format!("{key}:"))? + key.len() + 1;
            let rest = args[start..].trim_start().strip_prefix('"')?;
            Some(rest[..rest.find('"')?].to_string())
        };
        if let (Some(name), Some(url)) = (quoted("name"), quoted("url")) {
            found.push((
                name,
                url,
                Place {
                    file: file.to_path_buf(),
                    line: i + 1,
                },
            ));
        }
    }
    if found.is_empty() {
        return Err(format!(
            "{} declares no subgraph (no @join__graph(name: …, url: …)): is it a supergraph?",
            file.display()
        ));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_read_for_the_probe() {
        assert_eq!(
            parse_url("http://127.0.0.1:3011/graphql").unwrap(),
            ("127.0.0.1:3011".to_string(), "/graphql".to_string())
        );
        assert_eq!(parse_url("http://localhost").unwrap().0, "localhost:80");
        assert!(parse_url("https://x/graphql")
            .unwrap_err()
            .contains("only http://"));
    }

    #[test]
    fn the_commerce_supergraph_declares_its_four_subgraphs_on_their_lines() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../commerce-graph/supergraph/supergraph.graphql");
        let found = supergraph_subgraphs(&file).unwrap();
        let names: Vec<&str> = found.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(names, ["accounts", "inventory", "products", "reviews"]);
        let text = std::fs::read_to_string(&file).unwrap();
        for (name, url, place) in &found {
            let line = text.lines().nth(place.line - 1).unwrap();
            assert!(
                line.contains(name.as_str()) && line.contains(url.as_str()),
                "{line}"
            );
        }
    }
}
