#!/usr/bin/env bash
# A long fuzzing campaign against the real gateway, in process (gateway/tests/fuzz.rs):
# arbitrary bytes, mutated bodies, grammar-generated documents (valid and mutated) and
# arbitrary variables, checked for no panic, an answer in time, a well-formed GraphQL
# response or a 4xx, and the seed answer still right.
#   scripts/fuzz.sh 10m            # DURATION: 90s, 10m, 1h, or bare seconds
#   FUZZ_SEED=42 scripts/fuzz.sh 60  # replay a campaign's seed
# The test suite runs a bounded number of cases (FUZZ_CASES per kind, default 120).
#
# With --planner, a campaign of the planner fuzzer instead (gateway/tests/planner_fuzz.rs):
# random operations over its five-subgraph graph, each answer checked against the
# reference executor, through the gateway without and with the cache:
#   scripts/fuzz.sh --planner 10m             # for a duration, from a seed taken from the clock
#   scripts/fuzz.sh --planner --cases 20000   # a number of operations (PLANNER_FUZZ_SEED, default 1)
#   PLANNER_FUZZ_SEED=7 scripts/fuzz.sh --planner 60
# The test suite runs 400 operations from seed 1.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "fuzz.sh: cargo is missing (install Rust with rustup)" >&2; exit 1; }
if [ "${1:-}" = --planner ]; then
  shift
  if [ "${1:-}" = --cases ]; then
    [[ "${2:-}" =~ ^[0-9]+$ && "$2" -gt 0 ]] || { echo "fuzz.sh: --cases takes a positive number" >&2; exit 2; }
    export PLANNER_FUZZ_CASES=$2
  else
    d=${1:?usage: scripts/fuzz.sh --planner DURATION | --planner --cases N}
    case "$d" in
      *h) s=$(( ${d%h} * 3600 )) ;; *m) s=$(( ${d%m} * 60 )) ;; *s) s=${d%s} ;; *) s=$d ;;
    esac
    [[ "$s" =~ ^[0-9]+$ && "$s" -gt 0 ]] || { echo "fuzz.sh: DURATION $d is not a positive duration (90s, 10m, 1h)" >&2; exit 2; }
    export PLANNER_FUZZ_SECONDS=$s
  fi
  exec cargo test --workspace --locked --test planner_fuzz generated_operations_get_the_reference_answer -- --nocapture
fi
duration=${1:?usage: scripts/fuzz.sh DURATION (e.g. 10m), or --planner DURATION|--cases N}
case "$duration" in
  *h) seconds=$(( ${duration%h} * 3600 )) ;;
  *m) seconds=$(( ${duration%m} * 60 )) ;;
  *s) seconds=${duration%s} ;;
  *) seconds=$duration ;;
esac
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || { echo "fuzz.sh: DURATION $duration is not a positive duration (90s, 10m, 1h)" >&2; exit 2; }
# The same build as the test suite's (cargo build --workspace --all-targets).
FUZZ_SECONDS=$seconds exec cargo test --workspace --locked --test fuzz generated_input_never_breaks_the_gateway -- --nocapture
