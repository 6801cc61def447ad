//! Where the peers live and whether they are installed: the repository's `peers/`
//! folder (or `LOADGEN_PEERS_DIR`); for a Node peer, `npm ci` of its committed lock and
//! the versions that lock resolved; for a Rust peer, `cargo install --locked` of its
//! pinned version into a folder outside the repository. Each install is bounded and a
//! child that dies with loadgen; what was found goes into the manifest and `loadgen peers`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};

use super::{Peer, Runtime};
use crate::matrix::builds::repository_root;
use crate::matrix::reaper::TrackedChild;
use crate::matrix::redis_server::{find_binary, is_executable};

/// Overrides where the peers' folders are (tests use a copy).
pub const PEERS_DIR_ENV: &str = "LOADGEN_PEERS_DIR";
/// Longest `npm ci` of one peer.
const INSTALL_DEADLINE: Duration = Duration::from_secs(600);
/// Longest `cargo install` of one peer (Hive Router: about 40 minutes on 2 cores).
const BUILD_DEADLINE: Duration = Duration::from_secs(2 * 3600);

/// The folder that holds `peers/NAME/`.
pub fn peers_root() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(PEERS_DIR_ENV) {
        return Ok(PathBuf::from(dir));
    }
    Ok(repository_root()
        .map_err(|_| {
            anyhow!(
                "the peers live in the lab's repository (peers/): run loadgen inside it, or set {PEERS_DIR_ENV}"
            )
        })?
        .join("peers"))
}

/// `peers/NAME/`.
pub fn folder(peer: &Peer) -> anyhow::Result<PathBuf> {
    Ok(peers_root()?.join(peer.name))
}

/// Where a Rust peer is built (`cargo install --root`): its variable, or its default
/// folder under `$HOME`.
pub fn cargo_root(peer: &Peer) -> anyhow::Result<PathBuf> {
    let Runtime::Cargo {
        root_env,
        default_root,
        ..
    } = peer.runtime
    else {
        bail!("peer {} is not built by cargo", peer.name);
    };
    if let Some(dir) = std::env::var_os(root_env) {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME")
        .ok_or_else(|| anyhow!("peer {}: set {root_env} or HOME", peer.name))?;
    Ok(PathBuf::from(home).join(default_root))
}

/// Whether the peer in `dir` is ready to run: `npm ci` has run there (npm writes a
/// hidden lock), or its binary is built.
pub fn is_installed(peer: &Peer, dir: &Path) -> bool {
    match peer.runtime {
        Runtime::Node { .. } => dir
            .join("node_modules")
            .join(".package-lock.json")
            .is_file(),
        Runtime::Cargo { binary, .. } => cargo_root(peer)
            .map(|root| is_executable(&root.join("bin").join(binary)))
            .unwrap_or(false),
    }
}

/// What refusing a missing peer says, naming the configuration and the way out.
pub fn missing_message(peer: &Peer, dir: &Path, config: &str) -> String {
    match peer.runtime {
        Runtime::Node { .. } => format!(
            "config {config:?}: peer {} is not installed ({} has no node_modules): run `loadgen peers install {}` (npm ci of its committed package-lock.json), or pass --install-peers",
            peer.name,
            dir.display(),
            peer.name
        ),
        Runtime::Cargo { krate, version, cost, .. } => format!(
            "config {config:?}: peer {} is not built ({}): run `loadgen peers install {}` (cargo install {krate} {version}, {cost}), or pass --install-peers",
            peer.name,
            cargo_root(peer).map_or_else(|e| e.to_string(), |r| format!("nothing in {}/bin", r.display())),
            peer.name
        ),
    }
}

/// Install the peer: `npm ci` in its folder, or `cargo install` of its version; a line
/// is printed before and after.
pub fn install(peer: &Peer, dir: &Path) -> anyhow::Result<()> {
    match peer.runtime {
        Runtime::Node { .. } => npm_ci(peer, dir),
        Runtime::Cargo {
            krate,
            version,
            features,
            cost,
            ..
        } => {
            let root = cargo_root(peer)?;
            eprintln!(
                "loadgen peers: building {} ({krate} {version} from crates.io) into {} ({cost}; cargo's progress follows) …",
                peer.name,
                root.display()
            );
            let mut command = Command::new("cargo");
            command
                .args(["install", krate, "--version", version, "--locked", "--root"])
                .arg(&root)
                .stdin(Stdio::null());
            if !features.is_empty() {
                command.args(["--features", &features.join(",")]);
            }
            run_step(peer, "cargo install", "built", &mut command, BUILD_DEADLINE)
        }
    }
}

/// Run one install step of `peer` (`npm ci`, `cargo install`) to its end within
/// `deadline`, as a child that dies with loadgen, and say how long it took.
fn run_step(
    peer: &Peer,
    step: &str,
    done: &str,
    command: &mut Command,
    deadline: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    TrackedChild::run_to_end(&format!("{step} ({})", peer.name), command, deadline)
        .with_context(|| format!("{step} of peer {}", peer.name))?;
    eprintln!(
        "loadgen peers: {} {done} in {:.0} s",
        peer.name,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `npm ci` in the peer's folder, printing a line before and after.
fn npm_ci(peer: &Peer, dir: &Path) -> anyhow::Result<()> {
    if !dir.join("package-lock.json").is_file() {
        bail!(
            "peer {}: {} has no package-lock.json",
            peer.name,
            dir.display()
        );
    }
    let npm = find_binary("npm").ok_or_else(|| {
        anyhow!(
            "peer {}: npm is not on PATH (Node 20 and npm: apt-get install -y nodejs npm)",
            peer.name
        )
    })?;
    eprintln!(
        "loadgen peers: installing {} in {} (npm ci, at most {} min) …",
        peer.name,
        dir.display(),
        INSTALL_DEADLINE.as_secs() / 60
    );
    run_step(
        peer,
        "npm ci",
        "installed",
        Command::new(npm)
            .current_dir(dir)
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .stdin(Stdio::null()),
        INSTALL_DEADLINE,
    )
}

/// An npm package and the version the peer's lock pins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pinned {
    pub package: String,
    pub version: String,
}

/// The versions of the peer's packages: from its committed lock, or its pinned crate.
pub fn pinned(peer: &Peer, dir: &Path) -> anyhow::Result<Vec<Pinned>> {
    let packages = match peer.runtime {
        Runtime::Node { packages } => packages,
        Runtime::Cargo { krate, version, .. } => {
            return Ok(vec![Pinned {
                package: krate.to_string(),
                version: version.to_string(),
            }])
        }
    };
    let path = dir.join("package-lock.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let lock: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    packages
        .iter()
        .map(|package| {
            let version = lock["packages"][format!("node_modules/{package}")]["version"]
                .as_str()
                .ok_or_else(|| anyhow!("{}: no version of {package}", path.display()))?;
            Ok(Pinned {
                package: package.to_string(),
                version: version.to_string(),
            })
        })
        .collect()
}

/// `node --version`, for the manifest.
pub fn node_version(node: &Path) -> Option<String> {
    let out = Command::new(node).arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// What the run found for its peers before anything starts, and records in the manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PreparedPeers {
    /// The `node` that runs the Node peers (none when only Rust peers run).
    pub node: Option<PathBuf>,
    pub node_version: Option<String>,
    /// The folder holding `peers/NAME/`.
    pub root: PathBuf,
    /// One record per configuration that runs a peer.
    pub configs: Vec<PeerRecord>,
}

/// A configuration's peer, as the manifest and the report name it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerRecord {
    pub config: String,
    pub peer: String,
    /// `mercurius, ttl = 0 s`.
    pub label: String,
    pub cache: std::collections::BTreeMap<String, f64>,
    pub versions: Vec<Pinned>,
    /// The runtime settings it runs with.
    pub settings: String,
}

impl PeerRecord {
    /// `mercurius, ttl = 0 s (@mercuriusjs/gateway 5.2.0, mercurius-cache 8.0.0)`.
    pub fn describe(&self) -> String {
        let versions: Vec<String> = self
            .versions
            .iter()
            .map(|v| format!("{} {}", v.package, v.version))
            .collect();
        if versions.is_empty() {
            return self.label.clone();
        }
        format!("{} ({})", self.label, versions.join(", "))
    }
}

impl PreparedPeers {
    /// The launcher of `peer`.
    pub fn entry(&self, peer: &Peer) -> PathBuf {
        self.root.join(peer.name).join(peer.entry)
    }
}

/// Find node and every peer the configurations run (installing missing ones when
/// `install` is set), before anything starts; `None` when no configuration runs one.
pub fn prepare(
    configs: &[(String, super::PeerConfig)],
    install_missing: bool,
) -> anyhow::Result<Option<PreparedPeers>> {
    if configs.is_empty() {
        return Ok(None);
    }
    // node is needed only when a Node peer runs.
    let node_user = configs
        .iter()
        .find(|(_, c)| matches!(c.peer.runtime, Runtime::Node { .. }));
    let node = match node_user {
        Some((config, _)) => Some(find_binary("node").ok_or_else(|| {
            anyhow!(
                "config {config:?} runs a Node peer, and node is not on PATH (Node 20: apt-get install -y nodejs npm)"
            )
        })?),
        None => None,
    };
    let root = peers_root()?;
    let mut records = Vec::with_capacity(configs.len());
    for (config, peer_config) in configs {
        let peer = peer_config.peer;
        let dir = root.join(peer.name);
        if !is_installed(peer, &dir) {
            if !install_missing {
                bail!(missing_message(peer, &dir, config));
            }
            install(peer, &dir)?;
        }
        records.push(PeerRecord {
            config: config.clone(),
            peer: peer.name.to_string(),
            label: peer_config.label(),
            cache: peer_config.cache.clone(),
            versions: pinned(peer, &dir)?,
            settings: peer.settings.to_string(),
        });
    }
    Ok(Some(PreparedPeers {
        node_version: node.as_deref().and_then(node_version),
        node,
        root,
        configs: records,
    }))
}
