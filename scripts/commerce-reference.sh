#!/usr/bin/env bash
# The commerce graph through Apollo's federation stack, as a reference for the lab's
# gateway: starts the four subgraphs of commerce-service, then
# commerce-graph/reference/reference.mjs composes the SDL files with @apollo/composition
# (errors and hints), plans each query of commerce-graph/queries/deep.graphql over the
# committed supergraph.graphql (fetches, levels), runs it through @apollo/gateway, and
# prints the answer's size in bytes. Exits 1 if an answer carries errors.
#   scripts/commerce-reference.sh [--plans DIR] [DATA FLAGS...]
#   e.g. scripts/commerce-reference.sh --plans /tmp/plans --products 5000
# Needs Node 18 or later with npm (Debian: apt-get install nodejs npm).
set -euo pipefail
cd "$(dirname "$0")/.."
plans=()
if [ "${1:-}" = --plans ]; then plans=(--plans "$2"); shift 2; fi
command -v node >/dev/null && command -v npm >/dev/null || {
  echo "commerce-reference.sh: needs node and npm (Debian: apt-get install nodejs npm)" >&2; exit 1; }
cargo build --locked -p commerce-graph --bin commerce-service
(cd commerce-graph/reference && npm ci --no-audit --no-fund --loglevel=error)
. scripts/lib/commerce-services.sh
start_commerce_services "$@"
node commerce-graph/reference/reference.mjs "${plans[@]}" "${commerce_urls[@]}"
