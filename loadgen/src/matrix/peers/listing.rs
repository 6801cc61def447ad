//! `loadgen peers`: every peer the matrix can run, with its pinned versions, what it
//! caches, how `cache = { ... }` maps onto its own settings, and whether it is
//! installed; `loadgen peers install [NAME…]` installs them.

use super::install::{self, Pinned};
use super::{find, Peer, PEERS};

/// Print the list.
pub fn print() -> anyhow::Result<()> {
    let root = install::peers_root()?;
    println!(
        "peers in {} (use one with peer = \"NAME\" in a [[config]])",
        root.display()
    );
    for peer in PEERS {
        print_one(peer, &root.join(peer.name));
    }
    Ok(())
}

fn print_one(peer: &Peer, dir: &std::path::Path) {
    let versions = match install::pinned(peer, dir) {
        Ok(v) => v
            .iter()
            .map(|Pinned { package, version }| format!("{package} {version}"))
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => format!("(no lock: {e:#})"),
    };
    let state = match (install::is_installed(peer, dir), peer.runtime) {
        (true, _) => "installed".to_string(),
        (false, super::Runtime::Node { .. }) => {
            format!("not installed: loadgen peers install {}", peer.name)
        }
        (false, super::Runtime::Cargo { cost, .. }) => format!(
            "not built: loadgen peers install {} ({cost}; optional, never by CI)",
            peer.name
        ),
    };
    println!("\n{}  [{state}]", peer.name);
    println!("  versions: {versions}");
    println!("  caches:   {}", peer.caches);
    println!("  runs:     {}", peer.settings);
    if peer.knobs.is_empty() {
        println!("  cache = {{ }}: takes no settings");
    }
    for knob in peer.knobs {
        println!("  cache = {{ {} = … }}: {}", knob.key, knob.meaning);
    }
}

/// Install the named peers (when none is named, every Node peer: a Rust peer is built
/// only when named).
pub fn install_named(names: &[String]) -> anyhow::Result<()> {
    let chosen: Vec<&Peer> = if names.is_empty() {
        PEERS
            .iter()
            .filter(|p| matches!(p.runtime, super::Runtime::Node { .. }))
            .collect()
    } else {
        names
            .iter()
            .map(|n| {
                find(n).ok_or_else(|| {
                    let known: Vec<&str> = PEERS.iter().map(|p| p.name).collect();
                    anyhow::anyhow!("{n:?} is not a peer ({})", known.join(", "))
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    for peer in chosen {
        let dir = install::folder(peer)?;
        install::install(peer, &dir)?;
    }
    Ok(())
}
