//! `loadgen netproxy-accuracy`: how close the RTT `loadgen netproxy` adds is to its
//! setting on this machine, and what each forwarded chunk costs the proxy.
//!
//! A benchmark, not a test: `scripts/netproxy-accuracy.sh` runs it on a release build
//! and commits the run (`results/<stamp>-netproxy-accuracy/`); the test suite checks
//! only what holds on a loaded machine (the delay is there, order is kept, nothing is
//! lost: `loadgen/tests/netproxy.rs`).
//!
//! Method. An echo server runs in this process (a thread per connection). For each
//! round and each `--rtt` (the order rotating from round to round, so that drift on a
//! shared machine does not always hit the same setting), a `loadgen netproxy` process
//! (this executable) is started in front of it; `--connections` connections then ping
//! 64 bytes back and forth (`--pings` each after 10 unmeasured ones, `--pause` between
//! two), first directly, then through the proxy, then directly again, then through the
//! proxy again: interleaved halves. The added RTT is the median through the proxy
//! minus the median direct; its error is taken against the setting within the round,
//! and the summary gives the median over rounds with the range. The proxy's CPU (user
//! and system time, `/proc/<pid>/stat`) over its two proxied halves, divided by the
//! chunks it forwarded then (a ping and its echo are two), is its cost per chunk.
//!
//! Every read and write has a timeout, every loop a bound, and the proxy is stopped by
//! PID (SIGTERM, then SIGKILL).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde::Serialize;

use crate::cli::NetproxyAccuracyArgs;

/// Longest any single read or write waits.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of one ping.
pub const PING: usize = 64;
/// Pings per connection sent before the measured ones.
const WARM_UP_PINGS: usize = 10;

/// Serve an echo on a fresh 127.0.0.1 port, each connection on its own thread: what
/// arrives goes back; at EOF it answers `BYE` and closes (so a client that half-closed
/// still hears the server's last words).
pub fn echo_server() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || echo(stream));
        }
    });
    Ok(addr)
}

fn echo(mut stream: TcpStream) {
    if stream.set_read_timeout(Some(IO_TIMEOUT)).is_err()
        || stream.set_write_timeout(Some(IO_TIMEOUT)).is_err()
    {
        return;
    }
    let _ = stream.set_nodelay(true);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => {
                let _ = stream.write_all(b"BYE");
                let _ = stream.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => {
                if stream.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

/// A connection to `addr` with no Nagle delay and [`IO_TIMEOUT`] on every read and
/// write.
pub fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(s)
}

/// Round trips of `pings` pings of [`PING`] bytes on each of `connections` concurrent
/// connections to the echo at `addr` (after 10 unmeasured ones each), with `pause`
/// between a connection's pings. Fails if an echo comes back changed (each ping
/// carries its connection and number).
pub fn ping_pong(
    addr: SocketAddr,
    connections: usize,
    pings: usize,
    pause: Duration,
) -> anyhow::Result<Vec<Duration>> {
    let threads: Vec<_> = (0..connections)
        .map(|c| {
            std::thread::spawn(move || -> anyhow::Result<Vec<Duration>> {
                let mut s = connect(addr)?;
                let mut msg = [0u8; PING];
                msg[..8].copy_from_slice(&(c as u64).to_le_bytes());
                let mut back = [0u8; PING];
                let mut rtts = Vec::with_capacity(pings);
                for i in 0..pings + WARM_UP_PINGS {
                    msg[8..16].copy_from_slice(&(i as u64).to_le_bytes());
                    let sent = Instant::now();
                    s.write_all(&msg)?;
                    s.read_exact(&mut back)?;
                    let rtt = sent.elapsed();
                    if back != msg {
                        bail!("connection {c}, ping {i}: the echo came back changed");
                    }
                    if i >= WARM_UP_PINGS {
                        rtts.push(rtt);
                    }
                    std::thread::sleep(pause);
                }
                Ok(rtts)
            })
        })
        .collect();
    let mut all = Vec::with_capacity(connections * pings);
    for t in threads {
        all.extend(t.join().map_err(|_| anyhow!("a ping thread panicked"))??);
    }
    Ok(all)
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// A `loadgen netproxy` process, stopped by PID when dropped.
pub struct ProxyProcess {
    child: Child,
    stdout: BufReader<ChildStdout>,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl ProxyProcess {
    /// Starts `loadgen` (the executable at `loadgen`) `netproxy` in front of `to`, on a
    /// free port, with `extra` flags (`--rtt 2ms`, ...).
    pub fn start(
        loadgen: &std::path::Path,
        to: SocketAddr,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        let mut child = Command::new(loadgen)
            .args([
                "netproxy",
                "--listen",
                "127.0.0.1:0",
                "--to",
                &to.to_string(),
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} netproxy", loadgen.display()))?;
        let mut stdout = child.stdout.take().map(BufReader::new);
        let mut line = String::new();
        // "netproxy listening on 127.0.0.1:P → …"
        let addr = stdout
            .as_mut()
            .and_then(|out| out.read_line(&mut line).ok())
            .and_then(|_| line.strip_prefix("netproxy listening on "))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok());
        match (stdout, addr) {
            (Some(stdout), Some(addr)) => Ok(ProxyProcess {
                child,
                stdout,
                addr,
            }),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                Err(anyhow!(
                    "netproxy did not start: its first line was {line:?}"
                ))
            }
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The CPU time (user + system) it has used so far.
    pub fn cpu(&self) -> anyhow::Result<Duration> {
        crate::proc_usage::process_cpu_time(self.pid())
            .ok_or_else(|| anyhow!("no /proc/{}/stat for the proxy", self.pid()))
    }

    /// SIGTERM, then wait up to 5 s (then SIGKILL): its exit status (none if it had to
    /// be killed) and what it printed after its first line (its counters).
    pub fn stop(&mut self) -> (Option<std::process::ExitStatus>, String) {
        // SAFETY: kill(2) on our own child's PID.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                let mut rest = String::new();
                let _ = self.stdout.read_to_string(&mut rest);
                return (Some(status), rest);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        (None, String::new())
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// One setting in one round.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    pub round: u32,
    /// The `--rtt` given to the proxy, in milliseconds.
    pub rtt_ms: f64,
    pub direct_median_ms: f64,
    pub proxied_median_ms: f64,
    /// The fastest round trip through the proxy: never below the setting.
    pub proxied_min_ms: f64,
    /// Proxied median minus direct median.
    pub added_ms: f64,
    /// `added / rtt - 1`, in percent.
    pub error_percent: f64,
    /// The proxy's CPU over its proxied halves per chunk forwarded then, in µs.
    pub cpu_us_per_chunk: f64,
    /// Round trips measured each way (direct, proxied).
    pub samples: usize,
}

/// What a run measured, as `--json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct AccuracyReport {
    pub connections: usize,
    pub pings: usize,
    pub pause_ms: f64,
    pub rounds: u32,
    pub measurements: Vec<Measurement>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Measures one setting (see the module documentation).
fn measure(
    loadgen: &std::path::Path,
    echo: SocketAddr,
    rtt: Duration,
    args: &NetproxyAccuracyArgs,
    round: u32,
) -> anyhow::Result<Measurement> {
    let connections = usize::try_from(args.connections)?;
    let half = usize::try_from(args.pings)?.div_ceil(2);
    let flag = format!("{}us", rtt.as_micros());
    let mut proxy = ProxyProcess::start(loadgen, echo, &["--rtt", &flag])?;
    let mut direct = Vec::new();
    let mut proxied = Vec::new();
    let mut cpu = Duration::ZERO;
    for _ in 0..2 {
        direct.extend(ping_pong(echo, connections, half, args.pause)?);
        let before = proxy.cpu()?;
        proxied.extend(ping_pong(proxy.addr, connections, half, args.pause)?);
        cpu += proxy.cpu()?.saturating_sub(before);
    }
    let (status, counters) = proxy.stop();
    if !status.is_some_and(|s| s.success()) {
        bail!("the proxy (--rtt {flag}) did not stop cleanly: {status:?} {counters}");
    }
    let samples = proxied.len();
    let proxied_min = proxied.iter().min().copied().unwrap_or_default();
    let (direct, proxied) = (median(direct), median(proxied));
    let added = proxied.saturating_sub(direct);
    // Two chunks per ping (there and back), warm-up pings included.
    let chunks = (connections * 2 * 2 * (half + WARM_UP_PINGS)) as f64;
    Ok(Measurement {
        round,
        rtt_ms: ms(rtt),
        direct_median_ms: ms(direct),
        proxied_median_ms: ms(proxied),
        proxied_min_ms: ms(proxied_min),
        added_ms: ms(added),
        error_percent: (added.as_secs_f64() / rtt.as_secs_f64() - 1.0) * 100.0,
        cpu_us_per_chunk: cpu.as_secs_f64() * 1e6 / chunks,
        samples,
    })
}

/// `loadgen netproxy-accuracy`: every round, every setting; prints a line per
/// measurement as it lands, then the summary table, and writes the report to `--out`.
pub fn run(args: &NetproxyAccuracyArgs) -> anyhow::Result<()> {
    if args.rtt.iter().any(|r| r.is_zero()) {
        bail!("--rtt: every setting must be more than zero (the error is relative to it)");
    }
    let loadgen = std::env::current_exe().context("finding this executable")?;
    let echo = echo_server().context("starting the echo server")?;
    let mut measurements = Vec::new();
    for round in 1..=args.rounds {
        let n = args.rtt.len();
        for i in 0..n {
            let rtt = args.rtt[(i + round as usize - 1) % n];
            let m = measure(&loadgen, echo, rtt, args, round)?;
            let line = format!(
                "round {round} rtt {:.3} ms: direct {:.3} ms, proxied {:.3} ms (min {:.3}), added {:.3} ms ({:+.1}%), proxy CPU {:.1} µs/chunk",
                m.rtt_ms,
                m.direct_median_ms,
                m.proxied_median_ms,
                m.proxied_min_ms,
                m.added_ms,
                m.error_percent,
                m.cpu_us_per_chunk
            );
            println!("{line}");
            measurements.push(m);
        }
    }
    let report = AccuracyReport {
        connections: usize::try_from(args.connections)?,
        pings: usize::try_from(args.pings)?,
        pause_ms: ms(args.pause),
        rounds: args.rounds,
        measurements,
    };
    if let Some(path) = &args.out {
        let text = serde_json::to_string_pretty(&report)? + "\n";
        std::fs::write(path, text).with_context(|| format!("--out {}", path.display()))?;
    }
    print!("{}", summary(&report));
    Ok(())
}

/// The median of `v` and its range, as `m (lo to hi)`.
fn spread(mut v: Vec<f64>, digits: usize) -> String {
    v.sort_by(f64::total_cmp);
    let mid = v.get(v.len() / 2).copied().unwrap_or(f64::NAN);
    let (lo, hi) = (
        v.first().copied().unwrap_or(f64::NAN),
        v.last().copied().unwrap_or(f64::NAN),
    );
    format!("{mid:.digits$} ({lo:.digits$} to {hi:.digits$})")
}

/// The table per setting: medians over rounds, with their range.
pub fn summary(report: &AccuracyReport) -> String {
    let mut out = format!(
        "\n{} connections, {} pings each per setting and round (halves interleaved with direct), {} ms pause, {} rounds: medians over rounds (range)\n",
        report.connections, report.pings, report.pause_ms, report.rounds
    );
    out.push_str("| --rtt | added RTT (ms) | error (%) | fastest proxied round trip (ms) | proxy CPU per chunk (µs) |\n");
    out.push_str("|---|---:|---:|---:|---:|\n");
    let mut settings: Vec<f64> = report.measurements.iter().map(|m| m.rtt_ms).collect();
    settings.sort_by(f64::total_cmp);
    settings.dedup();
    for rtt in settings {
        let of = |f: fn(&Measurement) -> f64| -> Vec<f64> {
            report
                .measurements
                .iter()
                .filter(|m| m.rtt_ms == rtt)
                .map(f)
                .collect()
        };
        out.push_str(&format!(
            "| {rtt} ms | {} | {} | {} | {} |\n",
            spread(of(|m| m.added_ms), 3),
            spread(of(|m| m.error_percent), 1),
            spread(of(|m| m.proxied_min_ms), 3),
            spread(of(|m| m.cpu_us_per_chunk), 1)
        ));
    }
    out
}
