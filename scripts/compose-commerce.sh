#!/usr/bin/env bash
# Recomposes the commerce graph's supergraph: starts the four subgraphs of
# commerce-service (default data set), writes each one's `_service { sdl }` to
# commerce-graph/supergraph/<name>.graphql, and composes those into
# commerce-graph/supergraph/supergraph.graphql with scripts/compose/compose.mjs
# (@theguild/federation-composition, the version scripts/compose/package.json pins; npm ci
# installs it). commerce-graph/supergraph/subgraphs.json names the subgraphs and their URLs.
#   scripts/compose-commerce.sh          # rewrites the four SDL files and the supergraph
#   scripts/compose-commerce.sh --check  # changes nothing; exits 1 if any is out of date
# Needs Node 18 or later with npm (Debian: apt-get install nodejs npm).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in ""|--check) ;; *) echo "usage: $0 [--check]" >&2; exit 2;; esac
command -v node >/dev/null && command -v npm >/dev/null || {
  echo "compose-commerce.sh: needs node and npm (Debian: apt-get install nodejs npm)" >&2; exit 1; }
cargo build --locked -p commerce-graph --bin commerce-service
(cd scripts/compose && npm ci --no-audit --no-fund --loglevel=error)
. scripts/lib/commerce-services.sh
start_commerce_services
node scripts/compose/compose.mjs commerce-graph/supergraph "$@" "${commerce_urls[@]}" || {
  echo "compose-commerce.sh: run scripts/compose-commerce.sh (without --check) and commit what it writes" >&2; exit 1; }
