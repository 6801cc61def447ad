//! `manifest.json`: what is needed to trace a run back to its code, toolchain, machine
//! and inputs — git commit and dirty flag, rustc, CPU model, cores, kernel, the
//! experiment file as it was, the command line, the binaries and a timestamp.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Version tag of `manifest.json`.
pub const SCHEMA: &str = "loadgen.manifest/1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GitState {
    /// `HEAD`, or `None` outside a repository or before the first commit.
    pub commit: Option<String>,
    /// Whether the work tree differs from `HEAD` (untracked files included).
    pub dirty: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BinaryInfo {
    pub name: String,
    pub path: PathBuf,
    pub size_bytes: Option<u64>,
    /// Modification time, seconds since the Unix epoch.
    pub modified_unix_s: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: String,
    pub run_id: String,
    /// UTC, RFC 3339.
    pub timestamp: String,
    pub git: GitState,
    /// The rustc that built loadgen (the services come from the same target directory).
    pub rustc: String,
    pub loadgen_version: String,
    pub cpu_model: Option<String>,
    pub cores: usize,
    pub kernel: Option<String>,
    pub experiment_file: PathBuf,
    /// The experiment file's text, byte for byte.
    pub experiment: String,
    /// loadgen's own command line.
    pub arguments: Vec<String>,
    /// Rounds and windows actually used (after --quick and overrides).
    pub settings: serde_json::Value,
    /// The configurations' order in each round, first round first (rotated each round:
    /// `order.rs`). Empty in manifests written before it was recorded.
    #[serde(default)]
    pub round_order: Vec<Vec<String>>,
    pub binaries: Vec<BinaryInfo>,
    /// The gateway builds configurations named (`build = {...}`), resolved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub builds: Vec<super::builds::ResolvedBuild>,
    /// The peer gateways configurations run (`peer = "NAME"`): node, versions, settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peers: Option<super::peers::install::PreparedPeers>,
}

/// The manifest.json of the run folder `dir`: `None` when there is none (runs made by
/// scripts), an error naming the file when it does not read as a manifest.
pub fn load(dir: &Path) -> anyhow::Result<Option<Manifest>> {
    let path = dir.join("manifest.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(anyhow::anyhow!("reading {}: {e}", path.display())),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("{} is not a loadgen manifest: {e}", path.display()))
}

/// Run `git args…` in `dir` and return its trimmed stdout when it succeeds.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    // --no-optional-locks: reading the state must not even refresh the index.
    let output = Command::new("git")
        .arg("--no-optional-locks")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

pub fn git_state(dir: &Path) -> GitState {
    let commit = git(dir, &["rev-parse", "--verify", "--quiet", "HEAD"]).filter(|c| !c.is_empty());
    // The lab's own output (results/) does not make the build dirty: a run written
    // there just before must not mark the next run of the same commit.
    let dirty = git(
        dir,
        &["status", "--porcelain", "--", ".", ":(exclude)results"],
    )
    .map(|s| !s.is_empty());
    GitState { commit, dirty }
}

/// `model name` of the first CPU in `/proc/cpuinfo`.
pub fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

pub fn kernel() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
}

pub fn binary_info(name: &str, path: &Path) -> BinaryInfo {
    let meta = std::fs::metadata(path).ok();
    BinaryInfo {
        name: name.to_string(),
        path: path.to_path_buf(),
        size_bytes: meta.as_ref().map(|m| m.len()),
        modified_unix_s: meta
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs()),
    }
}

/// Civil date from days since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// UTC time as (`2026-11-30T09:08:48Z`, `20261130-090848`).
pub fn utc_stamps(time: SystemTime) -> (String, String) {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    (
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z"),
        format!("{year:04}{month:02}{day:02}-{h:02}{m:02}{s:02}"),
    )
}

/// One line describing the machine, for the summary.
pub fn machine_line(manifest: &Manifest) -> String {
    format!(
        "Machine: {} ({} cores), kernel {}; {}; commit {}{}.",
        manifest.cpu_model.as_deref().unwrap_or("unknown CPU"),
        manifest.cores,
        manifest.kernel.as_deref().unwrap_or("unknown"),
        manifest.rustc,
        manifest
            .git
            .commit
            .as_deref()
            .map_or("none", |c| &c[..c.len().min(12)]),
        if manifest.git.dirty == Some(true) {
            " (dirty)"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn utc_stamps_match_known_dates() {
        assert_eq!(utc_stamps(UNIX_EPOCH).0, "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_661); // 2000-02-29 01:01:01
        assert_eq!(
            utc_stamps(t),
            ("2000-02-29T01:01:01Z".into(), "20000229-010101".into())
        );
        let t = UNIX_EPOCH + Duration::from_secs(1_798_675_200); // 2026-12-31
        assert_eq!(utc_stamps(t).0, "2026-12-31T00:00:00Z");
    }

    #[test]
    fn machine_facts_are_read() {
        assert!(kernel().is_some());
        let info = binary_info("sh", Path::new("/bin/sh"));
        assert!(info.size_bytes.unwrap() > 0);
        let state = git_state(Path::new("/"));
        assert!(state.commit.is_none() || state.commit.unwrap().len() == 40);
    }
}
