//! `perf record` on the gateway's PID: profiles that see the whole process.
//!
//! - **Event**: the software `cpu-clock` (VMs without a PMU have no hardware counters),
//!   so a sample is taken per `1/hz` of CPU the process spends, in user space, in libc
//!   or in the kernel alike.
//! - **Stacks**: `--call-graph dwarf`. The release build keeps no frame pointers (nor
//!   does Rust's std), so `-g` would cut every user stack after one frame; DWARF
//!   unwinding from the `.eh_frame` and line tables gives whole stacks, at 8 KiB of stack
//!   copied per sample (under 1 MB/s at 99 Hz). Kernel frames come from the kernel's
//!   own call chains.
//! - **Window**: perf starts attached but disabled (`-D -1`), and the runner turns it
//!   on and off through a control FIFO (`--control fifo:ctl,ack`), reading the process's
//!   CPU clock right after each acknowledgement. So the coverage compares samples with
//!   the CPU of exactly the span that was sampled.
//! - **Symbols**: after the services have stopped, `perf script --no-inline` resolves
//!   the stacks (about a second for a 10 s window: it unwinds every DWARF sample; with
//!   inlined frames it would run addr2line for minutes) and inferno's perf collapser
//!   folds them, kernel frames marked `_[k]`; `perf.data` is deleted. perf keeps no copy
//!   of the binaries (`--no-buildid-cache`).

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use inferno::collapse::perf::{Folder, Options};
use inferno::collapse::Collapse;

use crate::matrix::reaper::TrackedChild;
use crate::proc_usage;

/// How long perf may take to attach, or to acknowledge a command.
const PERF_DEADLINE: Duration = Duration::from_secs(10);

/// The perf binary on PATH, when `perf record -e cpu-clock` works here.
pub fn find() -> Result<PathBuf, String> {
    let perf = std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join("perf"))
                .find(|p| p.is_file())
        })
        .ok_or("perf is not installed (Debian: apt-get install linux-perf)")?;
    let probe =
        std::env::temp_dir().join(format!("loadgen-perf-probe-{}.data", std::process::id()));
    let output = Command::new(&perf)
        .args(["record", "-q", "-e", "cpu-clock", "-F", "99", "-o"])
        .arg(&probe)
        .args(["--", "true"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", perf.display()))?;
    std::fs::remove_file(&probe).ok();
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "`perf record -e cpu-clock` fails here ({}): {}",
            output.status,
            err.lines().next().unwrap_or("").trim()
        ));
    }
    Ok(perf)
}

/// A `perf record` attached to one process, enabled only between [`enable`] and
/// [`PerfRecording::stop`].
///
/// [`enable`]: PerfRecording::enable
pub struct PerfRecording {
    perf: PathBuf,
    child: TrackedChild,
    pid: u32,
    hz: u32,
    data: PathBuf,
    fifos: [PathBuf; 2],
    control: File,
    ack: File,
    cpu_at_enable: Option<Duration>,
    stopped: bool,
}

/// A finished recording, not yet symbolized.
pub struct PerfData {
    perf: PathBuf,
    data: PathBuf,
    /// The process's CPU seconds between enable and disable.
    pub cpu_seconds: Option<f64>,
    pub hz: u32,
}

fn mkfifo(path: &Path) -> anyhow::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: a NUL-terminated path; mkfifo has no other preconditions.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("mkfifo {}", path.display()));
    }
    Ok(())
}

impl PerfRecording {
    /// Attach `perf record` (disabled) to `pid`; `data` is where perf writes.
    pub fn start(
        perf: &Path,
        pid: u32,
        hz: u32,
        data: &Path,
        log: &Path,
    ) -> anyhow::Result<PerfRecording> {
        let fifos = [data.with_extension("ctl"), data.with_extension("ack")];
        for f in &fifos {
            std::fs::remove_file(f).ok();
            mkfifo(f)?;
        }
        let log_file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let mut command = Command::new(perf);
        command
            .args(["record", "-D", "-1", "--control"])
            .arg(format!(
                "fifo:{},{}",
                fifos[0].display(),
                fifos[1].display()
            ))
            .args([
                "-e",
                "cpu-clock",
                "-F",
                &hz.to_string(),
                "--call-graph",
                "dwarf",
                // No copy of each profiled binary into ~/.debug (a debug gateway is
                // hundreds of MB).
                "--no-buildid-cache",
                "-p",
            ])
            .arg(pid.to_string())
            .arg("-o")
            .arg(data)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file);
        let child = TrackedChild::spawn("perf", &mut command)
            .with_context(|| format!("starting {}", perf.display()))?;
        // Opening a FIFO's write end fails (ENXIO) until its reader, perf, has it open.
        let until = Instant::now() + PERF_DEADLINE;
        let control = loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifos[0])
            {
                Ok(f) => break f,
                Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => bail!("perf did not open its control FIFO within {PERF_DEADLINE:?}: {e}"),
            }
        };
        let ack = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifos[1])?;
        let recording = PerfRecording {
            perf: perf.to_path_buf(),
            child,
            pid,
            hz,
            data: data.to_path_buf(),
            fifos,
            control,
            ack,
            cpu_at_enable: None,
            stopped: false,
        };
        if let Some(status) = recording.child.try_wait()? {
            bail!(
                "perf record exited at once ({status}); see {}",
                log.display()
            );
        }
        Ok(recording)
    }

    /// Send a control command and wait for perf's `ack`.
    fn command(&mut self, what: &str) -> anyhow::Result<()> {
        self.control.write_all(format!("{what}\n").as_bytes())?;
        let until = Instant::now() + PERF_DEADLINE;
        let mut got = Vec::new();
        let mut buffer = [0u8; 16];
        while !got.windows(3).any(|w| w == b"ack") {
            match self.ack.read(&mut buffer) {
                Ok(n) if n > 0 => got.extend_from_slice(&buffer[..n]),
                _ if Instant::now() >= until => {
                    bail!("perf did not acknowledge {what:?} within {PERF_DEADLINE:?}")
                }
                _ => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        Ok(())
    }

    /// Start sampling now.
    pub fn enable(&mut self) -> anyhow::Result<()> {
        self.command("enable")?;
        self.cpu_at_enable = proc_usage::process_cpu_time(self.pid);
        Ok(())
    }

    /// Stop sampling now and let perf write its file.
    pub fn stop(mut self) -> anyhow::Result<PerfData> {
        self.command("disable")?;
        let cpu_at_disable = proc_usage::process_cpu_time(self.pid);
        self.end_perf();
        let cpu_seconds = match (self.cpu_at_enable, cpu_at_disable) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a).as_secs_f64()),
            _ => None,
        };
        Ok(PerfData {
            perf: self.perf.clone(),
            // Taken, so that dropping the recording leaves the file to `PerfData`.
            data: std::mem::take(&mut self.data),
            cpu_seconds,
            hz: self.hz,
        })
    }

    /// SIGINT perf (it writes its file and exits), then wait for it.
    fn end_perf(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.child.signal(libc::SIGINT);
        let until = Instant::now() + PERF_DEADLINE;
        while Instant::now() < until {
            if self.child.try_wait().ok().flatten().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.child.kill();
        for f in &self.fifos {
            std::fs::remove_file(f).ok();
        }
    }
}

impl Drop for PerfRecording {
    fn drop(&mut self) {
        self.end_perf();
        if !self.data.as_os_str().is_empty() {
            std::fs::remove_file(&self.data).ok();
        }
    }
}

impl PerfData {
    /// Symbolize the samples (`perf script`), fold them with inferno, delete the file.
    pub fn collapse(self) -> anyhow::Result<String> {
        let output = Command::new(&self.perf)
            .arg("script")
            // Inlined frames come from addr2line, one process per binary and minutes per
            // round on this machine (hours for a debug build); without them a sample is
            // charged to the function its code was inlined into.
            .arg("--no-inline")
            // Without the period field inferno counts samples, not nanoseconds of them.
            .args(["-F", "comm,pid,tid,time,event,ip,sym,dso"])
            .arg("-i")
            .arg(&self.data)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .with_context(|| format!("running {} script", self.perf.display()));
        std::fs::remove_file(&self.data).ok();
        let output = output?;
        if !output.status.success() {
            return Err(anyhow!("perf script failed: {}", output.status));
        }
        let mut folded = Vec::new();
        let mut options = Options::default();
        options.include_tid = false;
        // Kernel frames get a `_[k]` suffix: the flamegraph colours them apart.
        options.annotate_kernel = true;
        options.nthreads = 1;
        Folder::from(options)
            .collapse(&output.stdout[..], &mut folded)
            .context("folding perf's stacks")?;
        Ok(String::from_utf8_lossy(&folded).into_owned())
    }
}
