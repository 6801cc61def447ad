//! The processes of one configuration in one round: start them on free ports (Redis,
//! or a Redis Cluster, first, then the subgraphs, then the latency proxies of
//! `[config.network]`, then the gateways), wait for `/health`, check the answer, and
//! stop them by PID.
//!
//! Every process is a [`ServiceProcess`], which stops itself when dropped: an error
//! anywhere in a round never leaves a gateway behind.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use hyper::Method;

use super::experiment::{ConfigSpec, QuerySpec, REDIS_CLUSTER_PLACEHOLDER, REDIS_PLACEHOLDER};
use super::http_probe;
use super::network;
use super::redis_cluster::{self, RedisCluster};
use super::redis_server;
use super::services::{free_ports, ServiceProcess, STOP_GRACE};
use super::settings::{Binaries, GATEWAY, POST_SERVICE, USER_SERVICE};
use crate::bench::outcome::body_has_graphql_errors;
use crate::workload::check::check_answer;
use crate::workload::recorder::FreshnessRecorder;
use crate::workload::Workload;

/// How long a service may take to answer `/health` after it starts.
const HEALTH_DEADLINE: Duration = Duration::from_secs(60);
/// Deadline of one answer check.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a configuration's redis-server may take to answer PING.
const REDIS_DEADLINE: Duration = Duration::from_secs(20);

/// The running processes of one configuration.
pub struct Stack {
    pub redis: Option<(ServiceProcess, Duration)>,
    /// The configuration's Redis Cluster (`redis = "cluster"`).
    pub cluster: Option<RedisCluster>,
    pub user: (ServiceProcess, Duration),
    pub post: (ServiceProcess, Duration),
    /// In start order; the first is the profiled one.
    pub gateways: Vec<(ServiceProcess, Duration)>,
    /// `loadgen netproxy` in front of the services `[config.network]` names.
    pub proxies: Vec<(ServiceProcess, Duration)>,
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
        let rt = launch.runtime;
        let instances = config.gateways.max(1);
        let cluster_nodes = if config.redis_cluster {
            redis_cluster::MASTERS
        } else {
            0
        };
        let proxied = config.network.links.len();
        let ports = free_ports(2 + instances + usize::from(config.redis) + cluster_nodes + proxied)
            .context("choosing free ports")?;
        let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let (user_addr, post_addr) = (addr(ports[0]), addr(ports[1]));
        let log = |service: &str| launch.logs.join(format!("{}-{service}.log", launch.tag));
        let with_listen = |listen: SocketAddr, extra: &[String]| {
            let mut args = vec!["--listen".to_string(), listen.to_string()];
            args.extend(extra.iter().cloned());
            args
        };

        // Redis first, so that the gateways find it when they start.
        let redis = if config.redis {
            let binary = launch.redis_binary.ok_or_else(|| {
                anyhow!(redis_server::missing_message(
                    launch.experiment_name,
                    &config.name
                ))
            })?;
            let mut process = redis_server::start(binary, ports[2 + instances], &log("redis"))?;
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
            let first = 2 + instances + usize::from(config.redis);
            Some(rt.block_on(RedisCluster::start(
                binary,
                &cli,
                &ports[first..first + cluster_nodes],
                log,
                REDIS_DEADLINE,
            ))?)
        } else {
            None
        };

        let mut user = ServiceProcess::spawn(
            USER_SERVICE,
            &launch.binaries.user_service,
            &with_listen(user_addr, &config.user_service_args),
            user_addr,
            &log(USER_SERVICE),
        )?;
        let mut post = ServiceProcess::spawn(
            POST_SERVICE,
            &launch.binaries.post_service,
            &with_listen(post_addr, &config.post_service_args),
            post_addr,
            &log(POST_SERVICE),
        )?;
        let user_ready = rt.block_on(user.wait_healthy(HEALTH_DEADLINE))?;
        let post_ready = rt.block_on(post.wait_healthy(HEALTH_DEADLINE))?;

        // The gateways reach a proxied service through its proxy.
        let mut proxies = Vec::with_capacity(proxied);
        let mut reach = |service: &str, addr: SocketAddr| -> anyhow::Result<SocketAddr> {
            let Some(link) = config.network.link(service) else {
                return Ok(addr);
            };
            let port =
                ports[2 + instances + usize::from(config.redis) + cluster_nodes + proxies.len()];
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
        let user_via = reach(network::USER_SERVICE, user_addr)?;
        let post_via = reach(network::POST_SERVICE, post_addr)?;
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
        let mut gateways = Vec::with_capacity(instances);
        for (i, port) in ports[2..2 + instances].iter().enumerate() {
            let gateway_addr = addr(*port);
            let mut gateway_args = vec![
                "--listen".to_string(),
                gateway_addr.to_string(),
                "--subgraph".to_string(),
                format!("user=http://{user_via}/graphql"),
                "--subgraph".to_string(),
                format!("post=http://{post_via}/graphql"),
            ];
            // Every instance gets the same arguments; only the first is sampled.
            if launch.gateway_profiling {
                gateway_args.push("--profiling".to_string());
            }
            gateway_args.extend(gateway_extra.iter().cloned());
            let name = gateway_name(i);
            let mut process = ServiceProcess::spawn(
                &name,
                &launch.binaries.gateway,
                &gateway_args,
                gateway_addr,
                &log(&name),
            )?;
            let ready = rt.block_on(process.wait_healthy(HEALTH_DEADLINE))?;
            gateways.push((process, ready));
        }
        Ok(Stack {
            redis,
            cluster,
            user: (user, user_ready),
            post: (post, post_ready),
            gateways,
            proxies,
        })
    }

    /// Every process with the time it took to be healthy: gateways, latency proxies,
    /// post-service, user-service, redis-server (or the cluster's nodes).
    pub fn processes(&self) -> Vec<(&ServiceProcess, Duration)> {
        let mut all: Vec<(&ServiceProcess, Duration)> =
            self.gateways.iter().map(|(p, d)| (p, *d)).collect();
        all.extend(self.proxies.iter().map(|(p, d)| (p, *d)));
        all.push((&self.post.0, self.post.1));
        all.push((&self.user.0, self.user.1));
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

    /// Processes that serve `/metrics`: the gateways and both subgraphs.
    pub fn scrape_targets(&self) -> Vec<(String, SocketAddr)> {
        let mut all: Vec<(String, SocketAddr)> = self
            .gateways
            .iter()
            .map(|(g, _)| (g.name.clone(), g.addr))
            .collect();
        all.push((USER_SERVICE.to_string(), self.user.0.addr));
        all.push((POST_SERVICE.to_string(), self.post.0.addr));
        all
    }

    /// Name and PID of the processes whose CPU is measured (all but redis-server).
    pub fn measured(&self) -> Vec<(String, u32)> {
        self.processes()
            .iter()
            .filter(|(p, _)| !p.name.starts_with(redis_server::REDIS_NAME))
            .map(|(p, _)| (p.name.clone(), p.pid()))
            .collect()
    }

    /// Ask every gateway what the configuration sends, and check the answer.
    pub fn check(
        &self,
        rt: &tokio::runtime::Runtime,
        config: &ConfigSpec,
        when: &str,
    ) -> anyhow::Result<()> {
        for (g, _) in &self.gateways {
            let checked = match (&config.query, &config.workload) {
                (Some(query), _) => rt.block_on(check_query(g.addr, query)),
                (None, Some(workload)) => rt.block_on(check_workload(g.addr, workload)),
                (None, None) => Ok(()),
            };
            checked
                .with_context(|| format!("{}, {when}: {} at {}", config.name, g.name, g.addr))?;
        }
        Ok(())
    }

    /// Stop everything by PID (SIGTERM, then SIGKILL after a grace period), in the order
    /// of [`Stack::processes`]; returns how each ended.
    pub fn stop(&mut self) -> Vec<String> {
        let mut stopped: Vec<String> = self
            .gateways
            .iter_mut()
            .map(|(g, _)| g.stop(STOP_GRACE))
            .collect();
        stopped.extend(self.proxies.iter_mut().map(|(p, _)| p.stop(STOP_GRACE)));
        stopped.push(self.post.0.stop(STOP_GRACE));
        stopped.push(self.user.0.stop(STOP_GRACE));
        if let Some((r, _)) = &mut self.redis {
            stopped.push(r.stop(STOP_GRACE));
        }
        if let Some(cluster) = &mut self.cluster {
            stopped.extend(cluster.nodes.iter_mut().map(|(n, _)| n.stop(STOP_GRACE)));
        }
        stopped
    }
}

/// Ask the gateway the configuration's query (`{{n}}` read as 0) and compare with the
/// expected answer.
async fn check_query(gateway: SocketAddr, query: &QuerySpec) -> anyhow::Result<()> {
    let answer = http_probe::request(
        gateway,
        Method::POST,
        &query.path,
        &query.headers,
        Some(query.check_body()),
        PROBE_DEADLINE,
    )
    .await
    .context("asking the gateway the experiment's query")?;
    let got: Option<serde_json::Value> = serde_json::from_slice(&answer.body).ok();
    if answer.status != 200 || got.as_ref() != Some(&query.expected) {
        bail!(
            "wrong answer from the gateway (HTTP {}):\n  expected {}\n  got      {}",
            answer.status,
            query.expected,
            answer.text()
        );
    }
    Ok(())
}

/// Send every read operation of the workload once, with the first key of each key
/// set, and check its answer's structure and identities (not versions: writes may
/// have happened). A write is not sent: it would change the data before the load.
async fn check_workload(gateway: SocketAddr, workload: &Workload) -> anyhow::Result<()> {
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
            workload.path(),
            &headers,
            Some(op.body.render(&keys, 0)),
            PROBE_DEADLINE,
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
            bail!(
                "wrong answer to operation {:?}: {}\n  got {}",
                op.name,
                recorder.wrong_examples.join("; "),
                answer.text()
            );
        }
    }
    Ok(())
}
