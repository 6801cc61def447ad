#!/usr/bin/env bash
# The lab's main job: build in release mode and run the experiment matrix.
#   scripts/run-matrix.sh                       # experiments/seed.toml: no-cache, ttl-0, ttl-1, ttl-10
#   scripts/run-matrix.sh --quick               # one short round per configuration
#   scripts/run-matrix.sh --config experiments/slow-subgraphs.toml --rounds 5
# Every flag goes to `loadgen matrix` (see loadgen/README.md). Results land in
# results/<run-id>/ (summary.md, summary.json, manifest.json, flamegraphs, chart) and
# results/latest points at the newest run.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "run-matrix.sh: cargo is missing (install Rust with rustup)" >&2; exit 1; }
cargo build --release --locked -p gateway -p user-service -p post-service -p commerce-graph -p loadgen
# --install-peers: a peer gateway (peer = "NAME") is installed from its committed lock on first use.
exec target/release/loadgen matrix --install-peers "$@"
