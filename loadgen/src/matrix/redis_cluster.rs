//! A private Redis Cluster per configuration and round (`redis = "cluster"` in
//! `[[config]]`): three redis-server masters on free ports, formed with `redis-cli
//! --cluster create`, their seed URLs put where the gateway arguments say
//! `{redis-cluster}`, stopped by PID at the end.
//!
//! How a cluster is formed (node arguments, `redis-cli`, waiting for `cluster_state:ok`)
//! is `local-redis-cluster`'s, shared with the tests. The node processes themselves are
//! [`ServiceProcess`]es started here, so the runner's signal handling knows them and
//! stops them like any other service.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};

use super::redis_server::{self, REDIS_NAME};
use super::services::ServiceProcess;
use local_redis_cluster::resp::{command, Reply};

/// How many masters a configuration's cluster has.
pub const MASTERS: usize = local_redis_cluster::NODES;
/// The binary that forms the cluster, looked up on `PATH`.
pub const REDIS_CLI: &str = "redis-cli";
/// How long forming the cluster may take.
const FORM_DEADLINE: Duration = Duration::from_secs(30);
/// Deadline of one `DBSIZE`.
const ASK_DEADLINE: Duration = Duration::from_secs(2);

/// A running cluster: its nodes (each with the time it took to answer PING).
pub struct RedisCluster {
    pub nodes: Vec<(ServiceProcess, Duration)>,
}

/// The name of the `i`-th node: `redis-1`, `redis-2`, … (the runner leaves every
/// process named `redis…` out of the CPU it measures).
pub fn node_name(i: usize) -> String {
    format!("{REDIS_NAME}-{}", i + 1)
}

/// `redis-cli` on `PATH` (it comes with Debian's redis-server, in redis-tools).
pub fn find_redis_cli() -> Option<PathBuf> {
    redis_server::find_binary(REDIS_CLI)
}

impl RedisCluster {
    /// Starts `binary` on `ports` (one master each), forms the cluster with `redis_cli`
    /// and waits until every node says `cluster_state:ok`. Node `i` logs to
    /// `log(node_name(i))`; each node keeps its cluster config next to its log.
    pub async fn start(
        binary: &Path,
        redis_cli: &Path,
        ports: &[u16],
        log: impl Fn(&str) -> PathBuf,
        deadline: Duration,
    ) -> anyhow::Result<RedisCluster> {
        let mut nodes = Vec::with_capacity(ports.len());
        for (i, &port) in ports.iter().enumerate() {
            let name = node_name(i);
            let log = log(&name);
            let config = log.with_extension("nodes.conf");
            let _ = std::fs::remove_file(&config);
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let args = local_redis_cluster::node_arguments(port, &config);
            let process = ServiceProcess::spawn(&name, binary, &args, addr, &log)?;
            nodes.push(process);
        }
        let mut ready = Vec::with_capacity(nodes.len());
        for node in &mut nodes {
            ready.push(redis_server::wait_ready(node, deadline).await?);
        }
        let form_log = log(&format!("{REDIS_NAME}-cluster-create"));
        let ports = ports.to_vec();
        let cli = redis_cli.to_path_buf();
        let formed_in = Instant::now();
        tokio::task::spawn_blocking(move || {
            local_redis_cluster::form(&cli, &ports, &form_log, FORM_DEADLINE)?;
            local_redis_cluster::wait_ok(&ports, FORM_DEADLINE)
        })
        .await
        .context("forming the Redis Cluster")?
        .context("forming the Redis Cluster")?;
        let formed_in = formed_in.elapsed();
        Ok(RedisCluster {
            nodes: nodes
                .into_iter()
                .zip(ready)
                .map(|(node, ready)| (node, ready + formed_in))
                .collect(),
        })
    }

    /// The seed URLs for `--redis-cluster`: every node's, comma-separated.
    pub fn seeds(&self) -> String {
        self.nodes
            .iter()
            .map(|(n, _)| redis_server::url(n.addr))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The sum of the nodes' `total_commands_processed`.
    pub async fn commands_processed(&self) -> anyhow::Result<u64> {
        let mut total = 0;
        for (node, _) in &self.nodes {
            total += redis_server::commands_processed(node.addr).await?;
        }
        Ok(total)
    }

    /// Each master's `DBSIZE`, in node order: how the keys spread.
    pub fn keys_per_master(&self) -> anyhow::Result<Vec<u64>> {
        self.nodes
            .iter()
            .map(
                |(node, _)| match command(node.addr, &["DBSIZE"], ASK_DEADLINE) {
                    Ok(Reply::Int(n)) => Ok(n.max(0) as u64),
                    Ok(other) => Err(anyhow!("DBSIZE at {}: {other:?}", node.addr)),
                    Err(e) => Err(anyhow!("DBSIZE at {}: {e}", node.addr)),
                },
            )
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts a real cluster the way the runner does. It does not skip: without
    /// redis-server and redis-cli it fails and says what to install.
    #[test]
    fn a_cluster_starts_spreads_keys_and_stops_by_pid() {
        let binary = redis_server::find_on_path()
            .unwrap_or_else(|| panic!("redis-server is not on PATH: apt-get install redis-server"));
        let cli = find_redis_cli()
            .unwrap_or_else(|| panic!("redis-cli is not on PATH: apt-get install redis-server"));
        let dir = std::env::temp_dir().join(format!("loadgen-cluster-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ports = crate::matrix::services::free_ports(MASTERS).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut cluster = runtime
            .block_on(RedisCluster::start(
                &binary,
                &cli,
                &ports,
                |name| dir.join(format!("{name}.log")),
                Duration::from_secs(20),
            ))
            .unwrap();
        assert_eq!(cluster.seeds().split(',').count(), MASTERS);
        assert_eq!(cluster.keys_per_master().unwrap(), [0, 0, 0]);
        // Keys of slots on every master, each written to its own master.
        for key in ["a", "b", "c"] {
            let owner = cluster
                .nodes
                .iter()
                .position(|(n, _)| {
                    matches!(
                        command(n.addr, &["SET", key, "1"], ASK_DEADLINE),
                        Ok(Reply::Simple(_))
                    )
                })
                .expect("a master takes the key");
            assert!(owner < MASTERS);
        }
        assert_eq!(cluster.keys_per_master().unwrap().iter().sum::<u64>(), 3);
        assert!(runtime.block_on(cluster.commands_processed()).unwrap() > 0);
        let pids: Vec<u32> = cluster.nodes.iter().map(|(n, _)| n.pid()).collect();
        for (node, _) in &mut cluster.nodes {
            let how = node.stop(Duration::from_secs(10));
            assert!(how.starts_with("stopped by SIGTERM"), "{how}");
        }
        for pid in pids {
            assert!(
                !Path::new(&format!("/proc/{pid}")).exists(),
                "node {pid} runs"
            );
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
