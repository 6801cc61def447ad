//! The field's gateways, run by the matrix in place of the lab's (`peer = "NAME"` in a
//! `[[config]]`), so that one experiment compares the lab's caches with the gateway a
//! user runs today, on the same graph, load and rounds.
//!
//! Each peer is a small launcher in the repository's `peers/NAME/` folder, with its npm
//! dependencies pinned by a committed `package-lock.json`. This module knows, for each:
//! what it caches, which cache settings (`cache = { ... }`) it takes and how they map to
//! its own, and how it is started and asked whether it is up. [`install`] finds the
//! folder, tells whether it is installed, installs it (`npm ci`, bounded) and reads the
//! versions that were resolved; [`listing`] prints `loadgen peers`; [`supergraph`] writes
//! the supergraph a peer that takes one is given.
//!
//! A peer is started like a service: free port, log file, parent-death signal, stopped
//! by PID. Its answers are checked as the lab's are, before and after every window,
//! and a wrong one stops the run: a peer is never measured giving a wrong answer.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

pub mod external;
pub mod install;
pub mod listing;
pub mod supergraph;

/// One cache setting a peer takes in `cache = { ... }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knob {
    /// The key in `cache = { ... }`.
    pub key: &'static str,
    /// The launcher's flag it becomes (`--ttl`).
    pub flag: &'static str,
    pub kind: KnobKind,
    /// What it means in the peer's own terms.
    pub meaning: &'static str,
}

/// What a knob's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnobKind {
    /// Seconds: a number, or a duration such as `"10s"`; the flag takes it as its value.
    Seconds,
    /// `true` or `false`; the flag is given alone when `true`.
    Switch,
}

/// How a peer is installed and started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// A Node launcher in its folder, run by `node`; its npm packages are pinned by the
    /// folder's committed `package-lock.json` and installed by `npm ci`.
    Node {
        /// The npm packages named in the report, the gateway first (versions from the lock).
        packages: &'static [&'static str],
    },
    /// A binary built once from crates.io (`cargo install --locked`) into a folder
    /// outside the repository, started by the launcher script in its folder. Never built
    /// unless asked for (`loadgen peers install NAME`, or `--install-peers`).
    Cargo {
        krate: &'static str,
        version: &'static str,
        features: &'static [&'static str],
        /// The binary `cargo install` puts in `<root>/bin/`.
        binary: &'static str,
        /// The variable that overrides the install folder, and its default under `$HOME`.
        root_env: &'static str,
        default_root: &'static str,
        /// What building it costs, for the line printed before it starts.
        cost: &'static str,
    },
}

/// A gateway the matrix can run in place of the lab's.
#[derive(Debug, PartialEq, Eq)]
pub struct Peer {
    /// `peer = "NAME"`, and the folder `peers/NAME/`.
    pub name: &'static str,
    pub runtime: Runtime,
    /// What it can cache: resolver, response, dedupe.
    pub caches: &'static str,
    /// The settings `cache = { ... }` takes; without any, the peer runs uncached.
    pub knobs: &'static [Knob],
    /// The runtime settings it runs with, as its docs recommend for production.
    pub settings: &'static str,
    /// The launcher, in its folder.
    pub entry: &'static str,
    /// The path that answers 200 once the gateway serves.
    pub health: &'static str,
    /// Whether it serves `/metrics` in the lab gateway's names (requests and its
    /// cache's hits, misses, skips and entries), read as the lab's are.
    pub metrics: bool,
    /// What it is given of the graph.
    pub input: GraphInput,
}

/// What a peer's launcher is given of the experiment's graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphInput {
    /// Each subgraph's name and URL (`--subgraph NAME=URL`, in the graph's order); the
    /// peer reads their SDL and composes them itself.
    Subgraphs,
    /// A supergraph file (`--supergraph FILE`), composed by the lab's gateway (`gateway
    /// compose`) from the subgraphs where the runner reaches them.
    Supergraph,
}

/// Every peer the matrix knows.
pub const PEERS: &[Peer] = &[
    Peer {
        name: "mercurius",
        runtime: Runtime::Node {
            packages: &["@mercuriusjs/gateway", "mercurius-cache"],
        },
        caches: "resolver: every Query field's result (mercurius-cache { all: true }), keyed by field, arguments and selection, not by caller; TTL 0 shares concurrent identical resolutions",
        knobs: &[Knob {
            key: "ttl",
            flag: "--ttl",
            kind: KnobKind::Seconds,
            meaning: "mercurius-cache's ttl in seconds (0: in-flight sharing only); absent: no cache",
        }],
        settings: "Fastify with its logger off, graphql-jit after the first request (jit: 1), NODE_ENV=production, one Node process; the caller's authorization header passed on to the subgraphs; each subgraph's Federation 2 SDL rewritten into the Federation 1 it speaks (peers/mercurius/federation1.js), a graph with Federation-2-only directives refused at start-up",
        entry: "gateway.js",
        health: "/health",
        metrics: false,
        input: GraphInput::Subgraphs,
    },
    Peer {
        name: "hive-gateway",
        runtime: Runtime::Node {
            packages: &["@graphql-hive/gateway"],
        },
        caches: "response: whole answers (responseCaching, in memory), keyed by document, variables and the caller's authorization header (its session); kept for the smaller of response_ttl and the subgraphs' Cache-Control max-age; a mutation's returned entities are dropped",
        knobs: &[Knob {
            key: "response_ttl",
            flag: "--response-ttl",
            kind: KnobKind::Seconds,
            meaning: "the response cache's ttl in seconds; absent: no cache",
        }],
        settings: "its CLI (hive-gateway supergraph FILE) with the CLI's defaults: one process (--fork 1), masked errors; logging at error, NODE_ENV=production; the caller's authorization header passed on to the subgraphs; its ES module build (the CommonJS one breaks the response cache on subgraph answers with Cache-Control); given the experiment's supergraph with its subgraphs' URLs where the runner reaches them, or one the lab's gateway composes",
        entry: "gateway.js",
        health: "/readiness",
        metrics: false,
        input: GraphInput::Supergraph,
    },
    Peer {
        name: "apollo-gateway",
        runtime: Runtime::Node {
            packages: &[
                "@apollo/gateway",
                "@apollo/server",
                "@apollo/server-plugin-response-cache",
            ],
        },
        caches: "response: whole answers (@apollo/server-plugin-response-cache, in memory), kept for the answer's cache policy, which Apollo Gateway takes from the subgraphs' Cache-Control (the smallest max-age; an answer without one is not cached), capped by response_ttl; a private answer kept per session (the caller's authorization header), or not at all without one; mutations never cached, and nothing is dropped on a write",
        knobs: &[Knob {
            key: "response_ttl",
            flag: "--response-ttl",
            kind: KnobKind::Seconds,
            meaning: "the cap on the answer's cache policy, in whole seconds; absent: no cache",
        }],
        settings: "Apollo Server's defaults (CSRF prevention, its 30 MiB in-memory cache, no usage reporting without APOLLO_KEY), NODE_ENV=production, one Node process, on Node's http server through Apollo Server's integration entry point (as startStandaloneServer); the caller's authorization header passed on to the subgraphs; given the experiment's supergraph with its subgraphs' URLs where the runner reaches them, or one the lab's gateway composes",
        entry: "gateway.js",
        health: "/health",
        metrics: true,
        input: GraphInput::Supergraph,
    },
    Peer {
        name: "hive-router",
        runtime: Runtime::Cargo {
            krate: "hive-router",
            version: "0.2.0",
            features: &["graphiql"],
            binary: "hive_router",
            root_env: "HIVE_ROUTER_ROOT",
            default_root: ".cache/graphql-cache-lab/hive-router",
            cost: "about 40 minutes on 2 cores",
        },
        caches: "dedupe: identical requests in flight share one execution (inbound) and identical subgraph fetches in flight share one fetch (outbound); no response or entity cache",
        knobs: &[Knob {
            key: "dedupe",
            flag: "--dedupe",
            kind: KnobKind::Switch,
            meaning: "true: its inbound and outbound dedupe on (traffic_shaping dedupe_enabled, router dedupe enabled); absent or false: off",
        }],
        settings: "version 0.2.0 from crates.io (0.3.x needs a newer rustc than this machine's stable), built with its graphiql feature; its defaults otherwise (HTTP workers: one per core), logging at warn; given the experiment's supergraph with its subgraphs' URLs where the runner reaches them, or one the lab's gateway composes",
        entry: "router.sh",
        health: "/health",
        metrics: false,
        input: GraphInput::Supergraph,
    },
];

/// The peer named `name`.
pub fn find(name: &str) -> Option<&'static Peer> {
    PEERS.iter().find(|p| p.name == name)
}

/// A configuration's peer, validated: which gateway, and its cache settings.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerConfig {
    pub peer: &'static Peer,
    /// Knob key → seconds, as `cache = { ... }` gave them.
    pub cache: BTreeMap<String, f64>,
}

impl PeerConfig {
    /// Check `peer = NAME` and `cache = { ... }` of the configuration at `at`
    /// (`config "ttl-0"`): an unknown peer or setting, or a value that is not a
    /// duration, is refused naming the key.
    pub fn check(at: &str, name: &str, cache: Option<&toml::Table>) -> Result<PeerConfig, String> {
        let peer = find(name).ok_or_else(|| {
            let known: Vec<&str> = PEERS.iter().map(|p| p.name).collect();
            format!(
                "{at}: peer = {name:?} is not a peer the matrix knows ({}; `loadgen peers` lists them)",
                known.join(", ")
            )
        })?;
        let mut settings = BTreeMap::new();
        for (key, value) in cache.into_iter().flatten() {
            let Some(knob) = peer.knobs.iter().find(|k| k.key == key) else {
                let known: Vec<&str> = peer.knobs.iter().map(|k| k.key).collect();
                return Err(format!(
                    "{at}: cache.{key}: {} takes no such setting (it takes: {})",
                    peer.name,
                    known.join(", ")
                ));
            };
            let read = match knob.kind {
                KnobKind::Seconds => seconds_of(value),
                KnobKind::Switch => match value {
                    toml::Value::Boolean(on) => Ok(f64::from(u8::from(*on))),
                    _ => Err("expected true or false".to_string()),
                },
            };
            let read = read.map_err(|why| format!("{at}: cache.{key} = {value}: {why}"))?;
            settings.insert(key.clone(), read);
        }
        Ok(PeerConfig {
            peer,
            cache: settings,
        })
    }

    /// The launcher's arguments after its own file: port, the graph as the peer takes it
    /// (the subgraphs, or the supergraph file composed from them), cache settings.
    pub fn launcher_args(
        &self,
        port: u16,
        subgraphs: &[(String, String)],
        supergraph: Option<&Path>,
    ) -> Vec<String> {
        let mut args = vec!["--port".to_string(), port.to_string()];
        match (self.peer.input, supergraph) {
            (GraphInput::Supergraph, Some(file)) => {
                args.push("--supergraph".into());
                args.push(file.display().to_string());
            }
            _ => {
                for (name, url) in subgraphs {
                    args.push("--subgraph".into());
                    args.push(format!("{name}={url}"));
                }
            }
        }
        for knob in self.peer.knobs {
            match (knob.kind, self.cache.get(knob.key)) {
                (_, None) => {}
                (KnobKind::Seconds, Some(seconds)) => {
                    args.push(knob.flag.into());
                    args.push(seconds.to_string());
                }
                (KnobKind::Switch, Some(on)) => {
                    if *on > 0.0 {
                        args.push(knob.flag.into());
                    }
                }
            }
        }
        args
    }

    /// The program and arguments that start this peer on `port`, for `graph` whose
    /// subgraphs are at `urls`; a peer that takes a supergraph gets one written to
    /// `supergraph.1` (composed by the lab's gateway `supergraph.0` when the graph has no
    /// file of its own).
    pub fn command_line(
        &self,
        prepared: &install::PreparedPeers,
        graph: &crate::matrix::graph::GraphSpec,
        urls: &[(String, String)],
        port: u16,
        supergraph: (&Path, &Path),
    ) -> anyhow::Result<(std::path::PathBuf, Vec<String>)> {
        let file = match self.peer.input {
            GraphInput::Subgraphs => None,
            GraphInput::Supergraph => Some(self::supergraph::write(
                graph,
                supergraph.0,
                urls,
                supergraph.1,
            )?),
        };
        let entry = prepared.entry(self.peer);
        let launcher = self.launcher_args(port, urls, file.as_deref());
        Ok(match self.peer.runtime {
            Runtime::Node { .. } => {
                let node = prepared.node.clone().ok_or_else(|| {
                    anyhow::anyhow!("peer {}: node was not found", self.peer.name)
                })?;
                let mut args = vec![entry.display().to_string()];
                args.extend(launcher);
                (node, args)
            }
            Runtime::Cargo { .. } => {
                let mut args = vec![
                    "--root".to_string(),
                    install::cargo_root(self.peer)?.display().to_string(),
                ];
                args.extend(launcher);
                (entry, args)
            }
        })
    }

    /// How the configuration reads: `mercurius, ttl = 0 s`, `hive-router, dedupe on`, or
    /// `mercurius, no cache`.
    pub fn label(&self) -> String {
        if self.cache.is_empty() {
            return format!("{}, no cache", self.peer.name);
        }
        let settings: Vec<String> = self
            .peer
            .knobs
            .iter()
            .filter_map(|knob| {
                let value = self.cache.get(knob.key)?;
                Some(match knob.kind {
                    KnobKind::Seconds => format!("{} = {value} s", knob.key),
                    KnobKind::Switch if *value > 0.0 => format!("{} on", knob.key),
                    KnobKind::Switch => format!("{} off", knob.key),
                })
            })
            .collect();
        format!("{}, {}", self.peer.name, settings.join(", "))
    }
}

/// A cache setting's value in seconds: a number, or a duration such as `"10s"`.
fn seconds_of(value: &toml::Value) -> Result<f64, String> {
    let seconds = match value {
        toml::Value::Integer(n) => *n as f64,
        toml::Value::Float(f) => *f,
        toml::Value::String(s) => crate::cli::parse_duration_or_zero(s)
            .map(|d: Duration| d.as_secs_f64())
            .map_err(|e| format!("not a duration ({e})"))?,
        _ => return Err("expected seconds, or a duration such as \"10s\"".into()),
    };
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err("expected 0 seconds or more".into());
    }
    Ok(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn settings_map_to_the_launchers_flags() {
        let c =
            PeerConfig::check("config \"m\"", "mercurius", Some(&table("ttl = \"1s\""))).unwrap();
        assert_eq!(c.label(), "mercurius, ttl = 1 s");
        let subgraphs = [("user".to_string(), "http://127.0.0.1:1/graphql".to_string())];
        assert_eq!(
            c.launcher_args(4000, &subgraphs, None),
            [
                "--port",
                "4000",
                "--subgraph",
                "user=http://127.0.0.1:1/graphql",
                "--ttl",
                "1"
            ]
        );
        let bare = PeerConfig::check("config \"m\"", "mercurius", None).unwrap();
        assert_eq!(bare.label(), "mercurius, no cache");
        assert!(!bare
            .launcher_args(1, &subgraphs, None)
            .contains(&"--ttl".to_string()));
        let hive = PeerConfig::check(
            "config \"h\"",
            "hive-gateway",
            Some(&table("response_ttl = 10")),
        )
        .unwrap();
        assert_eq!(
            hive.launcher_args(5, &subgraphs, Some(Path::new("/tmp/s.graphql"))),
            [
                "--port",
                "5",
                "--supergraph",
                "/tmp/s.graphql",
                "--response-ttl",
                "10"
            ]
        );
    }

    #[test]
    fn a_switch_is_a_flag_alone() {
        let on = PeerConfig::check("config \"r\"", "hive-router", Some(&table("dedupe = true")))
            .unwrap();
        assert_eq!(on.label(), "hive-router, dedupe on");
        assert_eq!(
            on.launcher_args(7, &[], Some(Path::new("/s"))),
            ["--port", "7", "--supergraph", "/s", "--dedupe"]
        );
        let off = PeerConfig::check(
            "config \"r\"",
            "hive-router",
            Some(&table("dedupe = false")),
        )
        .unwrap();
        assert_eq!(off.label(), "hive-router, dedupe off");
        assert!(!off
            .launcher_args(7, &[], None)
            .contains(&"--dedupe".to_string()));
        let e = PeerConfig::check("config \"r\"", "hive-router", Some(&table("dedupe = 1")))
            .unwrap_err();
        assert!(
            e.contains("cache.dedupe = 1") && e.contains("true or false"),
            "{e}"
        );
    }

    #[test]
    fn unknown_peers_settings_and_values_are_refused_by_name() {
        let e = PeerConfig::check("config \"x\"", "nginx", None).unwrap_err();
        assert!(
            e.contains("peer = \"nginx\"") && e.contains("mercurius"),
            "{e}"
        );
        let e =
            PeerConfig::check("config \"x\"", "mercurius", Some(&table("size = 3"))).unwrap_err();
        assert!(e.contains("cache.size") && e.contains("ttl"), "{e}");
        let e =
            PeerConfig::check("config \"x\"", "mercurius", Some(&table("ttl = -1"))).unwrap_err();
        assert!(e.contains("cache.ttl = -1"), "{e}");
        let e = PeerConfig::check("config \"x\"", "mercurius", Some(&table("ttl = \"soon\"")))
            .unwrap_err();
        assert!(e.contains("not a duration"), "{e}");
    }
}
