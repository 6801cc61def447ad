#!/usr/bin/env bash
# Hive Router, the Guild's Rust router, as a peer of the lab's gateway: `loadgen matrix`
# starts it for a configuration with `peer = "hive-router"` (cache = { dedupe = true }
# turns its dedupe on), and scripts/cpu-per-request.sh through scripts/hive-router.sh:
#
#   peers/hive-router/router.sh [--root DIR] (--port P | --listen HOST:PORT) --supergraph FILE \
#     [--subgraph-url NAME=URL ...] [--workers N] [--dedupe]
#
#   --root DIR   where it is built (`cargo install --root`); default $HIVE_ROUTER_ROOT, else
#                ~/.cache/graphql-cache-lab/hive-router;
#   --port P     listen on 127.0.0.1:P (or --listen HOST:PORT);
#   --subgraph-url NAME=URL  a subgraph's URL in place of the supergraph's (the matrix
#                rewrites the supergraph's URLs instead);
#   --workers N  its HTTP worker threads (default: one per core, as it chooses);
#   --dedupe     its deduplication of identical requests, inbound (client requests in
#                flight) and outbound (subgraph requests in flight); off by default, so
#                that it runs as the lab's gateway without a cache does.
# Hive Router has no response or entity cache. GET /health answers once it serves.
#
# Version 0.2.0 from crates.io: the later ones pin ntex crates that need a newer rustc than
# this machine's, and 0.2.0's build fetches its GraphiQL page from npm unless the `graphiql`
# feature is on (a package the registry does not have), so it is built with that feature.
# `loadgen peers install hive-router` builds it (about 40 minutes on 2 cores); so does this
# script's first run when no binary is there. The configuration is written to a temporary
# file (logging at `warn`, as the lab's gateway logs nothing per request), and the router
# replaces this script's process (exec), so the PID the caller measures is the router's.
set -euo pipefail
root=${HIVE_ROUTER_ROOT:-$HOME/.cache/graphql-cache-lab/hive-router}
workers=""; dedupe=false; listen=""; supergraph=""; urls=()
while [ $# -gt 0 ]; do
  case $1 in
    --root) root=$2; shift 2 ;;
    --port) listen=127.0.0.1:$2; shift 2 ;;
    --listen) listen=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --dedupe) dedupe=true; shift ;;
    --supergraph) supergraph=$(realpath "$2"); shift 2 ;;
    --subgraph-url) urls+=("$2"); shift 2 ;;
    *) echo "hive-router: $1 is not an argument it translates (Hive Router has no cache flags but --dedupe)" >&2; exit 2 ;;
  esac
done
[ -n "$listen" ] || { echo "hive-router: --port P or --listen HOST:PORT is required" >&2; exit 2; }
[ -n "$supergraph" ] || { echo "hive-router: --supergraph FILE is required" >&2; exit 2; }
router=$root/bin/hive_router
if [ ! -x "$router" ]; then
  echo "hive-router: building Hive Router 0.2.0 into $root once (about 40 minutes on 2 cores)" >&2
  cargo install hive-router --version 0.2.0 --locked --features graphiql --root "$root" >&2
fi
config=$(mktemp --suffix=.yaml)
{
  echo "supergraph:"
  echo "  source: file"
  echo "  path: $supergraph"
  echo "http:"
  echo "  host: ${listen%:*}"
  echo "  port: ${listen##*:}"
  if [ -n "$workers" ]; then echo "  workers: $workers"; fi
  echo "log:"
  echo "  level: warn"
  if [ ${#urls[@]} -gt 0 ]; then
    echo "override_subgraph_urls:"
    echo "  subgraphs:"
    for url in "${urls[@]}"; do
      echo "    ${url%%=*}:"
      echo "      url: ${url#*=}"
    done
  fi
  echo "traffic_shaping:"
  echo "  all:"
  echo "    dedupe_enabled: $dedupe"
  echo "  router:"
  echo "    dedupe:"
  echo "      enabled: $dedupe"
} > "$config"
ROUTER_CONFIG_FILE_PATH=$config exec "$router"
