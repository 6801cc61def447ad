//! A run stopped from outside leaves nothing behind.
//!
//! `loadgen matrix` is often stopped by a signal: `timeout`, a CI runner or a process
//! manager sends SIGTERM, a person presses Ctrl-C (SIGINT). Without care its children
//! (gateways, subgraphs, redis-server, perf) would outlive it and keep their ports.
//!
//! Every child a run starts is a [`TrackedChild`]: spawned while the process-wide
//! registry is locked, and listed there (weakly) until dropped. [`watch`] starts a
//! thread that waits for SIGTERM or SIGINT; when one comes it stops every listed child
//! by its PID (SIGTERM, then SIGKILL after [`STOP_GRACE`]), refuses any new spawn, writes
//! `INCOMPLETE` into the run's folder (what stopped it and how each child ended), and
//! exits with 128 + the signal's number, as a shell reports a process killed by it.
//!
//! A child's `Child` sits behind a mutex shared by its owner and the registry, and is
//! only ever reaped through it, so a PID is never signalled after the process was
//! reaped (when the kernel could have given the PID to another process).
//!
//! **`kill -9`.** No handler runs on SIGKILL, so each child also asks the kernel to
//! SIGKILL it when its parent goes away (`PR_SET_PDEATHSIG`, set between fork and exec).
//! The kernel ties that request to the parent *thread*, not the process, so every
//! child is spawned from one thread that lives as long as loadgen (`keeper`): a
//! runtime's worker thread that ends early never takes children with it. A child whose
//! parent died between fork and the request refuses to start.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::matrix::services::STOP_GRACE;

/// The file that marks a run folder whose run was stopped before it finished.
pub const INCOMPLETE: &str = "INCOMPLETE";

#[derive(Default)]
struct Registry {
    children: Vec<(String, Weak<Mutex<Child>>)>,
    /// Set once a signal came: no child may start any more.
    stopping: bool,
}

fn registry() -> MutexGuard<'static, Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A child process the run started, stopped by PID if the run is stopped by a signal.
pub struct TrackedChild {
    child: Arc<Mutex<Child>>,
    pid: u32,
}

impl TrackedChild {
    /// Spawn `command` as child `name`; refused once the run is being stopped.
    pub fn spawn(name: &str, command: &mut Command) -> std::io::Result<TrackedChild> {
        let mut registry = registry();
        if registry.stopping {
            return Err(std::io::Error::other(
                "the run is being stopped: no new process",
            ));
        }
        let child = spawn_kept(command)?;
        let pid = child.id();
        let child = Arc::new(Mutex::new(child));
        registry.children.retain(|(_, c)| c.strong_count() > 0);
        registry
            .children
            .push((name.to_string(), Arc::downgrade(&child)));
        Ok(TrackedChild { child, pid })
    }

    /// Run `command` to its end within `deadline`, as a tracked child (it dies with the
    /// runner); its output goes where the command sends it.
    pub fn run_to_end(name: &str, command: &mut Command, deadline: Duration) -> anyhow::Result<()> {
        let child =
            TrackedChild::spawn(name, command).with_context(|| format!("starting {name}"))?;
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait()? {
                if status.success() {
                    return Ok(());
                }
                anyhow::bail!("{name} failed ({status})");
            }
            if start.elapsed() > deadline {
                child.kill();
                anyhow::bail!(
                    "{name} took longer than {} s and was stopped",
                    deadline.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn lock(&self) -> MutexGuard<'_, Child> {
        self.child
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn id(&self) -> u32 {
        self.pid
    }

    /// The exit status, if the process has exited (reaping it).
    pub fn try_wait(&self) -> std::io::Result<Option<ExitStatus>> {
        self.lock().try_wait()
    }

    /// `signal` (SIGTERM, SIGINT, …) to this PID alone, unless the process was already
    /// reaped.
    pub fn signal(&self, signal: libc::c_int) {
        send(&mut self.lock(), signal);
    }

    /// SIGKILL, then reap.
    pub fn kill(&self) {
        let mut child = self.lock();
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// One spawn for the [`keeper`] thread: the command, and where its outcome goes.
struct Spawn {
    command: Command,
    outcome: std::sync::mpsc::Sender<(Command, std::io::Result<Child>)>,
}

/// The thread every child is spawned from, started on first use and never ended, so
/// `PR_SET_PDEATHSIG` fires only when loadgen itself ends.
fn keeper() -> &'static Mutex<std::sync::mpsc::Sender<Spawn>> {
    static KEEPER: OnceLock<Mutex<std::sync::mpsc::Sender<Spawn>>> = OnceLock::new();
    KEEPER.get_or_init(|| {
        let (spawns, requests) = std::sync::mpsc::channel::<Spawn>();
        std::thread::Builder::new()
            .name("matrix-children".into())
            .spawn(move || {
                for Spawn {
                    mut command,
                    outcome,
                } in requests
                {
                    let child = command.spawn();
                    let _ = outcome.send((command, child));
                }
            })
            .expect("spawn the thread children are started from");
        Mutex::new(spawns)
    })
}

/// Spawn `command` from the [`keeper`] thread, SIGKILLed by the kernel when loadgen
/// ends however it ends.
fn spawn_kept(command: &mut Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: between fork and exec the closure calls only prctl(2) and getppid(2),
    // both async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // loadgen ended before the request was made: no signal would come.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let (outcome, answer) = std::sync::mpsc::channel();
    let job = Spawn {
        command: std::mem::replace(command, Command::new("")),
        outcome,
    };
    keeper()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send(job)
        .map_err(|_| std::io::Error::other("the thread that starts children has ended"))?;
    let (returned, child) = answer
        .recv()
        .map_err(|_| std::io::Error::other("the thread that starts children has ended"))?;
    *command = returned;
    child
}

/// `signal` to `child`'s PID if it has not been reaped (the caller holds its lock, so
/// it cannot be reaped meanwhile and the PID cannot have been reused).
fn send(child: &mut Child, signal: libc::c_int) {
    if let Ok(None) = child.try_wait() {
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: kill(2) on the PID of our own child, which is not reaped.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }
}

/// Watch for SIGTERM and SIGINT from now on, on behalf of the run writing to `run_dir`.
/// Once per process; a later call only moves the folder the mark goes to.
pub fn watch(run_dir: &Path) {
    static RUN_DIR: OnceLock<Mutex<PathBuf>> = OnceLock::new();
    let dir = RUN_DIR.get_or_init(|| {
        std::thread::Builder::new()
            .name("matrix-signals".into())
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the signal watcher");
                let (name, number) = runtime.block_on(signal());
                let dir = RUN_DIR
                    .get()
                    .map(|d| d.lock().unwrap_or_else(|p| p.into_inner()).clone());
                stop_everything(name, dir.as_deref());
                std::process::exit(128 + number);
            })
            .expect("spawn the signal watcher");
        Mutex::new(PathBuf::new())
    });
    *dir.lock().unwrap_or_else(|p| p.into_inner()) = run_dir.to_path_buf();
}

/// The first SIGTERM or SIGINT: its name and number.
async fn signal() -> (&'static str, i32) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => ("SIGTERM", libc::SIGTERM),
        _ = int.recv() => ("SIGINT", libc::SIGINT),
    }
}

/// Stop every listed child, mark `run_dir` incomplete, and say so.
fn stop_everything(signal: &str, run_dir: Option<&Path>) {
    let children: Vec<(String, Arc<Mutex<Child>>)> = {
        let mut registry = registry();
        registry.stopping = true;
        registry
            .children
            .iter()
            .filter_map(|(name, c)| Some((name.clone(), c.upgrade()?)))
            .collect()
    };
    let running = |c: &Arc<Mutex<Child>>| {
        let mut child = c.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        matches!(child.try_wait(), Ok(None))
    };
    for (_, child) in &children {
        send(
            &mut child.lock().unwrap_or_else(|p| p.into_inner()),
            libc::SIGTERM,
        );
    }
    let until = Instant::now() + STOP_GRACE;
    while Instant::now() < until && children.iter().any(|(_, c)| running(c)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut report = Vec::new();
    for (name, child) in &children {
        let mut child = child.lock().unwrap_or_else(|p| p.into_inner());
        let pid = child.id();
        let how = match child.try_wait() {
            Ok(Some(status)) => format!("exited ({status})"),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                format!("killed after {STOP_GRACE:?} without exiting on SIGTERM")
            }
        };
        report.push(format!("{name} (pid {pid}): {how}"));
    }
    let text = format!(
        "loadgen matrix was stopped by {signal} before the run finished; its figures are partial.\n\
         Processes it had started, stopped by PID:\n{}\n",
        report
            .iter()
            .map(|r| format!("  {r}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    if let Some(dir) = run_dir.filter(|d| d.is_dir()) {
        let _ = std::fs::write(dir.join(INCOMPLETE), &text);
        eprintln!(
            "loadgen matrix: stopped by {signal}; {} marked incomplete",
            dir.display()
        );
    }
    eprint!("{text}");
}
