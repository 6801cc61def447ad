//! The processes of one configuration in one round: start them on free ports (Redis,
//! or a Redis Cluster, first, then the subgraphs the graph has the runner start (the
//! lab's user-service and post-service, or an experiment's `[[services.subgraph]]`),
//! then the latency proxies of `[config.network]`, then the edge cache of
//! `edge = "varnish"`, then the gateways), wait for their health, check the answer,
//! and stop them by PID.
//!
//! Every process is a [`ServiceProcess`], which stops itself when dropped: an error
//! anywhere in a round never leaves a gateway behind.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use hyper::Method;

use super::answer_diff;
use super::edge_cache::{EdgeCache, EDGE_NAME};
use super::experiment::{
    ConfigSpec, EDGE_PLACEHOLDER, REDIS_CLUSTER_PLACEHOLDER, REDIS_PLACEHOLDER,
};
use super::graph::Started;
use super::http_probe;
use super::network;
use super::peers::install::PreparedPeers;
use super::query::QuerySpec;
use super::redis_cluster::{self, RedisCluster};
use super::redis_server;
use super::scraping::UpstreamCounter;
use super::services::{free_ports, ServiceProcess, STOP_GRACE};
use super::settings::{Binaries, GATEWAY};
use crate::bench::outcome::body_has_graphql_errors;
use crate::workload::check::check_answer;
use crate::workload::recorder::FreshnessRecorder;
use crate::workload::Workload;

/// How long a service may take to answer `/health` after it starts.
const HEALTH_DEADLINE: Duration = Duration::from_secs(60);
/// Deadline of one answer check.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(10);
/// Deadline of the answer check after a window: a gateway slower than its load (a Node
/// peer on a deep query) still works through the requests the load left in flight, and
/// the check waits behind them.
pub const AFTER_LOAD_DEADLINE: Duration = Duration::from_secs(60);
/// How long a configuration's redis-server may take to answer PING.
const REDIS_DEADLINE: Duration = Duration::from_secs(20);

/// A subgraph the runner started, with what the graph says of it.
pub struct StartedSubgraph {
    /// Its name for the gateway.
    pub name: String,
    pub spec: Started,
    pub process: ServiceProcess,
    pub ready: Duration,
}

/// The running processes of one configuration.
pub struct Stack {
    pub redis: Option<(ServiceProcess, Duration)>,
    /// The configuration's Redis Cluster (`redis = "cluster"`).
    pub cluster: Option<RedisCluster>,
    /// The subgraphs the runner started, in the graph's order.
    pub subgraphs: Vec<StartedSubgraph>,
    /// In start order; the first is the profiled one.
    pub gateways: Vec<(ServiceProcess, Duration)>,
    /// `loadgen netproxy` in front of the services `[config.network]` names.
    pub proxies: Vec<(ServiceProcess, Duration)>,
    /// Varnish in front of the gateway (`edge = "varnish"`): the load goes through it.
    pub edge: Option<EdgeCache>,
    /// Whether the gateway is a peer's (no profile of its own).
    pub peer: bool,
    /// The gateway the runner did not start (`url = ...`), by name and address: the
    /// stack then holds no process at all.
    pub external: Option<(String, SocketAddr)>,
    /// Whether the gateways serve `/metrics`: the lab's do, a peer's when its launcher
    /// speaks the lab's names.
    pub metered: bool,
}

/// What starting a stack needs to know.
pub struct Launch<'a> {
    pub runtime: &'a tokio::runtime::Runtime,
    pub binaries: &'a Binaries,
    pub redis_binary: Option<&'a Path>,
    pub experiment_name: &'a str,
    /// Where the processes' logs go, and the round's tag (`r1-ttl-0`).
    pub logs: &'a Path,
    pub tag: String,
    /// Start the gateways with `--profiling` (the endpoint profiler).
    pub gateway_profiling: bool,
    /// node and the peers' folders, when a configuration runs a peer gateway.
    pub peers: Option<&'a PreparedPeers>,
}

/// The name of the `i`-th gateway instance: `gateway`, then `gateway-2`, `gateway-3`, …
pub fn gateway_name(i: usize) -> String {
    if i == 0 {
        GATEWAY.to_string()
    } else {
        format!("{GATEWAY}-{}", i + 1)
    }
}

/// `args` with every `{redis}` replaced by `url` (unchanged without a redis-server).
pub fn with_redis_url(args: &[String], url: Option<&str>) -> Vec<String> {
    args.iter()
        .map(|a| match url {
            Some(url) => a.replace(REDIS_PLACEHOLDER, url),
            None => a.clone(),
        })
        .collect()
}

impl Stack {
    /// Start every process of `config` and wait until each is healthy.
    pub fn start(launch: &Launch<'_>, config: &ConfigSpec) -> anyhow::Result<Stack> {
        if let Some(external) = &config.external {
            return Ok(Stack {
                redis: None,
                cluster: None,
                subgraphs: Vec::new(),
                gateways: Vec::new(),
                proxies: Vec::new(),
                edge: None,
                peer: true,
                external: Some((GATEWAY.to_string(), external.addr)),
                metered: false,
            });
        }
        let rt = launch.runtime;
        let instances = config.gateways.max(1);
        let cluster_nodes = if config.redis_cluster {
            redis_cluster::MASTERS
        } else {
            0
        };
        let started: Vec<(&str, &Started)> = config.graph.started().collect();
        let proxied = config.network.links.len();
        let mut ports = free_ports(
            started.len()
                + instances
                + usize::from(config.redis)
                + cluster_nodes
                + proxied
                + usize::from(config.edge),
        )
        .context("choosing free ports")?
        .into_iter();
        let mut next_port = move || ports.next().expect("a port was chosen for every process");
        let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let log = |service: &str| launch.logs.join(format!("{}-{service}.log", launch.tag));

        // Redis first, so that the gateways find it when they start.
        let redis = if config.redis {
            let binary = launch.redis_binary.ok_or_else(|| {
                anyhow!(redis_server::missing_message(
                    launch.experiment_name,
                    &config.name
                ))
            })?;
            let mut process = redis_server::start(binary, next_port(), &log("redis"))?;
            let ready = rt.block_on(redis_server::wait_ready(&mut process, REDIS_DEADLINE))?;
            Some((process, ready))
        } else {
            None
        };
        let cluster = if config.redis_cluster {
            let missing = || {
                anyhow!(redis_server::missing_message(
                    launch.experiment_name,
                    &config.name
                ))
            };
            let binary = launch.redis_binary.ok_or_else(missing)?;
            let cli = redis_cluster::find_redis_cli().ok_or_else(missing)?;
            let nodes: Vec<u16> = (0..cluster_nodes).map(|_| next_port()).collect();
            Some(rt.block_on(RedisCluster::start(
                binary,
                &cli,
                &nodes,
                log,
                REDIS_DEADLINE,
            ))?)
        } else {
            None
        };

        // The subgraphs: all started, then waited for.
        let mut subgraphs = Vec::with_capacity(started.len());
        for (name, spec) in &started {
            let listen = addr(next_port());
            let mut args = vec![spec.listen.clone(), listen.to_string()];
            args.extend(config.subgraph_args.get(*name).cloned().unwrap_or_default());
            let process = ServiceProcess::spawn(
                &spec.process,
                &launch.binaries.find(&spec.binary)?,
                &args,
                listen,
                &log(&spec.process),
            )?;
            subgraphs.push(StartedSubgraph {
                name: name.to_string(),
                spec: (*spec).clone(),
                process,
                ready: Duration::ZERO,
            });
        }
        for s in &mut subgraphs {
            s.ready = rt.block_on(s.process.wait_healthy_at(&s.spec.health, HEALTH_DEADLINE))?;
        }

        // The gateways reach a proxied service through its proxy.
        let mut proxies = Vec::with_capacity(proxied);
        let mut reach = |service: &str, addr: SocketAddr| -> anyhow::Result<SocketAddr> {
            let Some(link) = config.network.link(service) else {
                return Ok(addr);
            };
            let port = next_port();
            let name = format!("{}-{service}", network::PROXY_PREFIX);
            proxies.push(network::start_proxy(
                &std::env::current_exe()?,
                link,
                config.network.seed,
                port,
                addr,
                &log(&name),
            )?);
            Ok(SocketAddr::from(([127, 0, 0, 1], port)))
        };
        let redis_url = match &redis {
            Some((r, _)) => Some(redis_server::url(reach(network::REDIS, r.addr)?)),
            None => None,
        };
        let mut reached = BTreeMap::new();
        for s in &subgraphs {
            let via = reach(&s.spec.network, s.process.addr)?;
            reached.insert(s.name.clone(), format!("http://{via}{}", s.spec.path));
        }
        let gateway_extra = with_redis_url(&config.gateway_args, redis_url.as_deref());
        // A cluster is reached directly: its nodes announce their own addresses.
        let seeds = cluster.as_ref().map(RedisCluster::seeds);
        let gateway_extra: Vec<String> = gateway_extra
            .iter()
            .map(|a| match &seeds {
                Some(seeds) => a.replace(REDIS_CLUSTER_PLACEHOLDER, seeds),
                None => a.clone(),
            })
            .collect();
        // The edge before the gateway it fronts, so that `{edge}` names it.
        let gateway_ports: Vec<u16> = (0..instances).map(|_| next_port()).collect();
        let edge = if config.edge {
            let port = next_port();
            Some(EdgeCache::start(
                (launch.experiment_name, &config.name),
                port,
                gateway_ports[0],
                &launch.logs.join(format!("{}-varnish.vcl", launch.tag)),
                &log(EDGE_NAME),
                HEALTH_DEADLINE,
            )?)
        } else {
            None
        };
        let gateway_extra: Vec<String> = match &edge {
            Some(edge) => gateway_extra
                .iter()
                .map(|a| a.replace(EDGE_PLACEHOLDER, &edge.purge_url()))
                .collect(),
            None => gateway_extra,
        };
        let graph_args = config.graph.gateway_args(&reached);
        let mut gateways = Vec::with_capacity(instances);
        for (i, port) in gateway_ports.into_iter().enumerate() {
            let gateway_addr = addr(port);
            let name = gateway_name(i);
            let (program, gateway_args, health) = match &config.peer {
                Some(peer) => {
                    let prepared = launch.peers.ok_or_else(|| {
                        anyhow!("{}: peer {} was not prepared", config.name, peer.peer.name)
                    })?;
                    let supergraph_file = launch
                        .logs
                        .join(format!("{}-supergraph.graphql", launch.tag));
                    let (node, args) = peer.command_line(
                        prepared,
                        &config.graph,
                        &config.graph.subgraph_urls(&reached),
                        gateway_addr.port(),
                        (&launch.binaries.gateway, &supergraph_file),
                    )?;
                    (node, args, peer.peer.health)
                }
                None => {
                    let mut args = vec!["--listen".to_string(), gateway_addr.to_string()];
                    args.extend(graph_args.iter().cloned());
                    // Every instance gets the same arguments; only the first is sampled.
                    if launch.gateway_profiling {
                        args.push("--profiling".to_string());
                    }
                    args.extend(gateway_extra.iter().cloned());
                    let binary = config
                        .gateway_binary
                        .as_ref()
                        .unwrap_or(&launch.binaries.gateway)
                        .clone();
                    (binary, args, "/health")
                }
            };
            let mut process =
                ServiceProcess::spawn(&name, &program, &gateway_args, gateway_addr, &log(&name))?;
            let ready = rt
                .block_on(process.wait_healthy_at(health, HEALTH_DEADLINE))
                .with_context(|| match &config.peer {
                    Some(p) => format!("peer {} did not start", p.peer.name),
                    None => "the gateway did not start".to_string(),
                })?;
            gateways.push((process, ready));
        }
        Ok(Stack {
            redis,
            cluster,
            subgraphs,
            gateways,
            proxies,
            edge,
            peer: config.peer.is_some(),
            external: None,
            metered: config.peer.as_ref().is_none_or(|p| p.peer.metrics),
        })
    }

    /// Where the load goes, by gateway name: the started gateways, the edge in front
    /// of the one gateway, or the one at the configuration's URL.
    pub fn targets(&self) -> Vec<(String, SocketAddr)> {
        if let Some(edge) = &self.edge {
            return vec![(gateway_name(0), edge.process.addr)];
        }
        match &self.external {
            Some(external) => vec![external.clone()],
            None => self
                .gateways
                .iter()
                .map(|(g, _)| (g.name.clone(), g.addr))
                .collect(),
        }
    }

    /// Every process with the time it took to be healthy: the edge, gateways, latency
    /// proxies, the subgraphs (last started first), redis-server (or the cluster's
    /// nodes).
    pub fn processes(&self) -> Vec<(&ServiceProcess, Duration)> {
        let mut all: Vec<(&ServiceProcess, Duration)> =
            self.edge.iter().map(|e| (&e.process, e.ready)).collect();
        all.extend(self.gateways.iter().map(|(p, d)| (p, *d)));
        all.extend(self.proxies.iter().map(|(p, d)| (p, *d)));
        all.extend(self.subgraphs.iter().rev().map(|s| (&s.process, s.ready)));
        if let Some((r, d)) = &self.redis {
            all.push((r, *d));
        }
        if let Some(cluster) = &self.cluster {
            all.extend(cluster.nodes.iter().map(|(n, d)| (n, *d)));
        }
        all
    }

    /// The URL given for `{redis}`, or the seeds given for `{redis-cluster}`.
    pub fn redis_url(&self) -> Option<String> {
        let single = self.redis.as_ref().map(|(r, _)| redis_server::url(r.addr));
        single.or_else(|| self.cluster.as_ref().map(RedisCluster::seeds))
    }

    /// How many Redis processes answer [`Stack::redis_commands`] (each counts the
    /// runner's own INFO).
    pub fn redis_processes(&self) -> usize {
        usize::from(self.redis.is_some()) + self.cluster.as_ref().map_or(0, |c| c.nodes.len())
    }

    /// The commands Redis (every node of a cluster) processed so far, if there is one.
    pub fn redis_commands(&self, rt: &tokio::runtime::Runtime) -> Option<anyhow::Result<u64>> {
        if let Some((r, _)) = &self.redis {
            return Some(rt.block_on(redis_server::commands_processed(r.addr)));
        }
        let cluster = self.cluster.as_ref()?;
        Some(rt.block_on(cluster.commands_processed()))
    }

    /// Processes that serve `/metrics`: the gateways and the subgraphs that do.
    pub fn scrape_targets(&self) -> Vec<(String, SocketAddr)> {
        let mut all = self.metered_gateways();
        all.extend(self.metered_subgraphs());
        all
    }

    /// Where the subgraphs' requests are counted ([`UpstreamCounter`]).
    pub fn upstream_counter(&self, config: &ConfigSpec) -> UpstreamCounter {
        if config.graph.counts_every_subgraph() {
            UpstreamCounter {
                services: self.metered_subgraphs(),
                metric: UpstreamCounter::SUBGRAPHS,
            }
        } else {
            UpstreamCounter {
                services: self.metered_gateways(),
                metric: UpstreamCounter::GATEWAYS,
            }
        }
    }

    /// The gateways that serve `/metrics` (the lab's, and a peer's that speaks its
    /// names), by name.
    fn metered_gateways(&self) -> Vec<(String, SocketAddr)> {
        if !self.metered {
            return Vec::new();
        }
        self.gateways
            .iter()
            .map(|(g, _)| (g.name.clone(), g.addr))
            .collect()
    }

    /// The started subgraphs that serve `/metrics`, by process name.
    pub fn metered_subgraphs(&self) -> Vec<(String, SocketAddr)> {
        self.subgraphs
            .iter()
            .filter(|s| s.spec.metrics)
            .map(|s| (s.process.name.clone(), s.process.addr))
            .collect()
    }

    /// Name and PID of the processes whose CPU is measured (all but redis-server; the
    /// edge by its cache process).
    pub fn measured(&self) -> Vec<(String, u32)> {
        self.processes()
            .iter()
            .filter(|(p, _)| !p.name.starts_with(redis_server::REDIS_NAME))
            .map(|(p, _)| match &self.edge {
                Some(edge) if p.name == EDGE_NAME => (p.name.clone(), edge.measured_pid()),
                _ => (p.name.clone(), p.pid()),
            })
            .collect()
    }

    /// The edge's counters now, if there is an edge.
    pub fn edge_counters(&self) -> Option<anyhow::Result<local_varnish::Counters>> {
        self.edge.as_ref().map(EdgeCache::counters)
    }

    /// Ask every gateway what the configuration sends, each answer within `deadline`,
    /// and check the answer. A wrong answer is an error, unless the configuration
    /// declares a difference expected (`expected_difference`): then each one found is
    /// returned, as `when: what`.
    pub fn check(
        &self,
        rt: &tokio::runtime::Runtime,
        config: &ConfigSpec,
        when: &str,
        deadline: Duration,
    ) -> anyhow::Result<Vec<String>> {
        let mut differences = Vec::new();
        let path = config.path();
        for (name, addr) in self.targets() {
            let checked = match (&config.query, &config.workload) {
                (Some(query), _) => rt.block_on(check_query(addr, query, path, deadline)),
                (None, Some(workload)) => {
                    rt.block_on(check_workload(addr, workload, path, deadline))
                }
                (None, None) => Ok(()),
            };
            match checked {
                Ok(()) => {}
                Err(e) if config.expected_difference.is_some() && e.is::<WrongAnswer>() => {
                    let first = e.to_string();
                    let first = first.lines().next().unwrap_or_default();
                    differences.push(format!("{when}, {name}: {first}"));
                }
                Err(e) => {
                    return Err(e.context(format!("{}, {when}: {name} at {addr}", config.name)))
                }
            }
        }
        Ok(differences)
    }

    /// Stop everything by PID (SIGTERM, then SIGKILL after a grace period), in the order
    /// of [`Stack::processes`]; returns how each ended.
    pub fn stop(&mut self) -> Vec<String> {
        let mut stopped: Vec<String> = self
            .edge
            .iter_mut()
            .map(|e| e.process.stop(STOP_GRACE))
            .collect();
        stopped.extend(self.gateways.iter_mut().map(|(g, _)| g.stop(STOP_GRACE)));
        stopped.extend(self.proxies.iter_mut().map(|(p, _)| p.stop(STOP_GRACE)));
        stopped.extend(
            self.subgraphs
                .iter_mut()
                .rev()
                .map(|s| s.process.stop(STOP_GRACE)),
        );
        if let Some((r, _)) = &mut self.redis {
            stopped.push(r.stop(STOP_GRACE));
        }
        if let Some(cluster) = &mut self.cluster {
            stopped.extend(cluster.nodes.iter_mut().map(|(n, _)| n.stop(STOP_GRACE)));
        }
        stopped
    }
}

/// An answer that arrived (HTTP 200, JSON) and is not the expected one, as against a
/// request that failed: only this is let through by `expected_difference`.
#[derive(Debug)]
pub struct WrongAnswer(String);

impl std::fmt::Display for WrongAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WrongAnswer {}

/// Ask the gateway the configuration's query (`{{n}}` read as 0) and compare with the
/// expected answer.
async fn check_query(
    gateway: SocketAddr,
    query: &QuerySpec,
    path: &str,
    deadline: Duration,
) -> anyhow::Result<()> {
    let answer = http_probe::request(
        gateway,
        Method::POST,
        path,
        &query.headers,
        Some(query.check_body()),
        deadline,
    )
    .await
    .context("asking the gateway the experiment's query")?;
    let got: Option<serde_json::Value> = serde_json::from_slice(&answer.body).ok();
    if answer.status != 200 || got.as_ref() != Some(&query.expected) {
        let first = match &got {
            Some(got) => answer_diff::first_difference(&query.expected, got)
                .unwrap_or_else(|| "the same JSON, a status other than 200".into()),
            None => "not JSON".into(),
        };
        let message = format!(
            "wrong answer from the gateway (HTTP {}), first difference: {first}\n  expected {}\n  got      {}",
            answer.status,
            query.expected,
            answer.text()
        );
        // An answer that is JSON with status 200 arrived and differs; anything else failed.
        if answer.status == 200 && got.is_some() {
            return Err(WrongAnswer(message).into());
        }
        bail!(message);
    }
    Ok(())
}

/// Send every read operation of the workload once, with the first key of each key
/// set, and check its answer's structure and identities (not versions: writes may
/// have happened). A write is not sent: it would change the data before the load.
async fn check_workload(
    gateway: SocketAddr,
    workload: &Workload,
    path: &str,
    deadline: Duration,
) -> anyhow::Result<()> {
    let keys: Vec<u64> = workload.keys.iter().map(|k| k.first).collect();
    let mut recorder = FreshnessRecorder::new(workload);
    for (index, op) in workload.operations.iter().enumerate() {
        if op.is_write() {
            continue;
        }
        let headers: Vec<String> = op
            .headers
            .iter()
            .map(|(name, value)| format!("{}: {}", name, value.render(&keys, 0)))
            .collect();
        let answer = http_probe::request(
            gateway,
            Method::POST,
            path,
            &headers,
            Some(op.body.render(&keys, 0)),
            deadline,
        )
        .await
        .with_context(|| format!("asking the gateway operation {:?}", op.name))?;
        if answer.status != 200 || body_has_graphql_errors(&answer.body) {
            bail!(
                "operation {:?} failed (HTTP {}): {}",
                op.name,
                answer.status,
                answer.text()
            );
        }
        check_answer(
            workload,
            index,
            &keys,
            &answer.body,
            None,
            0,
            false,
            &mut recorder,
        );
        if recorder.wrong_answers > 0 {
            return Err(WrongAnswer(format!(
                "wrong answer to operation {:?}: {}\n  got {}",
                op.name,
                recorder.wrong_examples.join("; "),
                answer.text()
            ))
            .into());
        }
    }
    Ok(())
}
