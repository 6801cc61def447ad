//! A private Varnish on 127.0.0.1 in front of one gateway, for the gateway's tests and
//! the matrix runner (loadgen's `edge = "varnish"`), so that both start it the same way.
//!
//! - [`vcl`] renders the lab's VCL (`lab.vcl`, committed beside this crate) for a
//!   gateway's port: it keeps what `Cache-Control` allows and no longer, and purges by
//!   surrogate key.
//! - [`arguments`] are `varnishd`'s: in the foreground (`-F`, so the caller stops it by
//!   PID), on `127.0.0.1:port`, with a working directory of the caller's (`-n`, where
//!   `varnishstat` finds its counters) and a bounded memory store.
//! - [`counters`] reads hits, misses and passes with `varnishstat -1`.
//! - [`cache_process`] finds the cache process: `varnishd -F` is a manager that forks
//!   one child, which serves every request, so its CPU is the edge's.
//! - [`LocalVarnish`] does all of it for a test: a free port, the process (a child of
//!   the test, stopped by PID when dropped), and a wait until it answers.
//!
//! Varnish is Debian's `varnish` package (`scripts/test.sh` installs it). Every wait
//! is bounded by a deadline.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The lab's VCL, with `{gateway_port}` where the gateway's port goes.
pub const LAB_VCL: &str = include_str!("../lab.vcl");
/// Memory the kept answers may take (`-s malloc,…`).
pub const STORE: &str = "malloc,256m";
/// How long a starting Varnish may take to answer.
const START_DEADLINE: Duration = Duration::from_secs(30);
/// How often a starting Varnish is asked.
const POLL: Duration = Duration::from_millis(50);
/// Deadline of `varnishstat`, and of one readiness question.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// The message of a run or a test that needs varnishd on a machine without it.
pub const MISSING: &str =
    "varnishd was not found on PATH or in /usr/sbin; install Debian's varnish (apt-get install varnish; scripts/test.sh does)";

/// `varnishd`: on `PATH`, or in `/usr/sbin` (which a user's `PATH` may lack).
pub fn find_varnishd() -> Option<PathBuf> {
    find("varnishd")
}

/// `varnishstat`, found as [`find_varnishd`] finds `varnishd`.
pub fn find_varnishstat() -> Option<PathBuf> {
    find("varnishstat")
}

fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/bin".into()])
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The lab's VCL with the gateway on `127.0.0.1:gateway_port` as its backend.
pub fn vcl(gateway_port: u16) -> String {
    LAB_VCL.replace("{gateway_port}", &gateway_port.to_string())
}

/// `varnishd`'s arguments: foreground, listening on `127.0.0.1:port`, the VCL at
/// `vcl_file`, its working directory `workdir` (`-n`), the management port on a port of
/// the kernel's choosing on loopback.
pub fn arguments(port: u16, vcl_file: &Path, workdir: &Path) -> Vec<String> {
    [
        "-F",
        "-a",
        &format!("127.0.0.1:{port}"),
        "-f",
        &vcl_file.display().to_string(),
        "-n",
        &workdir.display().to_string(),
        "-s",
        STORE,
        "-T",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// What Varnish counted, from `varnishstat -1` (`MAIN.*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Client requests (`MAIN.client_req`).
    pub requests: u64,
    /// Answered from a kept object (`MAIN.cache_hit`).
    pub hits: u64,
    /// Looked up, not found, fetched (`MAIN.cache_miss`).
    pub misses: u64,
    /// Sent to the gateway without a lookup (`MAIN.s_pass`: POST, credentials) or
    /// after one that found an uncacheable marker (`private`, `no-store`).
    pub passes: u64,
    /// Bans added (`MAIN.bans_added`): each purge is one.
    pub bans: u64,
    /// Requests it sent to the gateway (`MAIN.backend_req`): misses, passes, and
    /// lookups that found an uncacheable marker.
    pub fetches: u64,
}

impl Counters {
    /// `self - earlier`, counter by counter (zero where a counter went back).
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            requests: self.requests.saturating_sub(earlier.requests),
            hits: self.hits.saturating_sub(earlier.hits),
            misses: self.misses.saturating_sub(earlier.misses),
            passes: self.passes.saturating_sub(earlier.passes),
            bans: self.bans.saturating_sub(earlier.bans),
            fetches: self.fetches.saturating_sub(earlier.fetches),
        }
    }

    /// Read from `varnishstat -1` output: `NAME  VALUE  RATE  DESCRIPTION` per line.
    pub fn parse(text: &str) -> Counters {
        let mut c = Counters::default();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let (Some(name), Some(value)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(value) = value.parse::<u64>() else {
                continue;
            };
            match name {
                "MAIN.client_req" => c.requests = value,
                "MAIN.cache_hit" => c.hits = value,
                "MAIN.cache_miss" => c.misses = value,
                "MAIN.s_pass" => c.passes = value,
                "MAIN.bans_added" => c.bans = value,
                "MAIN.backend_req" => c.fetches = value,
                _ => {}
            }
        }
        c
    }
}

/// Varnish's counters now, from the instance whose working directory is `workdir`.
pub fn counters(varnishstat: &Path, workdir: &Path) -> io::Result<Counters> {
    let mut child = Command::new(varnishstat)
        .args(["-n", &workdir.display().to_string(), "-1"])
        .args(["-f", "MAIN.client_req", "-f", "MAIN.cache_hit"])
        .args(["-f", "MAIN.cache_miss", "-f", "MAIN.s_pass"])
        .args(["-f", "MAIN.bans_added", "-f", "MAIN.backend_req"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", varnishstat.display())))?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > ASK_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other(format!(
                "varnishstat did not answer within {ASK_TIMEOUT:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut out = String::new();
    child.stdout.take().map(|mut o| o.read_to_string(&mut out));
    if !status.success() {
        let mut err = String::new();
        child.stderr.take().map(|mut e| e.read_to_string(&mut err));
        return Err(io::Error::other(format!(
            "varnishstat -n {} failed ({status}): {}",
            workdir.display(),
            err.trim()
        )));
    }
    Ok(Counters::parse(&out))
}

/// The PID of the cache process `varnishd -F` (PID `manager`) forked, if it runs.
pub fn cache_process(manager: u32) -> Option<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{manager}/task")).ok()?;
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|children| {
            children
                .split_whitespace()
                .filter_map(|pid| pid.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .next()
}

/// The path Varnish answers itself (the lab's VCL), without the gateway.
pub const HEALTH: &str = "/edge/health";

/// Whether Varnish on `addr` answers its own health path with 200.
pub fn answers(addr: SocketAddr) -> bool {
    let ask = || -> io::Result<bool> {
        let mut stream = TcpStream::connect_timeout(&addr, ASK_TIMEOUT)?;
        stream.set_read_timeout(Some(ASK_TIMEOUT))?;
        let request = format!("HEAD {HEALTH} HTTP/1.1\r\nhost: edge\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes())?;
        let mut head = [0u8; 12];
        let n = stream.read(&mut head)?;
        Ok(head[..n].starts_with(b"HTTP/1.1 200"))
    };
    ask().unwrap_or(false)
}

/// A Varnish of a test in front of the gateway on `127.0.0.1:gateway_port`: started on
/// a free port, stopped by PID (SIGTERM, then SIGKILL) and its directory removed when
/// dropped.
pub struct LocalVarnish {
    pub addr: SocketAddr,
    /// Its working directory (`-n`), with the rendered VCL.
    pub dir: PathBuf,
    child: Child,
}

impl LocalVarnish {
    /// Start Varnish in front of `gateway_port` and wait until it answers; the error
    /// names what was missing or what Varnish said.
    pub fn start(gateway_port: u16) -> io::Result<LocalVarnish> {
        let binary = find_varnishd().ok_or_else(|| io::Error::other(MISSING))?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = std::env::temp_dir().join(format!("lab-varnish-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let vcl_file = dir.join("lab.vcl");
        std::fs::write(&vcl_file, vcl(gateway_port))?;
        let log = std::fs::File::create(dir.join("varnishd.log"))?;
        let child = Command::new(&binary)
            .args(arguments(port, &vcl_file, &dir.join("n")))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut varnish = LocalVarnish {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
            child,
        };
        let started = Instant::now();
        while !answers(varnish.addr) {
            if let Some(status) = varnish.child.try_wait()? {
                let log =
                    std::fs::read_to_string(varnish.dir.join("varnishd.log")).unwrap_or_default();
                return Err(io::Error::other(format!(
                    "varnishd exited ({status}) before it answered:\n{log}"
                )));
            }
            if started.elapsed() > START_DEADLINE {
                return Err(io::Error::other(format!(
                    "varnishd did not answer on {} within {START_DEADLINE:?}",
                    varnish.addr
                )));
            }
            std::thread::sleep(POLL);
        }
        Ok(varnish)
    }

    /// Its counters now.
    pub fn counters(&self) -> io::Result<Counters> {
        let stat = find_varnishstat().ok_or_else(|| io::Error::other(MISSING))?;
        counters(&stat, &self.dir.join("n"))
    }

    /// The URL the gateway's `--edge-purge` takes.
    pub fn purge_url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for LocalVarnish {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(POLL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_from_varnishstat_lines() {
        let text = "MAIN.client_req   24   0.00 Good client requests received\n\
                    MAIN.cache_hit    11   0.00 Cache hits\n\
                    MAIN.cache_miss    7   0.00 Cache misses\n\
                    MAIN.s_pass        3   0.00 Total pass-ed requests seen\n\
                    MAIN.bans_added    2   0.00 Bans added\n\
                    MAIN.backend_req  10   0.00 Backend requests made\n";
        let c = Counters::parse(text);
        assert_eq!(
            c,
            Counters {
                requests: 24,
                hits: 11,
                misses: 7,
                passes: 3,
                bans: 2,
                fetches: 10
            }
        );
        let later = Counters { hits: 20, ..c };
        assert_eq!(later.since(&c).hits, 9);
        assert_eq!(c.since(&later).hits, 0);
    }

    #[test]
    fn the_vcl_names_the_gateway_and_nothing_is_left_unrendered() {
        let rendered = vcl(4242);
        assert!(rendered.contains(".port = \"4242\";"));
        assert!(!rendered.contains("{gateway_port}"));
    }
}
