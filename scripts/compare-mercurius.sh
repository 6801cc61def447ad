#!/usr/bin/env bash
# Side by side, in one run: this lab's gateway and the original Node.js stack
# (../shared/peers/mercurius: Mercurius gateway + mercurius-cache), the same seed query,
# the same load tool and settings (loadgen bench: 100 connections, 1 thread, 2 s warm-up),
# no cache and TTL 0, interleaved round by round so drift hits both alike (and the lab's
# TTL 0 with --request-strategy coalesce, against the same round's Mercurius TTL 0). Besides
# req/s and p99 it reports each gateway's CPU per request (utime + stime from
# /proc/<pid>/stat over the measured window, after a separate 2 s warm-up run, divided
# by the requests answered), which the shared cores disturb less than req/s.
#   scripts/compare-mercurius.sh [ROUNDS] [SECONDS]      (defaults 3 and 10)
# The lab's gateway runs with one worker thread (`--worker-threads 1`, as the seed
# experiment does, and as Node runs the Mercurius gateway's JavaScript on one thread);
# GATEWAY_ARGS replaces those arguments (GATEWAY_ARGS= for tokio's default pool).
# LOAD=wrk loads with wrk -t1 instead of loadgen bench (scripts/lib/record.sh, post_load).
# Needs node and npm (the peer's setup runs `npm ci`); the Node stack uses ports 3000-3002.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/record.sh
record_output mercurius   # everything printed is also kept in results/<stamp>-mercurius/summary.txt
rounds=${1:-3}; secs=${2:-10}
read -r -a gateway_args <<< "${GATEWAY_ARGS---worker-threads 1}"
echo "lab gateway arguments: ${gateway_args[*]:-(none)}"
shared=${SHARED_DIR:-$(cd .. && pwd)/shared}
peer=${PEER_DIR:-/tmp/mercurius-peer}
command -v node >/dev/null || { echo "compare-mercurius.sh: node is missing (apt-get install -y nodejs npm)" >&2; exit 1; }
[ -d "$peer/node_modules" ] || bash "$shared/peers/mercurius/setup.sh" "$peer"
cargo build --release --locked -p gateway -p user-service -p post-service -p loadgen
bin=$PWD/target/release
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
echo '{"query":"query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }"}' > "$work/seed.json"
wait_up() { for _ in $(seq 300); do curl -fs "$1" -H 'content-type: application/json' -d '{"query":"{ __typename }"}' >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; }
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done; pids=(); }
load() { post_load "$1" "$work/seed.json" "$2" "${3:-/dev/null}"; } # url duration [json-out]
bench() { # name config url gateway-pid
  load "$3" 2s
  local before after
  before=$(ticks "$4")
  load "$3" "${secs}s" "$work/out.json"
  after=$(ticks "$4")
  python3 - "$1" "$2" "$work/out.json" $((after - before)) "$(getconf CLK_TCK)" <<'PY' | tee -a "$work/rows"
import json, sys
r = json.load(open(sys.argv[3]))
e = r["errors"]
cpu_us = int(sys.argv[4]) / int(sys.argv[5]) / max(r["requests"], 1) * 1e6
print(sys.argv[1], sys.argv[2], r["requests_per_sec"], r["latency_ms"]["p99"], sum(e.values()), round(cpu_us, 1))
PY
}
ours() { # config gateway-args...
  local cfg=$1; shift
  local up pp gp; up=$(port); pp=$(port); gp=$(port)
  "$bin/user-service" --listen 127.0.0.1:$up 2>/dev/null & pids+=($!)
  "$bin/post-service" --listen 127.0.0.1:$pp 2>/dev/null & pids+=($!)
  "$bin/gateway" --listen 127.0.0.1:$gp --subgraph user=http://127.0.0.1:$up/graphql \
    --subgraph post=http://127.0.0.1:$pp/graphql "${gateway_args[@]}" "$@" 2>/dev/null & pids+=($!)
  local gateway=$!
  wait_up "http://127.0.0.1:$gp/graphql"
  bench lab "$cfg" "http://127.0.0.1:$gp/graphql" $gateway; stop
}
node_stack() { # config [ttl]
  local cfg=$1; shift
  (cd "$peer" && exec node user-service.js) >/dev/null 2>&1 & pids+=($!)
  (cd "$peer" && exec node post-service.js) >/dev/null 2>&1 & pids+=($!)
  wait_up http://127.0.0.1:3001/graphql; wait_up http://127.0.0.1:3002/graphql
  (cd "$peer" && exec node gateway.js "$@") >/dev/null 2>&1 & pids+=($!)
  local gateway=$!
  wait_up http://127.0.0.1:3000/graphql
  bench mercurius "$cfg" http://127.0.0.1:3000/graphql $gateway; stop
}
trap 'stop; rm -rf "$work"' EXIT
echo "stack config req/s p99_ms errors gateway_cpu_us_per_request"
for _ in $(seq "$rounds"); do
  ours no-cache; node_stack no-cache
  ours ttl-0 --ttl 0; node_stack ttl-0 0
  # Issue 23: TTL 0 with identical in-flight client requests coalesced too, against
  # the same round's Mercurius at TTL 0.
  ours ttl-0+coalesce --ttl 0 --request-strategy coalesce
done
python3 - "$work/rows" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print()
print("| config | lab req/s | mercurius req/s | ratio lab/mercurius (median, min-max of rounds) | lab p99 ms | mercurius p99 ms | lab gateway CPU per request | mercurius gateway CPU per request | mercurius CPU / lab CPU (median, min-max) |")
print("|---|---|---|---|---|---|---|---|---|")
for cfg in ("no-cache", "ttl-0", "ttl-0+coalesce"):
    lab = [r for r in rows if r[0] == "lab" and r[1] == cfg]
    mer = [r for r in rows if r[0] == "mercurius" and r[1] == cfg.split("+")[0]]
    ratios = [float(a[2]) / float(b[2]) for a, b in zip(lab, mer)]
    cpu = [float(b[5]) / float(a[5]) for a, b in zip(lab, mer)]
    med = lambda rs, i: st.median(float(r[i]) for r in rs)
    print(f"| {cfg} | {med(lab,2):.0f} | {med(mer,2):.0f} | {st.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | {med(lab,3):.1f} | {med(mer,3):.1f} | {med(lab,5):.1f} us | {med(mer,5):.1f} us | {st.median(cpu):.2f}x ({min(cpu):.2f}-{max(cpu):.2f}) |")
PY
