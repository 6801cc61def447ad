#!/usr/bin/env bash
# Instructions per seed request, counted by callgrind: a figure the shared machine's
# noise does not move, to tell a few percent of the gateway's CPU from round-to-round
# spread (docs/cpu-and-peers.md).
#   scripts/instructions-per-request.sh                  # this tree's gateway
#   GATEWAYS="before=PATH after=PATH" scripts/instructions-per-request.sh
# For each gateway and configuration (no cache, --ttl 0, --ttl 10), a gateway on one
# worker thread runs under `valgrind --tool=callgrind` over this tree's subgraphs;
# loadgen sends 200 seed queries, then (with a fresh gateway) 2200, on 4 connections; the
# difference of the two totals over 2000 is the instructions one request costs, start-up,
# warm-up and shutdown cancelled out. Needs valgrind (apt-get install valgrind).
# Output is kept in results/<stamp>-instructions-per-request/summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/record.sh
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
cargo build --release --locked -p gateway -p loadgen -p user-service -p post-service
bin=target/release
variants=${GATEWAYS:-this=$bin/gateway}
record_output instructions-per-request
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) cores)"
echo "valgrind: $(valgrind --version); gateways: $variants"
up=$(port); pp=$(port)
"$bin/user-service" --listen "127.0.0.1:$up" >/dev/null 2>&1 & u=$!
"$bin/post-service" --listen "127.0.0.1:$pp" >/dev/null 2>&1 & p=$!
trap 'kill $u $p 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$up/health" >/dev/null 2>&1 && curl -fs "http://127.0.0.1:$pp/health" >/dev/null 2>&1 && break; sleep 0.1; done
body=$(mktemp)
echo '{"query":"query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }"}' >"$body"
# total GATEWAY N ARGS...: callgrind's instruction total for a gateway's life serving N requests.
total() {
  local gw=$1 n=$2; shift 2
  local gp; gp=$(port)
  local out; out=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$out" "$gw" --listen "127.0.0.1:$gp" \
    --subgraph "user=http://127.0.0.1:$up/graphql" --subgraph "post=http://127.0.0.1:$pp/graphql" \
    --worker-threads 1 "$@" >/dev/null 2>&1 & local g=$!
  for _ in $(seq 600); do curl -fs "http://127.0.0.1:$gp/health" >/dev/null 2>&1 && break; sleep 0.2; done
  "$bin/loadgen" bench --url "http://127.0.0.1:$gp/graphql" --body-file "$body" -H 'content-type: application/json' \
    --connections 4 --threads 1 --requests "$n" --no-progress >/dev/null
  kill -INT "$g"; wait "$g" 2>/dev/null || true
  grep -m1 '^summary:\|^totals:' "$out" | awk '{print $2}'
  rm -f "$out"
}
echo
echo "| gateway | configuration | instructions per request |"
echo "|---|---|---:|"
for v in $variants; do
  name=${v%%=*}; gw=${v#*=}
  for conf in "no-cache:" "ttl-0:--ttl 0" "ttl-10:--ttl 10"; do
    label=${conf%%:*}; read -r -a args <<<"${conf#*:}"
    a=$(total "$gw" 200 "${args[@]}"); b=$(total "$gw" 2200 "${args[@]}")
    echo "| $name | $label | $(( (b - a) / 2000 )) |"
  done
done
rm -f "$body"
