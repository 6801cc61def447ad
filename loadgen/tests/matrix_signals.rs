//! `loadgen matrix` stopped by a signal leaves nothing behind: SIGTERM (as `timeout`, a
//! CI runner or a process manager sends it) and SIGINT (Ctrl-C) in the middle of a run
//! stop every process it started (subgraphs, gateways, redis-server) by PID, the run's
//! folder is marked `INCOMPLETE`, and loadgen exits with 128 + the signal's number.
//! After SIGKILL, which no handler sees, the kernel ends them (their parent-death
//! signal).
//!
//! The children are found from outside, as an operator would: the processes whose parent
//! is the loadgen under test, read from `/proc`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SEED_QUERY: &str =
    "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";
const SEED_ANSWER: &str = r#"{"data":{"me":{"id":"u1","name":"John","nickname":"John","topPosts":[{"pid":"p1","author":{"id":"u1"}},{"pid":"p3","author":{"id":"u1"}}]},"topPosts":[{"pid":"p1"},{"pid":"p2"}]}}"#;

/// Each run loads both cores of the lab's machine: they take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn bin_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_loadgen"))
        .parent()
        .unwrap()
        .to_path_buf();
    for name in ["gateway", "user-service", "post-service"] {
        assert!(
            dir.join(name).is_file(),
            "{name} is not built in {}: run `cargo build --workspace` before these tests",
            dir.display()
        );
    }
    assert!(
        loadgen::matrix::redis_server::find_on_path().is_some(),
        "redis-server is not on PATH, so this test cannot run (it does not skip): install the \
         Debian package redis-server (apt-get install redis-server)"
    );
    dir
}

/// PIDs and names of the live (not zombie) processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Some((ppid, name, state)) = stat(pid) {
            if ppid == parent && state != 'Z' {
                found.push((pid, name));
            }
        }
    }
    found
}

/// `(ppid, comm, state)` of `pid`, from `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<(u32, String, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text[open + 1..close].to_string();
    let mut rest = text[close + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((ppid, name, state))
}

/// Whether `pid` still runs as the process named `name` (a reused PID would not match).
fn alive(pid: u32, name: &str) -> bool {
    matches!(stat(pid), Some((_, n, state)) if n == name && state != 'Z')
}

fn stop_by_pid(child: &mut Child) {
    if child.try_wait().ok().flatten().is_none() {
        // SAFETY: kill(2) on our own unreaped child.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGKILL);
        }
        let _ = child.wait();
    }
}

/// What an exited child wrote to its (piped) standard error.
fn stderr_of(child: &mut Child) -> String {
    use std::io::Read;
    let mut text = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        pipe.read_to_string(&mut text).ok();
    }
    text
}

/// A long matrix run under way: loadgen, and the five processes it started.
struct LongRun {
    loadgen: Child,
    pid: u32,
    children: Vec<(u32, String)>,
    /// The run's folder, and the test's own.
    run: PathBuf,
    dir: PathBuf,
}

/// Start a long run with a redis-server and two gateways, and wait until all five of
/// its processes run and its measurement window has begun.
fn long_run(signal_name: &str) -> LongRun {
    let bin_dir = bin_dir();
    let dir = std::env::temp_dir().join(format!(
        "loadgen-matrix-{signal_name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("long.toml");
    std::fs::write(
        &config,
        format!(
            r#"name = "stopped"
[query]
document = "{SEED_QUERY}"
expected = '{SEED_ANSWER}'
[load]
connections = 4
threads = 1
[[config]]
name = "layered"
redis = true
gateways = 2
gateway = ["--ttl", "10", "--storage", "layered", "--redis", "{{redis}}"]
"#
        ),
    )
    .unwrap();
    let run = dir.join("run");
    let mut loadgen = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "matrix",
            "--quick",
            "--duration",
            "120s",
            "--warmup",
            "1s",
            "--config",
        ])
        .arg(&config)
        .arg("--out")
        .arg(&run)
        .arg("--bin-dir")
        .arg(&bin_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = loadgen.id();

    // redis-server, user-service, post-service and two gateways.
    let until = Instant::now() + Duration::from_secs(60);
    let children = loop {
        let children = children_of(pid);
        if children.len() >= 5 {
            break children;
        }
        if Instant::now() > until || loadgen.try_wait().unwrap().is_some() {
            stop_by_pid(&mut loadgen);
            let stderr = stderr_of(&mut loadgen);
            panic!("the run did not start its five processes (saw {children:?}):\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Into the measurement window.
    std::thread::sleep(Duration::from_secs(2));
    LongRun {
        loadgen,
        pid,
        children,
        run,
        dir,
    }
}

/// Stop a long run with `signal` (SIGTERM or SIGINT), and check what is left.
fn stopped_by(signal: libc::c_int, signal_name: &str) {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let LongRun {
        mut loadgen,
        pid,
        children,
        run,
        dir,
    } = long_run(signal_name);
    // SAFETY: kill(2) on our own unreaped child.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
    let until = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = loadgen.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > until {
            stop_by_pid(&mut loadgen);
            panic!("loadgen matrix did not exit within 30 s of {signal_name}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = stderr_of(&mut loadgen);

    let survivors: Vec<_> = children
        .iter()
        .filter(|(pid, name)| alive(*pid, name))
        .collect();
    for (pid, _) in &survivors {
        // SAFETY: best-effort cleanup of a process the test found, by its PID.
        unsafe {
            libc::kill(*pid as libc::pid_t, libc::SIGKILL);
        }
    }
    assert!(
        survivors.is_empty(),
        "processes outlived loadgen matrix stopped by {signal_name}: {survivors:?}\n{stderr}"
    );
    let names: Vec<&str> = children.iter().map(|(_, n)| n.as_str()).collect();
    for expected in ["redis-server", "user-service", "post-service", "gateway"] {
        assert!(
            names.iter().any(|n| n.starts_with(expected)),
            "{expected} among {names:?}"
        );
    }
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.code(),
        Some(128 + signal),
        "exit status {status:?} ({:?})\n{stderr}",
        status.signal()
    );
    let mark = std::fs::read_to_string(run.join("INCOMPLETE"))
        .unwrap_or_else(|e| panic!("no INCOMPLETE mark in {}: {e}\n{stderr}", run.display()));
    assert!(mark.contains(signal_name), "{mark}");
    for (pid, _) in &children {
        assert!(mark.contains(&format!("pid {pid}")), "{pid} in {mark}");
    }
    assert!(
        !run.join("summary.json").exists(),
        "a stopped run writes no summary"
    );
    assert!(stderr.contains("marked incomplete"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sigterm_stops_every_process_the_run_started() {
    stopped_by(libc::SIGTERM, "SIGTERM");
}

#[test]
fn sigint_stops_every_process_the_run_started() {
    stopped_by(libc::SIGINT, "SIGINT");
}

#[test]
fn sigkill_leaves_no_process_the_run_started() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut run = long_run("SIGKILL");
    // SAFETY: kill(2) on our own unreaped child.
    unsafe {
        libc::kill(run.pid as libc::pid_t, libc::SIGKILL);
    }
    let status = run.loadgen.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    // The kernel SIGKILLs each child as its parent goes: give it a moment, bounded.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let survivors: Vec<_> = run
            .children
            .iter()
            .filter(|(pid, name)| alive(*pid, name))
            .collect();
        if survivors.is_empty() {
            break;
        }
        if Instant::now() > until {
            for (pid, _) in &survivors {
                // SAFETY: best-effort cleanup of a process the test found, by its PID.
                unsafe {
                    libc::kill(*pid as libc::pid_t, libc::SIGKILL);
                }
            }
            panic!("processes outlived loadgen matrix killed by SIGKILL: {survivors:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !run.run.join("summary.json").exists(),
        "a killed run writes no summary"
    );
    std::fs::remove_dir_all(&run.dir).ok();
}
