#!/usr/bin/env bash
# Recomposes the supergraphs of the gateway's federation tests (gateway/tests/federation_*.rs).
# Each graph is a folder gateway/tests/supergraphs/<graph>/: the SDL each subgraph serves
# (<subgraph>.graphql), the supergraph.graphql that @theguild/federation-composition
# composed from them, and composed-from.txt (the composer's version and each file's SHA-256).
#   scripts/compose-federation-tests.sh          # rewrites the SDL files and the supergraphs
#   scripts/compose-federation-tests.sh --check  # changes nothing; exits 1 if any is out of date
# The subgraphs are built inside the tests, so their SDL comes from the tests themselves:
# each federation test file has a test named committed_sdl_files_are_what_the_subgraphs_serve,
# which with FEDERATION_SDL=write writes what its subgraphs serve into the folder (without
# it, compares). Each folder is then composed by scripts/compose/compose.mjs
# (the composer version scripts/compose/package.json pins; npm ci installs it).
# Needs Node 18 or later with npm (Debian: apt-get install nodejs npm).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in ""|--check) ;; *) echo "usage: $0 [--check]" >&2; exit 2;; esac
command -v node >/dev/null && command -v npm >/dev/null || {
  echo "compose-federation-tests.sh: needs node and npm (Debian: apt-get install nodejs npm)" >&2; exit 1; }
(cd scripts/compose && npm ci --no-audit --no-fund --loglevel=error)
sdl_tests=(cargo test --locked -p gateway --test 'federation_*' -- committed_sdl_files_are_what_the_subgraphs_serve)
if [ "${1:-}" = --check ]; then
  "${sdl_tests[@]}"
  status=0
  for dir in gateway/tests/supergraphs/*/; do
    node scripts/compose/compose.mjs "$dir" --check || status=1
  done
  exit $status
fi
FEDERATION_SDL=write "${sdl_tests[@]}"
for dir in gateway/tests/supergraphs/*/; do
  node scripts/compose/compose.mjs "$dir"
done
