//! The lab's service processes during a matrix run: start on free ports, wait for
//! `/health`, stop by PID.
//!
//! A [`ServiceProcess`] stops its process when dropped, so an error anywhere in a run
//! (a wrong answer, a failed scrape) never leaves a gateway behind. Stopping sends
//! SIGTERM to that PID alone, waits, and only then kills.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::matrix::http_probe;
use crate::matrix::reaper::TrackedChild;

/// How long a stopped service gets to exit after SIGTERM before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// How often a starting service is asked for `/health`.
const HEALTH_POLL: Duration = Duration::from_millis(50);
/// Deadline of one `/health` request.
const HEALTH_REQUEST_DEADLINE: Duration = Duration::from_secs(1);

/// `n` distinct free TCP ports on 127.0.0.1 (held together while chosen, then released).
pub fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

/// A started service.
pub struct ServiceProcess {
    pub name: String,
    pub addr: SocketAddr,
    pub log: PathBuf,
    pub command_line: Vec<String>,
    child: TrackedChild,
    stopped: bool,
}

impl ServiceProcess {
    /// Start `binary args…` with stdout and stderr going to `log`.
    pub fn spawn(
        name: &str,
        binary: &Path,
        args: &[String],
        addr: SocketAddr,
        log: &Path,
    ) -> anyhow::Result<ServiceProcess> {
        let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone()?;
        let child = TrackedChild::spawn(
            name,
            Command::new(binary)
                .args(args)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err),
        )
        .with_context(|| format!("starting {}", binary.display()))?;
        let mut command_line = vec![binary.display().to_string()];
        command_line.extend(args.iter().cloned());
        Ok(ServiceProcess {
            name: name.to_string(),
            addr,
            log: log.to_path_buf(),
            command_line,
            child,
            stopped: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status, if the process has already exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last `lines` lines of the service's log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Poll `/health` until it answers 200, the process exits, or `deadline` passes.
    pub async fn wait_healthy(&mut self, deadline: Duration) -> anyhow::Result<Duration> {
        self.wait_healthy_at("/health", deadline).await
    }

    /// [`ServiceProcess::wait_healthy`] on another path.
    pub async fn wait_healthy_at(
        &mut self,
        path: &str,
        deadline: Duration,
    ) -> anyhow::Result<Duration> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.exited() {
                anyhow::bail!(
                    "{} exited ({status}) before it was healthy; `{}`; last log lines:\n{}",
                    self.name,
                    self.command_line.join(" "),
                    self.log_tail(20)
                );
            }
            if let Ok(answer) = http_probe::get(self.addr, path, HEALTH_REQUEST_DEADLINE).await {
                if answer.status == 200 {
                    return Ok(started.elapsed());
                }
            }
            if started.elapsed() >= deadline {
                anyhow::bail!(
                    "{} at {} did not answer 200 on {path} within {deadline:?}; last log lines:\n{}",
                    self.name,
                    self.addr,
                    self.log_tail(20)
                );
            }
            tokio::time::sleep(HEALTH_POLL).await;
        }
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL. Returns how it ended.
    pub fn stop(&mut self, grace: Duration) -> String {
        if self.stopped {
            return "already stopped".into();
        }
        self.stopped = true;
        if let Some(status) = self.exited() {
            return format!("had exited: {status}");
        }
        self.child.signal(libc::SIGTERM);
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if let Some(status) = self.exited() {
                return format!("stopped by SIGTERM: {status}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child.kill();
        format!("killed after {grace:?} without exiting on SIGTERM")
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        self.stop(STOP_GRACE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct() {
        let ports = free_ports(3).unwrap();
        assert_eq!(ports.len(), 3);
        assert!(ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2]);
    }

    #[test]
    fn stop_ends_a_process_by_pid() {
        let dir = std::env::temp_dir().join(format!("loadgen-services-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let mut p = ServiceProcess::spawn(
            "sleeper",
            Path::new("sleep"),
            &["30".into()],
            addr,
            &dir.join("s.log"),
        )
        .unwrap();
        assert!(p.exited().is_none());
        let how = p.stop(Duration::from_secs(5));
        assert!(how.starts_with("stopped by SIGTERM"), "{how}");
        assert!(p.exited().is_some());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_service_that_dies_is_reported_with_its_log() {
        let dir =
            std::env::temp_dir().join(format!("loadgen-services-dies-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let port = free_ports(1).unwrap()[0];
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut p = ServiceProcess::spawn(
            "gateway",
            Path::new("sh"),
            &[
                "-c".into(),
                "echo 'unexpected argument --ttl' >&2; exit 2".into(),
            ],
            addr,
            &dir.join("g.log"),
        )
        .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let err = runtime
            .block_on(p.wait_healthy(Duration::from_secs(10)))
            .unwrap_err()
            .to_string();
        assert!(err.contains("gateway exited"), "{err}");
        assert!(err.contains("unexpected argument --ttl"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
