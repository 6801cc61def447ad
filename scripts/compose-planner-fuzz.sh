#!/usr/bin/env bash
# Recomposes the planner fuzzer's supergraph (gateway/tests/planner_fuzz.rs): writes each
# of its five subgraphs' `_service { sdl }` to gateway/tests/planner_fuzz/supergraph/<name>.graphql
# (the test the_committed_sdl_is_what_the_subgraphs_serve, with PLANNER_FUZZ_WRITE_SDL=1),
# and composes those into gateway/tests/planner_fuzz/supergraph/supergraph.graphql with
# scripts/compose/compose.mjs (@theguild/federation-composition, the version
# scripts/compose/package.json pins; npm ci installs it). The subgraphs' URLs in it are
# placeholders (subgraphs.json): the test serves them on free ports and overrides them.
#   scripts/compose-planner-fuzz.sh          # rewrites the five SDL files and the supergraph
#   scripts/compose-planner-fuzz.sh --check  # changes nothing; exits 1 if any is out of date
# Needs Node 18 or later with npm (Debian: apt-get install nodejs npm).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in ""|--check) ;; *) echo "usage: $0 [--check]" >&2; exit 2;; esac
command -v node >/dev/null && command -v npm >/dev/null || {
  echo "compose-planner-fuzz.sh: needs node and npm (Debian: apt-get install nodejs npm)" >&2; exit 1; }
if [ "${1:-}" = --check ]; then write=(); else write=(PLANNER_FUZZ_WRITE_SDL=1); fi
env "${write[@]}" cargo test --locked -p gateway --test planner_fuzz the_committed_sdl_is_what_the_subgraphs_serve -- --exact
(cd scripts/compose && npm ci --no-audit --no-fund --loglevel=error)
node scripts/compose/compose.mjs gateway/tests/planner_fuzz/supergraph "$@" || {
  echo "compose-planner-fuzz.sh: run scripts/compose-planner-fuzz.sh (without --check) and commit what it writes" >&2; exit 1; }
