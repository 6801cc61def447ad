#!/usr/bin/env bash
# A long fuzzing campaign against the real gateway, in process (gateway/tests/fuzz.rs):
# arbitrary bytes, mutated bodies, grammar-generated documents (valid and mutated) and
# arbitrary variables, checked for no panic, an answer in time, a well-formed GraphQL
# response or a 4xx, and the seed answer still right.
#   scripts/fuzz.sh 10m            # DURATION: 90s, 10m, 1h, or bare seconds
#   FUZZ_SEED=42 scripts/fuzz.sh 60  # replay a campaign's seed
# The test suite runs a bounded number of cases (FUZZ_CASES per kind, default 120).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:?usage: scripts/fuzz.sh DURATION (e.g. 10m)}
case "$duration" in
  *h) seconds=$(( ${duration%h} * 3600 )) ;;
  *m) seconds=$(( ${duration%m} * 60 )) ;;
  *s) seconds=${duration%s} ;;
  *) seconds=$duration ;;
esac
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || { echo "fuzz.sh: DURATION $duration is not a positive duration (90s, 10m, 1h)" >&2; exit 2; }
command -v cargo >/dev/null || { echo "fuzz.sh: cargo is missing (install Rust with rustup)" >&2; exit 1; }
# The same build as the test suite's (cargo build --workspace --all-targets).
FUZZ_SECONDS=$seconds exec cargo test --workspace --locked --test fuzz generated_input_never_breaks_the_gateway -- --nocapture
