#!/usr/bin/env bash
# The lab's test command: installs what a fresh machine lacks, then runs every test.
#   scripts/test.sh            # all tests of the workspace
# Runs, in order: cargo fmt --check, cargo clippy (warnings denied), cargo doc (warnings
# denied), then the build and every test (fuzz.rs runs its bounded cases; scripts/fuzz.sh
# runs long campaigns).
# Environment: CI=true (set by .ci/run) makes the output plainer and turns off incremental
# compilation: a clean clone builds once, and its incremental cache would only take disk.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt() { # need_apt COMMAND PACKAGE: install PACKAGE from Debian when COMMAND is missing
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "test.sh: installing $2 (for $1)" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$2" >/dev/null
}

command -v cargo >/dev/null || { echo "test.sh: cargo is missing (install Rust with rustup)" >&2; exit 1; }
need_apt cc gcc
# The Redis tier's tests start their own redis-server (Debian's package, 7.0 or later),
# and three of them as a Redis Cluster formed with redis-cli (which the package brings).
need_apt redis-server redis-server
# gateway/tests/edge.rs and loadgen's `edge = "varnish"` start their own Varnish with the
# lab's VCL (Debian's varnish; varnishd sits in /usr/sbin, varnishstat in /usr/bin).
need_apt varnishstat varnish
# loadgen/tests/report_browser.rs opens the run pages in headless Chromium (Debian's).
need_apt chromium chromium
# loadgen/tests/matrix_peers.rs runs the Mercurius peer gateway (peers/mercurius: Node, and
# npm ci of its committed lock from the npm registry).
need_apt node nodejs
need_apt npm npm

export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
if [ "${CI:-}" = true ]; then
  export CARGO_INCREMENTAL=0
  # A debug build of every target takes a few GB; say how much room there is, since a full
  # disk shows up later as a linker crash (ld: Bus error) rather than as "no space".
  df -h . >&2 || true
fi
# Formatting, lints and docs first: cheap, and a failure says what to fix.
if command -v rustup >/dev/null; then
  for component in rustfmt clippy; do
    rustup component list --installed | grep -q "^$component" || rustup component add "$component"
  done
fi
cargo fmt --all --check
# One feature set for the whole workspace, so nothing is compiled twice.
cargo clippy --workspace --all-targets --locked -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
cargo build --workspace --all-targets --locked
cargo test --workspace --locked --no-fail-fast
