//! The edge cache of `edge = "varnish"` in a `[[config]]`: Debian's Varnish with the
//! lab's VCL (`local-varnish/lab.vcl`) in front of the configuration's one gateway,
//! per round. The load goes through it; the gateway's `{edge}` argument is its purge
//! URL (`--edge-purge {edge}`).
//!
//! It starts before the gateway (so that the gateway knows where to purge), answers
//! its own health path until the gateway is up, and is stopped by PID like every
//! service ([`ServiceProcess`]); its working directory (`-n`, where `varnishstat` reads
//! its counters) is removed when it is dropped. The rendered VCL is written beside the
//! round's logs.
//!
//! What the round reports of it: hits, misses and passes over the window from
//! `varnishstat` ([`EdgeFigures`]), and the CPU of its cache process (the child
//! `varnishd -F` forks, which serves every request) beside the gateway's.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use local_varnish::Counters;
use serde::{Deserialize, Serialize};

use super::services::ServiceProcess;

/// The edge's process name (logs, the CPU table).
pub const EDGE_NAME: &str = "varnish";
/// How often a starting Varnish is asked whether it answers.
const POLL: Duration = Duration::from_millis(50);

/// A running Varnish in front of one gateway.
pub struct EdgeCache {
    pub process: ServiceProcess,
    pub ready: Duration,
    /// `-n`: its working directory.
    workdir: PathBuf,
    varnishstat: PathBuf,
}

/// The message of a run that needs Varnish on a machine without it.
pub fn missing_message(experiment: &str, config: &str) -> String {
    format!(
        "experiment \"{experiment}\" config \"{config}\" says edge = \"varnish\": {}",
        local_varnish::MISSING
    )
}

impl EdgeCache {
    /// Start Varnish on `127.0.0.1:port` in front of the gateway on `gateway_port`; the
    /// rendered VCL goes to `vcl_file`, the output to `log`. Waits until it answers its
    /// own health path, or `deadline` passes.
    pub fn start(
        names: (&str, &str),
        port: u16,
        gateway_port: u16,
        vcl_file: &Path,
        log: &Path,
        deadline: Duration,
    ) -> anyhow::Result<EdgeCache> {
        let missing = || anyhow!(missing_message(names.0, names.1));
        let binary = local_varnish::find_varnishd().ok_or_else(missing)?;
        let varnishstat = local_varnish::find_varnishstat().ok_or_else(missing)?;
        std::fs::write(vcl_file, local_varnish::vcl(gateway_port))
            .with_context(|| format!("writing {}", vcl_file.display()))?;
        // varnishd reads it from its own working directory: the path must be absolute.
        let vcl_file = std::fs::canonicalize(vcl_file)
            .with_context(|| format!("locating {}", vcl_file.display()))?;
        let workdir =
            std::env::temp_dir().join(format!("loadgen-varnish-{}-{port}", std::process::id()));
        let args = local_varnish::arguments(port, &vcl_file, &workdir);
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut process = ServiceProcess::spawn(EDGE_NAME, &binary, &args, addr, log)?;
        let started = Instant::now();
        while !local_varnish::answers(addr) {
            if let Some(status) = process.exited() {
                bail!(
                    "varnishd exited ({status}) before it answered; `{}`; last log lines:\n{}",
                    process.command_line.join(" "),
                    process.log_tail(20)
                );
            }
            if started.elapsed() > deadline {
                bail!(
                    "varnishd on {addr} did not answer within {deadline:?}; last log lines:\n{}",
                    process.log_tail(20)
                );
            }
            std::thread::sleep(POLL);
        }
        Ok(EdgeCache {
            process,
            ready: started.elapsed(),
            workdir,
            varnishstat,
        })
    }

    /// The URL the gateway's `--edge-purge` takes (`{edge}`).
    pub fn purge_url(&self) -> String {
        format!("http://{}/", self.process.addr)
    }

    /// Its counters now.
    pub fn counters(&self) -> anyhow::Result<Counters> {
        local_varnish::counters(&self.varnishstat, &self.workdir)
            .with_context(|| format!("reading varnishstat of {}", self.process.addr))
    }

    /// The PID whose CPU is the edge's: the cache process, or the manager while it has
    /// none.
    pub fn measured_pid(&self) -> u32 {
        local_varnish::cache_process(self.process.pid()).unwrap_or(self.process.pid())
    }
}

impl Drop for EdgeCache {
    fn drop(&mut self) {
        // The process stops itself when dropped (after this); its directory goes now.
        let _ = std::fs::remove_dir_all(&self.workdir);
    }
}

/// What the edge did in a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EdgeFigures {
    /// Client requests it received.
    pub requests: u64,
    /// Answered from a kept answer.
    pub hits: u64,
    /// Looked up, not found, fetched from the gateway.
    pub misses: u64,
    /// Sent to the gateway without a lookup (POST, credentials, `private` answers).
    pub passes: u64,
    /// Purges it took (one ban each).
    pub purges: u64,
    /// Requests it sent to the gateway.
    #[serde(default)]
    pub fetches: u64,
    /// hits / requests.
    pub hit_ratio: Option<f64>,
}

impl EdgeFigures {
    /// The window between two readings.
    pub fn between(before: &Counters, after: &Counters) -> EdgeFigures {
        let d = after.since(before);
        EdgeFigures {
            requests: d.requests,
            hits: d.hits,
            misses: d.misses,
            passes: d.passes,
            purges: d.bans,
            fetches: d.fetches,
            hit_ratio: (d.requests > 0).then(|| d.hits as f64 / d.requests as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_the_difference_and_the_ratio_is_of_requests() {
        let before = Counters {
            requests: 10,
            hits: 4,
            misses: 3,
            passes: 3,
            bans: 1,
            fetches: 6,
        };
        let after = Counters {
            requests: 110,
            hits: 84,
            misses: 13,
            passes: 13,
            bans: 6,
            fetches: 26,
        };
        let f = EdgeFigures::between(&before, &after);
        assert_eq!(
            (f.requests, f.hits, f.misses, f.passes, f.purges, f.fetches),
            (100, 80, 10, 10, 5, 20)
        );
        assert_eq!(f.hit_ratio, Some(0.8));
        assert_eq!(EdgeFigures::between(&after, &after).hit_ratio, None);
    }
}
