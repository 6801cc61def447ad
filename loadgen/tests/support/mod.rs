//! What the tests that run `loadgen matrix` share: the binary under test, the service
//! binaries beside it, a quick matrix run into a folder, and a fresh scratch folder.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The loadgen binary of this build.
pub fn loadgen() -> &'static str {
    env!("CARGO_BIN_EXE_loadgen")
}

/// The folder of the gateway and subgraph binaries (loadgen's); fails the test, saying
/// what to build, when they are missing.
pub fn require_services() -> PathBuf {
    require_binaries(&["gateway", "user-service", "post-service"])
}

/// The folder of loadgen's binary, where `names` must be built too (the test fails,
/// saying what to build, when one is missing).
pub fn require_binaries(names: &[&str]) -> PathBuf {
    let dir = Path::new(loadgen()).parent().unwrap().to_path_buf();
    for name in names {
        assert!(
            dir.join(name).is_file(),
            "{name} is not built in {}: run `cargo build --workspace` before these tests",
            dir.display()
        );
    }
    dir
}

/// `loadgen matrix` with `flags` on `config`, into `run`, with the services of
/// `bin_dir`; whatever the outcome.
pub fn matrix(flags: &[&str], config: &Path, run: &Path, bin_dir: &Path) -> Output {
    Command::new(loadgen())
        .arg("matrix")
        .args(flags)
        .arg("--config")
        .arg(config)
        .arg("--out")
        .arg(run)
        .arg("--bin-dir")
        .arg(bin_dir)
        .output()
        .unwrap()
}

/// `loadgen matrix --quick` with `times` (`--duration`, `--warmup`) on `config`, into
/// `run`; fails the test, with loadgen's stderr, when the run fails.
pub fn quick_matrix(config: &Path, run: &Path, bin_dir: &Path, times: &[&str]) -> Output {
    let flags: Vec<&str> = std::iter::once("--quick")
        .chain(times.iter().copied())
        .collect();
    let output = matrix(&flags, config, run, bin_dir);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "matrix failed:\n{stderr}");
    output
}

/// A fresh, empty folder for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("loadgen-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The command line the gateway of run record `runs/RECORD.json` was started with.
pub fn gateway_command_line(run: &Path, record: &str) -> Vec<String> {
    let path = run.join("runs").join(format!("{record}.json"));
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let gateway = record["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "gateway")
        .unwrap_or_else(|| panic!("no gateway in {}", path.display()));
    gateway["command_line"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}
