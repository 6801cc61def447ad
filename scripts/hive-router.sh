#!/usr/bin/env bash
# Hive Router, the Rust router whose figures issue 23 quotes, run as the lab's gateway is:
# the lab's arguments translated into Hive Router's configuration file, so that
# scripts/cpu-per-request.sh measures it beside the lab's gateway on the same subgraphs,
# load and bare exchange (S_deep):
#   GATEWAYS="hive=scripts/hive-router.sh hive-dedupe=scripts/hive-router.sh,--dedupe \
#     lab=target/release/gateway,--worker-threads,1" CONFIGS=no-cache \
#     scripts/cpu-per-request.sh --deep 3 8
#
#   scripts/hive-router.sh [--workers N] [--dedupe] --listen HOST:PORT --supergraph FILE \
#     --subgraph-url NAME=URL ...
#   --workers N  its HTTP worker threads (default: one per core, as it chooses);
#   --dedupe     its deduplication of identical requests, inbound (client requests in
#                flight) and outbound (subgraph requests in flight); off by default, so
#                that it runs as the lab's gateway without a cache does.
# Hive Router has no response or entity cache.
#
# Version 0.2.0 from crates.io: the later ones pin ntex crates that need a newer rustc than
# this machine's, and 0.2.0's build fetches its GraphiQL page from npm unless the `graphiql`
# feature is on (a package the registry does not have), so it is built with that feature.
# The first run builds it into $HIVE_ROUTER_ROOT (default ~/.cache/graphql-cache-lab/hive-router):
# about 40 minutes on 2 cores. The configuration is written to a temporary file (logging at
# `warn`, as the lab's gateway logs nothing per request), and the router replaces this
# script's process (exec), so the PID the caller measures is the router's.
set -euo pipefail
root=${HIVE_ROUTER_ROOT:-$HOME/.cache/graphql-cache-lab/hive-router}
router=$root/bin/hive_router
if [ ! -x "$router" ]; then
  echo "hive-router.sh: building Hive Router 0.2.0 into $root once (about 40 minutes on 2 cores)" >&2
  cargo install hive-router --version 0.2.0 --locked --features graphiql --root "$root" >&2
fi
workers=""; dedupe=false; listen=""; supergraph=""; urls=()
while [ $# -gt 0 ]; do
  case $1 in
    --workers) workers=$2; shift 2 ;;
    --dedupe) dedupe=true; shift ;;
    --listen) listen=$2; shift 2 ;;
    --supergraph) supergraph=$(realpath "$2"); shift 2 ;;
    --subgraph-url) urls+=("$2"); shift 2 ;;
    *) echo "hive-router.sh: $1 is not an argument it translates (Hive Router has no cache flags)" >&2; exit 2 ;;
  esac
done
[ -n "$listen" ] || { echo "hive-router.sh: --listen HOST:PORT is required" >&2; exit 2; }
[ -n "$supergraph" ] || { echo "hive-router.sh: --supergraph FILE is required" >&2; exit 2; }
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
  echo "override_subgraph_urls:"
  echo "  subgraphs:"
  for url in "${urls[@]}"; do
    echo "    ${url%%=*}:"
    echo "      url: ${url#*=}"
  done
  echo "traffic_shaping:"
  echo "  all:"
  echo "    dedupe_enabled: $dedupe"
  echo "  router:"
  echo "    dedupe:"
  echo "      enabled: $dedupe"
} > "$config"
ROUTER_CONFIG_FILE_PATH=$config exec "$router"
