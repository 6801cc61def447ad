//! Reading an experiment file: every rule checked up front, each error naming the
//! file, the configuration and the key at fault, and every default filled in (the
//! file's `[load]` over the built-in load, a configuration's own keys over the file's).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::file::{ExperimentFile, LoadFile, RedisChoice};
use super::{
    ConfigSpec, Experiment, ExperimentError, LoadSpec, ProfileSpec, ProfileTool, RunSpec,
    DEFAULT_MAX_ERROR_RATE, DIR_PLACEHOLDER, EDGE_PLACEHOLDER, MAX_GATEWAYS,
    REDIS_CLUSTER_PLACEHOLDER, REDIS_PLACEHOLDER, RUNNER_OWNED_FLAGS,
};
use crate::cli::{parse_duration, parse_duration_or_zero};
use crate::matrix::graph::GraphSpec;
use crate::matrix::network::NetworkSpec;
use crate::matrix::peers::external::ExternalGateway;
use crate::matrix::peers::PeerConfig;
use crate::matrix::query::resolve_query;
use crate::workload::Workload;

/// Load settings used where neither `[load]` nor a configuration says otherwise.
/// One thread and 100 connections, as wrk -t1 -c100 and autocannon in the talk.
const DEFAULT_CONNECTIONS: usize = 100;
const DEFAULT_THREADS: usize = 1;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default flamegraph sampling rate: under the ~215 samples/s the kernel tick allows,
/// and off the 100 Hz beat of timers.
const DEFAULT_PROFILE_HZ: u32 = 99;

impl Experiment {
    /// Read and validate an experiment file.
    pub fn load(path: &Path) -> Result<Experiment, ExperimentError> {
        let text = std::fs::read_to_string(path).map_err(|source| ExperimentError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Experiment::parse(&text, path)
    }

    /// Validate the text of an experiment file; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Experiment, ExperimentError> {
        let file: ExperimentFile = toml::from_str(text).map_err(|e| ExperimentError::Syntax {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let invalid = |message: String| {
            if is_located(&message) {
                ExperimentError::Located { message }
            } else {
                ExperimentError::Invalid {
                    path: path.to_path_buf(),
                    message,
                }
            }
        };

        let base_dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let top_query = file
            .query
            .map(|q| resolve_query(q, "query", &base_dir))
            .transpose()
            .map_err(invalid)?;
        let graph = Arc::new(
            GraphSpec::resolve(
                file.graph.clone(),
                file.services.subgraph.clone(),
                text,
                path,
                &base_dir,
            )
            .map_err(invalid)?,
        );
        let origin = crate::workload::source::Origin::of(
            text,
            path,
            crate::workload::source::Table::Workload,
        );
        let mut workload = file
            .workload
            .map(|w| Workload::from_file_in(w, &origin))
            .transpose()
            .map_err(invalid)?
            .map(Arc::new);
        if let Some(ops) = &graph.operations {
            if workload.is_some() {
                return Err(invalid(
                    "give either [workload] or [graph] operations, not both".into(),
                ));
            }
            workload = Some(Arc::new(
                crate::workload::load::read_operations_file_reading_by(
                    ops,
                    graph.read_method.as_deref(),
                )
                .map_err(|e| invalid(format!("graph.operations: {e}")))?,
            ));
        }
        if top_query.is_some() && workload.is_some() {
            return Err(invalid(
                "give either [query] or [workload] (or [graph] operations), not both (a configuration may still have its own query)"
                    .into(),
            ));
        }
        if !graph.lab {
            for (key, args) in [
                ("services.user_service", &file.services.user_service),
                ("services.post_service", &file.services.post_service),
            ] {
                if !args.is_empty() {
                    return Err(invalid(format!(
                        "{key}: this experiment brings its own graph ([graph] or [[services.subgraph]]); user-service and post-service are not started"
                    )));
                }
            }
        }
        let file_error_rate = file
            .max_error_rate
            .map(|r| error_rate(r, "max_error_rate"))
            .transpose()
            .map_err(invalid)?;
        for (key, args) in [
            ("services.gateway", &file.services.gateway),
            ("services.user_service", &file.services.user_service),
            ("services.post_service", &file.services.post_service),
        ] {
            if let Some(flag) = runner_owned(args) {
                return Err(invalid(format!(
                    "{key} passes {flag}, which the runner sets itself"
                )));
            }
            if args.iter().any(|a| a.contains(REDIS_PLACEHOLDER)) {
                return Err(invalid(format!(
                    "{key} uses {REDIS_PLACEHOLDER}: only a configuration with redis = true may"
                )));
            }
            if args.iter().any(|a| a.contains(REDIS_CLUSTER_PLACEHOLDER)) {
                return Err(invalid(format!(
                    "{key} uses {REDIS_CLUSTER_PLACEHOLDER}: only a configuration with redis = \"cluster\" may"
                )));
            }
            if args.iter().any(|a| a.contains(EDGE_PLACEHOLDER)) {
                return Err(invalid(format!(
                    "{key} uses {EDGE_PLACEHOLDER}: only a configuration with edge = \"varnish\" may"
                )));
            }
        }
        let dir_text = base_dir.display().to_string();
        let with_common = |common: &[String], own: Vec<String>| -> Vec<String> {
            common
                .iter()
                .chain(&own)
                .map(|a| a.replace(DIR_PLACEHOLDER, &dir_text))
                .collect()
        };

        let run = RunSpec {
            rounds: match file.run.rounds {
                None => None,
                Some(n) if (1..=1000).contains(&n) => Some(n as u32),
                Some(n) => return Err(invalid(format!("run.rounds = {n}: must be 1 to 1000"))),
            },
            duration: file
                .run
                .duration
                .map(|d| parse_duration(&d).map_err(|e| invalid(format!("run.duration: {e}"))))
                .transpose()?,
            warmup: file
                .run
                .warmup
                .map(|d| {
                    parse_duration_or_zero(&d).map_err(|e| invalid(format!("run.warmup: {e}")))
                })
                .transpose()?,
        };
        let profile = ProfileSpec {
            enabled: file.profile.enabled.unwrap_or(true),
            hz: match file.profile.hz {
                None => DEFAULT_PROFILE_HZ,
                Some(hz) if (1..=1000).contains(&hz) => hz as u32,
                Some(hz) => return Err(invalid(format!("profile.hz = {hz}: must be 1 to 1000"))),
            },
            tool: match file.profile.tool.as_deref() {
                None | Some("auto") => ProfileTool::Auto,
                Some("perf") => ProfileTool::Perf,
                Some("endpoint") => ProfileTool::Endpoint,
                Some(other) => {
                    return Err(invalid(format!(
                        "profile.tool = {other:?}: use auto, perf or endpoint"
                    )))
                }
            },
        };
        let defaults = resolve_load(&file.load, None, "load").map_err(invalid)?;

        if file.configs.is_empty() {
            return Err(invalid(
                "no [[config]] entries: an experiment needs at least one configuration".into(),
            ));
        }
        let mut configs = Vec::with_capacity(file.configs.len());
        for (i, c) in file.configs.into_iter().enumerate() {
            let at = format!("config #{} ({:?})", i + 1, c.name);
            if c.name.is_empty()
                || !c
                    .name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'))
            {
                return Err(invalid(format!(
                    "{at}: name must be non-empty and use only letters, digits, '-', '_' and '.' (it names files)"
                )));
            }
            if configs.iter().any(|k: &ConfigSpec| k.name == c.name) {
                return Err(invalid(format!("{at}: the name is used twice")));
            }
            for (key, args) in [
                ("gateway", &c.gateway),
                ("user_service", &c.user_service),
                ("post_service", &c.post_service),
            ] {
                if let Some(flag) = runner_owned(args) {
                    return Err(invalid(format!(
                        "{at}: {key} passes {flag}, which the runner sets itself"
                    )));
                }
            }
            let load =
                resolve_load(&c.load, Some(&defaults), &format!("{at}: load")).map_err(invalid)?;
            let own_query = c.query.is_some();
            let (query, config_workload) = match c.query {
                Some(q) => (
                    Some(resolve_query(q, &format!("{at}: query"), &base_dir).map_err(invalid)?),
                    None,
                ),
                None if workload.is_some() => (None, workload.clone()),
                None => (
                    Some(top_query.clone().ok_or_else(|| {
                        invalid(format!(
                            "{at} has no query of its own and the file has no top-level [query] or [workload]"
                        ))
                    })?),
                    None,
                ),
            };
            let (redis, redis_cluster) = match &c.redis {
                None | Some(RedisChoice::Server(false)) => (false, false),
                Some(RedisChoice::Server(true)) => (true, false),
                Some(RedisChoice::Named(name)) if name == "cluster" => (false, true),
                Some(RedisChoice::Named(other)) => {
                    return Err(invalid(format!(
                        "{at}: redis = {other:?}: expected true, false or \"cluster\""
                    )))
                }
            };
            for (key, args) in [
                ("user_service", &c.user_service),
                ("post_service", &c.post_service),
            ] {
                for placeholder in [REDIS_PLACEHOLDER, REDIS_CLUSTER_PLACEHOLDER] {
                    if args.iter().any(|a| a.contains(placeholder)) {
                        return Err(invalid(format!(
                            "{at}: {key} uses {placeholder}, which only gateway arguments may use"
                        )));
                    }
                }
            }
            if !redis_cluster
                && c.gateway
                    .iter()
                    .any(|a| a.contains(REDIS_CLUSTER_PLACEHOLDER))
            {
                return Err(invalid(format!(
                    "{at}: gateway uses {REDIS_CLUSTER_PLACEHOLDER} but the configuration does not say redis = \"cluster\""
                )));
            }
            if !redis && c.gateway.iter().any(|a| a.contains(REDIS_PLACEHOLDER)) {
                return Err(invalid(format!(
                    "{at}: gateway uses {REDIS_PLACEHOLDER} but the configuration does not say redis = true"
                )));
            }
            let edge = match c.edge.as_deref() {
                None => false,
                Some("varnish") => true,
                Some(other) => {
                    return Err(invalid(format!(
                    "{at}: edge = {other:?}: the one edge cache the runner starts is \"varnish\""
                )))
                }
            };
            if !edge && c.gateway.iter().any(|a| a.contains(EDGE_PLACEHOLDER)) {
                return Err(invalid(format!(
                    "{at}: gateway uses {EDGE_PLACEHOLDER} but the configuration does not say edge = \"varnish\""
                )));
            }
            if edge && c.gateways.is_some_and(|n| n != 1) {
                return Err(invalid(format!(
                    "{at}: edge = \"varnish\" fronts one gateway; gateways must be 1"
                )));
            }
            let proxied: Vec<String> = graph.started().map(|(_, s)| s.network.clone()).collect();
            let network_given = c.network.is_some();
            let network = NetworkSpec::resolve(c.network.unwrap_or_default(), &at, redis, &proxied)
                .map_err(invalid)?;
            if !graph.lab {
                for (key, args) in [
                    ("user_service", &c.user_service),
                    ("post_service", &c.post_service),
                ] {
                    if !args.is_empty() {
                        return Err(invalid(format!(
                            "{at}: {key}: this experiment brings its own graph; give a subgraph's arguments in subgraphs = {{ NAME = [...] }}"
                        )));
                    }
                }
            }
            if let Some(unknown) = c
                .subgraphs
                .keys()
                .find(|k| graph.lab || !graph.started().any(|(n, _)| n == k.as_str()))
            {
                let started: Vec<&str> = graph.started().map(|(n, _)| n).collect();
                return Err(invalid(format!(
                    "{at}: subgraphs.{unknown}: not a [[services.subgraph]] the runner starts ({})",
                    if graph.lab {
                        "the lab's own graph takes user_service and post_service".to_string()
                    } else {
                        started.join(", ")
                    }
                )));
            }
            for (name, args) in &c.subgraphs {
                if let Some(flag) = runner_owned(args) {
                    return Err(invalid(format!(
                        "{at}: subgraphs.{name} passes {flag}, which the runner sets itself"
                    )));
                }
                for placeholder in [REDIS_PLACEHOLDER, REDIS_CLUSTER_PLACEHOLDER] {
                    if args.iter().any(|a| a.contains(placeholder)) {
                        return Err(invalid(format!(
                            "{at}: subgraphs.{name} uses {placeholder}, which only gateway arguments may use"
                        )));
                    }
                }
            }
            let peer = match (&c.peer, &c.cache) {
                (None, None) => None,
                (None, Some(_)) => {
                    return Err(invalid(format!(
                        "{at}: cache = {{...}} sets a peer's cache; the lab's gateway takes its flags in gateway = [...]"
                    )))
                }
                (Some(name), cache) => {
                    let refused = [
                        (!c.gateway.is_empty(), "gateway = [...] (the lab's gateway's flags; a peer takes cache = {...})"),
                        (c.build.is_some(), "build = {...} (a build of the lab's gateway)"),
                        (c.redis.is_some(), "redis (the lab's gateway's shared cache)"),
                        (c.gateways.is_some_and(|n| n != 1), "gateways (one peer instance per configuration)"),
                    ];
                    if let Some((_, what)) = refused.iter().find(|(set, _)| *set) {
                        return Err(invalid(format!("{at}: peer = {name:?} cannot take {what}")));
                    }
                    Some(PeerConfig::check(&at, name, cache.as_ref()).map_err(invalid)?)
                }
            };
            let external = match &c.url {
                None => None,
                Some(url) => {
                    let refused = [
                        (c.peer.is_some(), "peer (a configuration runs one gateway)"),
                        (
                            c.cache.is_some(),
                            "cache = {...} (the runner does not start that gateway)",
                        ),
                        (
                            !c.gateway.is_empty(),
                            "gateway = [...] (the lab's gateway's flags)",
                        ),
                        (
                            c.build.is_some(),
                            "build = {...} (a build of the lab's gateway)",
                        ),
                        (
                            c.redis.is_some(),
                            "redis (the runner starts nothing for it)",
                        ),
                        (c.gateways.is_some_and(|n| n != 1), "gateways (one address)"),
                        (edge, "edge (the runner starts nothing for it)"),
                        (
                            network_given,
                            "network (the runner starts no subgraphs for it)",
                        ),
                        (
                            !c.subgraphs.is_empty()
                                || !c.user_service.is_empty()
                                || !c.post_service.is_empty(),
                            "subgraph arguments (the runner starts no subgraphs for it)",
                        ),
                    ];
                    if let Some((_, what)) = refused.iter().find(|(set, _)| *set) {
                        return Err(invalid(format!("{at}: url = {url:?} cannot take {what}")));
                    }
                    Some(ExternalGateway::parse(&at, url).map_err(invalid)?)
                }
            };
            let check = c.check.unwrap_or(true);
            let expected_difference = match c.expected_difference {
                Some(why) if why.trim().is_empty() => {
                    return Err(invalid(format!(
                        "{at}: expected_difference must say why the answers differ"
                    )))
                }
                Some(_) if !check => {
                    return Err(invalid(format!(
                        "{at}: expected_difference needs the answer checks (check = false turns them off)"
                    )))
                }
                why => why,
            };
            let max_error_rate = match c.max_error_rate {
                Some(r) => Some(error_rate(r, &format!("{at}: max_error_rate")).map_err(invalid)?),
                None => file_error_rate.or(check.then_some(DEFAULT_MAX_ERROR_RATE)),
            };
            let gateways = match c.gateways {
                None => 1,
                Some(n) if (1..=MAX_GATEWAYS).contains(&n) => n as usize,
                Some(n) => {
                    return Err(invalid(format!(
                        "{at}: gateways = {n}: must be 1 to {MAX_GATEWAYS}"
                    )))
                }
            };
            if load.connections < gateways {
                return Err(invalid(format!(
                    "{at}: gateways = {gateways} needs at least as many connections (load.connections = {})",
                    load.connections
                )));
            }
            let user_service_args = with_common(&file.services.user_service, c.user_service);
            let post_service_args = with_common(&file.services.post_service, c.post_service);
            let subgraph_args: BTreeMap<String, Vec<String>> = if graph.lab {
                [
                    ("user".to_string(), user_service_args.clone()),
                    ("post".to_string(), post_service_args.clone()),
                ]
                .into()
            } else {
                graph
                    .started()
                    .map(|(name, started)| {
                        let own = c.subgraphs.get(name).cloned().unwrap_or_default();
                        (name.to_string(), with_common(&started.args, own))
                    })
                    .collect()
            };
            configs.push(ConfigSpec {
                name: c.name,
                description: c.description,
                // The file's common gateway arguments are the lab's gateway's flags.
                gateway_args: if peer.is_some() {
                    Vec::new()
                } else {
                    with_common(&file.services.gateway, c.gateway)
                },
                user_service_args,
                post_service_args,
                load,
                query,
                workload: config_workload,
                own_query,
                redis,
                redis_cluster,
                edge,
                gateways,
                baseline: c.baseline,
                check,
                network,
                graph: graph.clone(),
                subgraph_args,
                max_error_rate,
                build: c.build.map(|b| b.check(&at)).transpose().map_err(invalid)?,
                gateway_binary: None,
                peer,
                external,
                expected_difference,
            });
        }
        let baseline = file.baseline.unwrap_or_else(|| configs[0].name.clone());
        if !configs.iter().any(|c| c.name == baseline) {
            return Err(invalid(format!(
                "baseline {baseline:?} is not the name of a configuration"
            )));
        }
        for c in &configs {
            if let Some(own) = &c.baseline {
                if !configs.iter().any(|o| o.name == *own) {
                    return Err(invalid(format!(
                        "config {:?}: baseline {own:?} is not the name of a configuration",
                        c.name
                    )));
                }
            }
        }
        let name = file.name.unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "experiment".into())
        });
        Ok(Experiment {
            name,
            description: file.description,
            baseline,
            query: top_query,
            workload,
            run,
            profile,
            configs,
            graph,
        })
    }
}

/// A `max_error_rate` value: a share of the answers, from 0 to 1 (1: never stop).
fn error_rate(value: f64, at: &str) -> Result<f64, String> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!(
            "{at} = {value}: must be a share of the answers from 0 to 1 (1: never stop)"
        ))
    }
}

/// The first argument that is a flag the runner sets itself (`--listen`, `--listen=…`).
fn runner_owned(args: &[String]) -> Option<&String> {
    args.iter().find(|a| {
        RUNNER_OWNED_FLAGS
            .iter()
            .any(|f| *a == f || a.starts_with(&format!("{f}=")))
    })
}

/// A `[load]` table over its defaults (the file's `[load]`, then the built-in ones).
fn resolve_load(
    load: &LoadFile,
    defaults: Option<&LoadSpec>,
    at: &str,
) -> Result<LoadSpec, String> {
    let connections = match load.connections {
        None => defaults.map_or(DEFAULT_CONNECTIONS, |d| d.connections),
        Some(n) if (1..=1_000_000).contains(&n) => n as usize,
        Some(n) => return Err(format!("{at}.connections = {n}: must be 1 to 1000000")),
    };
    let threads = match load.threads {
        None => defaults.map_or(DEFAULT_THREADS, |d| d.threads),
        Some(n) if (1..=4096).contains(&n) => n as usize,
        Some(n) => return Err(format!("{at}.threads = {n}: must be 1 to 4096")),
    };
    let rate = match load.rate {
        None => defaults.and_then(|d| d.rate),
        Some(r) if r.is_finite() && r > 0.0 => Some(r),
        Some(r) => {
            return Err(format!(
                "{at}.rate = {r}: must be a positive number of requests per second"
            ))
        }
    };
    let timeout = match &load.timeout {
        None => defaults.map_or(DEFAULT_TIMEOUT, |d| d.timeout),
        Some(t) => parse_duration(t).map_err(|e| format!("{at}.timeout: {e}"))?,
    };
    Ok(LoadSpec {
        connections,
        threads,
        rate,
        timeout,
    })
}

/// Whether `message` starts with a place (`file:12: `).
fn is_located(message: &str) -> bool {
    message.split_once(": ").is_some_and(|(head, _)| {
        head.rsplit_once(':').is_some_and(|(file, line)| {
            !file.is_empty() && !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit())
        })
    })
}
