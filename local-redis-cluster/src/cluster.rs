//! Starting, forming, questioning and stopping a cluster of local redis-server masters.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::resp::{command, Reply};

/// The masters of a [`LocalCluster`] (and of the matrix's clusters).
pub const NODES: usize = 3;
/// Timeout of one question to a node.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a forming cluster is asked whether it is ready.
const POLL: Duration = Duration::from_millis(50);
/// How long a node may take to start, and the cluster to form.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// The arguments of a private redis-server on `127.0.0.1:port`, without persistence
/// (the matrix's single redis-server takes these too).
pub fn server_arguments(port: u16) -> Vec<String> {
    let port = port.to_string();
    [
        "--port",
        &port,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The arguments of one cluster node on `127.0.0.1:port`: [`server_arguments`], its
/// cluster state in `config_file` (which must not be shared with another node), and a
/// 2 s node timeout (a killed master is marked failed in seconds, not the default 15).
pub fn node_arguments(port: u16, config_file: &Path) -> Vec<String> {
    let mut args = server_arguments(port);
    let config = config_file.display().to_string();
    for arg in [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        &config,
        "--cluster-node-timeout",
        "2000",
    ] {
        args.push(arg.to_string());
    }
    args
}

/// `redis-cli --cluster create` over the nodes on `ports` (each a master, slots split
/// evenly in the order given), output to `log`; fails if it does not exit 0 within
/// `deadline` (then it is killed by PID).
pub fn form(redis_cli: &Path, ports: &[u16], log: &Path, deadline: Duration) -> io::Result<()> {
    let out = std::fs::File::create(log)?;
    let mut args = vec!["--cluster".to_string(), "create".to_string()];
    args.extend(ports.iter().map(|p| format!("127.0.0.1:{p}")));
    args.extend(["--cluster-replicas", "0", "--cluster-yes"].map(String::from));
    let mut child = Command::new(redis_cli)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", redis_cli.display())))?;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            if status.success() {
                return Ok(());
            }
            return Err(io::Error::other(format!(
                "`redis-cli {}` failed ({status}); its output:\n{}",
                args.join(" "),
                std::fs::read_to_string(log).unwrap_or_default()
            )));
        }
        if started.elapsed() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other(format!(
                "`redis-cli {}` did not finish within {deadline:?}",
                args.join(" ")
            )));
        }
        std::thread::sleep(POLL);
    }
}

/// Waits until every node on `ports` reports `cluster_state:ok` and knows all of them;
/// fails after `deadline`, saying what the last answers were.
pub fn wait_ok(ports: &[u16], deadline: Duration) -> io::Result<Duration> {
    let started = Instant::now();
    loop {
        let mut last = String::new();
        let mut ready = 0;
        for &port in ports {
            match command(addr(port), &["CLUSTER", "INFO"], ASK_TIMEOUT) {
                Ok(reply) => {
                    let info = reply.text().unwrap_or_default().to_string();
                    let known = info_field(&info, "cluster_known_nodes");
                    if info_field(&info, "cluster_state") == Some("ok")
                        && known == Some(ports.len().to_string().as_str())
                    {
                        ready += 1;
                    } else {
                        last = format!("127.0.0.1:{port}: {}", info.replace("\r\n", " "));
                    }
                }
                Err(e) => last = format!("127.0.0.1:{port}: {e}"),
            }
        }
        if ready == ports.len() {
            return Ok(started.elapsed());
        }
        if started.elapsed() >= deadline {
            return Err(io::Error::other(format!(
                "the cluster was not ok within {deadline:?}; last answer: {last}"
            )));
        }
        std::thread::sleep(POLL);
    }
}

fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A cluster of [`NODES`] masters started by this process. Stops its nodes (SIGKILL, by
/// PID) and removes its directory when dropped.
pub struct LocalCluster {
    ports: Vec<u16>,
    nodes: Vec<Option<Child>>,
    dir: PathBuf,
}

impl LocalCluster {
    /// Starts, forms and waits for a cluster on free ports. Panics, saying what to
    /// install, without `redis-server` and `redis-cli` (Debian: redis-server, which
    /// brings redis-tools); panics with the nodes' answers if it does not form.
    pub fn start() -> LocalCluster {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "local-redis-cluster-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a directory for the cluster's files");
        let listeners: Vec<TcpListener> = (0..NODES)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free port"))
            .collect();
        let ports: Vec<u16> = listeners
            .iter()
            .map(|l| l.local_addr().expect("a local address").port())
            .collect();
        drop(listeners);
        let mut cluster = LocalCluster {
            ports: ports.clone(),
            nodes: Vec::new(),
            dir,
        };
        for &port in &ports {
            let config = cluster.dir.join(format!("nodes-{port}.conf"));
            let log = std::fs::File::create(cluster.dir.join(format!("node-{port}.log")))
                .expect("a node log file");
            let child = Command::new("redis-server")
                .args(node_arguments(port, &config))
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("a node log file"))
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| {
                    panic!(
                        "cannot start redis-server ({e}): these tests need it on PATH \
                         (apt-get install -y redis-server; scripts/test.sh installs it)"
                    )
                });
            cluster.nodes.push(Some(child));
        }
        let started = Instant::now();
        for &port in &ports {
            while !matches!(command(addr(port), &["PING"], ASK_TIMEOUT), Ok(Reply::Simple(ref s)) if s == "PONG")
            {
                assert!(
                    started.elapsed() < START_DEADLINE,
                    "redis-server on port {port} did not answer PING within {START_DEADLINE:?}"
                );
                std::thread::sleep(POLL);
            }
        }
        form(
            Path::new("redis-cli"),
            &ports,
            &cluster.dir.join("create.log"),
            START_DEADLINE,
        )
        .unwrap_or_else(|e| panic!("forming the cluster: {e} (redis-cli comes with redis-server)"));
        wait_ok(&ports, START_DEADLINE).unwrap_or_else(|e| panic!("{e}"));
        cluster
    }

    /// The nodes' ports, in the order their slots were given (node 0 has the lowest).
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// Each node's URL (`redis://127.0.0.1:P`).
    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// The seed list for `--redis-cluster`: every node's URL, comma-separated.
    pub fn seeds(&self) -> String {
        self.urls().join(",")
    }

    /// Asks node `node` one command.
    pub fn ask(&self, node: usize, args: &[&str]) -> io::Result<Reply> {
        command(addr(self.ports[node]), args, ASK_TIMEOUT)
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`, asked of a running node).
    pub fn slot_of(&self, key: &str) -> u16 {
        let live = (0..self.ports.len())
            .find(|&i| self.nodes[i].is_some())
            .expect("a running node");
        let reply = self
            .ask(live, &["CLUSTER", "KEYSLOT", key])
            .expect("CLUSTER KEYSLOT");
        reply
            .int()
            .and_then(|n| u16::try_from(n).ok())
            .expect("a slot number")
    }

    /// The index of the node that serves `key`'s slot (from each node's own line of
    /// `CLUSTER NODES`).
    pub fn master_of(&self, key: &str) -> usize {
        let slot = self.slot_of(key);
        (0..self.ports.len())
            .find(|&i| self.serves(i, slot))
            .unwrap_or_else(|| panic!("no node serves slot {slot} of {key:?}"))
    }

    fn serves(&self, node: usize, slot: u16) -> bool {
        let Ok(reply) = self.ask(node, &["CLUSTER", "NODES"]) else {
            return false;
        };
        let Some(mine) = reply
            .text()
            .unwrap_or_default()
            .lines()
            .find(|l| l.contains("myself"))
            .map(str::to_string)
        else {
            return false;
        };
        mine.split_whitespace().skip(8).any(|range| {
            let (low, high) = range.split_once('-').unwrap_or((range, range));
            matches!((low.parse::<u16>(), high.parse::<u16>()), (Ok(l), Ok(h)) if l <= slot && slot <= h)
        })
    }

    /// Whether node `node` holds `key` now (`EXISTS` asked of that node alone).
    pub fn holds(&self, node: usize, key: &str) -> bool {
        matches!(self.ask(node, &["EXISTS", key]), Ok(Reply::Int(1)))
    }

    /// Each node's `DBSIZE` (keys it holds), in node order.
    pub fn dbsizes(&self) -> Vec<u64> {
        (0..self.ports.len())
            .map(|i| {
                let reply = self.ask(i, &["DBSIZE"]).expect("DBSIZE");
                reply
                    .int()
                    .and_then(|n| u64::try_from(n).ok())
                    .expect("a key count")
            })
            .collect()
    }

    /// Kills node `node` (SIGKILL, by PID) and reaps it.
    pub fn kill(&mut self, node: usize) {
        if let Some(mut child) = self.nodes[node].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for node in 0..self.nodes.len() {
            self.kill(node);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_read() {
        let info = "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_known_nodes:3\r\n";
        assert_eq!(info_field(info, "cluster_state"), Some("ok"));
        assert_eq!(info_field(info, "cluster_known_nodes"), Some("3"));
        assert_eq!(info_field(info, "cluster_size"), None);
    }

    /// A real cluster: it forms, spreads slots over its three masters, and stops by PID.
    #[test]
    fn a_cluster_forms_serves_every_slot_and_stops() {
        let cluster = LocalCluster::start();
        let owners: Vec<usize> = [0u16, 8000, 16383]
            .iter()
            .map(|&slot| {
                (0..NODES)
                    .find(|&i| cluster.serves(i, slot))
                    .expect("an owner")
            })
            .collect();
        assert_eq!(owners, [0, 1, 2], "slots split in node order");
        assert_eq!(cluster.slot_of("foo"), 12182);
        assert_eq!(cluster.master_of("foo"), 2);
        assert_eq!(cluster.dbsizes(), [0, 0, 0]);
        let pids: Vec<u32> = cluster.nodes.iter().flatten().map(Child::id).collect();
        drop(cluster);
        for pid in pids {
            assert!(
                !Path::new(&format!("/proc/{pid}")).exists()
                    || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                        .is_ok_and(|s| s.contains(") Z")),
                "node {pid} still runs"
            );
        }
    }
}
