#!/usr/bin/env bash
# The gateway's CPU per client request, against the CPU of a bare HTTP exchange
# measured in the same run (issue 14's targets).
#
# S is the server-side CPU of one exchange with `loadgen target`, a server that answers
# a fixed body and does nothing else, under the same load as the gateway (loadgen bench,
# 100 connections, 1 thread, the seed query's body). Each configuration of the seed
# matrix (no cache, TTL 0, TTL 10) runs on a fresh gateway over one pair of subgraphs;
# every round measures the target and the three configurations in turn, so drift hits
# all alike. CPU comes from /proc/<pid>/stat (utime + stime) around the measured window
# only (a separate warm-up run comes first), divided by the requests answered in it.
#   scripts/cpu-per-request.sh [--deep] [ROUNDS] [SECONDS]     (defaults 3 and 10)
#   BIN=DIR scripts/cpu-per-request.sh                (measure binaries built elsewhere,
#                                                      e.g. an older commit's; no build)
#   CONFIGS="no-cache ttl-10" scripts/cpu-per-request.sh --deep
#                                                     (only these configurations: more rounds
#                                                      in the same time for an A/B of builds)
#   REPLAY=1 scripts/cpu-per-request.sh --deep       (the subgraphs replayed: see below)
#   scripts/cpu-per-request.sh --public-benchmark DIR (the public gateways benchmark's graph)
#   TOGETHER=1 GATEWAYS=… scripts/cpu-per-request.sh (the variants loaded at the same time,
#                                                      each by its own loadgen: an A/B that
#                                                      the machine's drift hits alike)
#   RATE=300 …                                        (open loop: each loadgen sends this many
#                                                      requests per second, with 100 connections;
#                                                      see docs/deep.md for why an A/B of builds
#                                                      wants TOGETHER=1 REPLAY=1 RATE=300)
#   LOAD=wrk …                                        (wrk -t1 loads instead of loadgen bench, for
#                                                      figures quoted "with wrk"; closed loop only)
#   CONNECTIONS=4 …                                   (the load's connections, 100 unless set: the
#                                                      server of S and every gateway get the same)
#   GATEWAYS="a=PATH b=PATH,--flag,value" scripts/cpu-per-request.sh
#                                                     (several gateway builds or flag sets side
#                                                      by side, e.g. allocators: each round
#                                                      measures every one of them; commas
#                                                      separate a variant's extra arguments)
# By default it measures the gateway three times: on one thread (`--worker-threads 1`),
# at its default (one current-thread runtime per core, the shards), and on tokio's
# work-stealing pool of one thread per core. With --deep or --public-benchmark, a fourth time: one worker thread with at most 8 requests executing at
# once (`--max-executing-requests 8`, turns at execution; see docs/deep.md). With PGO=1,
# once more: the profile-guided build of scripts/build-pgo.sh (target/pgo/release/gateway,
# which must be built first; the run says which commit it was built from), with the deep
# queries' setting (one thread, 8 turns: `pgo-turns-8`), or one thread on the seed query.
#
# With --deep, the same on the deep query of experiments/deep.toml (DeepWishlistChain,
# commerce-graph/queries/deep.graphql, ~98.5 KB answers) over the commerce graph's four
# subgraphs (commerce-service), each gateway started from the committed supergraph, as
# scripts/loadgen-vs-wrk.sh --deep does. S is then `loadgen target --body` serving one
# real answer of the gateway to that query, captured first: a bare exchange of the same
# size. The deep mode adds three configurations: identical in-flight client requests
# coalesced (--request-strategy coalesce), alone and over TTL 0, and the response strategy at 10 s
# (--request-strategy response:ttl=10), and judges against issue 23's targets: TTL 10
# (everything cached) <= 2 S, TTL 0 <= 3 S, no cache <= 20 S. The seed mode keeps issue
# 14's (<= 2, 2.5, 8 S). Output: results/<stamp>-cpu-per-request-deep.
#
# With --public-benchmark DIR, the same on the graph issue 23 took its own figures from: the
# public gateways benchmark (a checkout of graphql-hive/graphql-gateways-benchmark at DIR,
# e.g. from `git clone`; its Rust subgraphs are built there with its own Cargo.lock). Its
# query is the benchmark's TestQuery (from DIR/k6.js), its supergraph DIR's own
# (gateways/hive-router/supergraph.graphql), and its one subgraphs process serves the four
# subgraphs. The figures are judged against the same targets as --deep: the issue set them
# for the commerce graph's deep query from what it measured on this one.
# Output: results/<stamp>-cpu-per-request-public-benchmark.
#
# REPLAY=1 (with --deep or --public-benchmark): the subgraph exchanges of one no-cache
# deep query are recorded first (scripts/lib/exchange_recorder.py), and one `loadgen
# target --replay` on one thread answers them back in place of the subgraphs, byte for
# byte. The subgraphs' own work (about five times the gateway's on the commerce graph's
# query) then no longer shares the two cores with the gateway, nor swings from one window
# to the next: the gateway's figure is its own. Only the configurations whose requests a
# no-cache gateway sends are run, unless CONFIGS names others.
set -euo pipefail
cd "$(dirname "$0")/.."
deep=false public=""
if [ "${1:-}" = --deep ]; then deep=true; shift; fi
if [ "${1:-}" = --public-benchmark ]; then
  [ -n "${2:-}" ] || { echo "--public-benchmark: give the path of a checkout of graphql-hive/graphql-gateways-benchmark" >&2; exit 2; }
  deep=true public=$(cd "$2" && pwd); shift 2
fi
if [ "${REPLAY:-}" = 1 ] && ! $deep; then echo "REPLAY=1: only the deep queries' subgraphs can be replayed (add --deep or --public-benchmark DIR)" >&2; exit 2; fi
. scripts/lib/record.sh
# A replayed run's name says so (the summary does too).
replayed=""
[ "${REPLAY:-}" = 1 ] && replayed=-replayed
if [ -n "$public" ]; then
  build_public_graph "$public" || exit 2
  record_output "${RUN_NAME:-cpu-per-request-public-benchmark$replayed}"
elif $deep; then
  record_output "${RUN_NAME:-cpu-per-request-deep$replayed}"
else
  record_output "${RUN_NAME:-cpu-per-request}" # everything printed is also kept in results/<stamp>-<name>/summary.txt
fi
rounds=${1:-3}; secs=${2:-10}
if [ -n "${BIN:-}" ]; then
  bin=$BIN
  echo "binaries: $bin, not built from this tree${BIN_COMMIT:+ but from commit $BIN_COMMIT}"
elif $deep; then
  # The commerce graph's subgraphs are built even for the public benchmark's graph: one
  # build of the three packages together, as the other deep runs make it.
  cargo build --release --locked -p gateway -p commerce-graph -p loadgen
  bin=$PWD/target/release
else
  cargo build --release --locked -p gateway -p user-service -p post-service -p loadgen
  bin=$PWD/target/release
fi
machine_lines
work=$(mktemp -d)
pids=()
stop_all() { for p in "${pids[@]}"; do stop_pid "$p"; done; pids=(); }
trap 'stop_all; rm -rf "$work"' EXIT
# subgraph_ticks: the subgraphs' CPU ticks, summed.
subgraph_ticks() { local p t=0; for p in "${subgraphs[@]}"; do t=$((t + $(ticks "$p"))); done; echo $t; }
connections=${CONNECTIONS:-100}
load() { post_load "$1" "$work/request.json" "$2" "${3:-/dev/null}" ${RATE:+--rate "$RATE"}; } # url duration [json-out]
# gateway_args: how a gateway reaches the subgraphs (without --listen and the variant's flags).
subgraphs=()
if $deep; then
  started=${#pids[@]}
  if [ -n "$public" ]; then
    start_public_graph "$public" "$work"
    query="TestQuery, the public gateways benchmark's query ($public, $(git -C "$public" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout'))"
  else
    start_deep_graph "$bin" "$work"
    query=DeepWishlistChain
  fi
  subgraphs=("${pids[@]:$started}") gateway_args=("${deep_args[@]}")
  # S's body: one real answer of a gateway to the deep query.
  gp=$(port)
  "$bin/gateway" --listen 127.0.0.1:$gp "${gateway_args[@]}" >/dev/null 2>&1 & g=$!
  wait_up "http://127.0.0.1:$gp/health"
  deep_answer $gp "$work/request.json" "$work/answer.json"
  stop_pid $g
  echo "S's answer: one gateway answer to $query, captured first ($(stat -c %s "$work/answer.json") bytes)"
  target_body=(--body "$work/answer.json")
  if [ "${REPLAY:-}" = 1 ]; then
    # The subgraph exchanges of one no-cache deep query, recorded through a proxy; then
    # the four subgraphs give way to one `loadgen target --replay` answering them back.
    mkdir "$work/exchanges"
    record_deep_exchanges "$bin" "$work/request.json" "$work/exchanges" "$work/recorded.json" "${gateway_args[@]}"
    cmp -s "$work/answer.json" "$work/recorded.json" ||
      { echo "REPLAY: the answer through the recorder differs from the gateway's own" >&2; exit 1; }
    for p in "${subgraphs[@]}"; do stop_pid "$p"; done
    replay_graph "$bin" "$work/exchanges" "${gateway_args[@]}"
    subgraphs=("$replay_pid") gateway_args=("${replay_args[@]}")
    echo "subgraphs: replayed by one loadgen target --replay (one thread), from the $(ls "$work/exchanges" | grep -c answer) exchanges of one no-cache deep query, recorded first"
  fi
else
  started=${#pids[@]}
  start_seed_graph "$bin" "$work"
  subgraphs=("${pids[@]:$started}") gateway_args=("${seed_args[@]}")
  target_body=()
fi
tp=$(port); tp1=$(port)
"$bin/loadgen" target --listen 127.0.0.1:$tp --threads 2 "${target_body[@]}" >/dev/null 2>&1 & target=$!; pids+=($target)
# The same server on one thread: S for a server set up as the one-thread gateway is.
"$bin/loadgen" target --listen 127.0.0.1:$tp1 --threads 1 "${target_body[@]}" >/dev/null 2>&1 & target1=$!; pids+=($target1)
wait_up "http://127.0.0.1:$tp/"; wait_up "http://127.0.0.1:$tp1/"
# row NAME OUT.json SERVER-TICKS SUBGRAPH-TICKS [ALL-REQUESTS]: one row of figures for
# the window OUT.json loaded; the subgraphs' ticks are shared over ALL-REQUESTS (every
# gateway's, when several were loaded at once), by default the window's own.
row() {
  python3 - "$round" "$1" "$2" "$3" "$4" "$(getconf CLK_TCK)" "${5:-}" <<'PY' | tee -a "$work/rows"
import json, sys
r = json.load(open(sys.argv[3]))
n = max(r["requests"], 1)
tick_us = 1e6 / int(sys.argv[6])
server = int(sys.argv[4]) * tick_us / n
subgraphs = int(sys.argv[5]) * tick_us / max(int(sys.argv[7] or n), 1)
client = r["loadgen_cpu"]["process_cores"] / max(r["requests_per_sec"], 1) * 1e6
latency = r["latency_ms"]
print(sys.argv[1], sys.argv[2], round(r["requests_per_sec"]), sum(r["errors"].values()),
      round(server, 2), round(subgraphs, 2), round(client, 2), latency["p50"], latency["p99"])
PY
}
# measure NAME PID URL: warm up, then load for the window; one row of figures.
measure() {
  local name=$1 pid=$2 url=$3
  load "$url" 2s
  local g0 s0 g1 s1
  g0=$(ticks "$pid"); s0=$(subgraph_ticks)
  load "$url" "${secs}s" "$work/out.json"
  g1=$(ticks "$pid"); s1=$(subgraph_ticks)
  row "$name" "$work/out.json" $((g1 - g0)) $((s1 - s0))
}
gateway() { # NAME BINARY[,ARG...] gateway-args...: a fresh gateway for one measurement
  local name=$1 variant_args; shift
  IFS=, read -r -a variant_args <<< "$1"; shift
  local gp; gp=$(port)
  "${variant_args[@]}" --listen 127.0.0.1:$gp "${gateway_args[@]}" "$@" >/dev/null 2>&1 & local g=$!
  wait_up "http://127.0.0.1:$gp/health"
  measure "$name" $g "http://127.0.0.1:$gp/graphql"
  stop_pid $g
}
# together CONFIG ARG...: every variant at CONFIG at the same time, each on a fresh
# gateway loaded by its own loadgen over the same window (TOGETHER=1): whatever the rest
# of the machine does in that window, it does to all of them.
together() {
  local config=$1 variant name variant_args gp i n0=0
  shift
  local gps=() gs=() names=()
  for variant in $variants; do
    name=${variant%%=*}
    IFS=, read -r -a variant_args <<< "${variant#*=}"
    gp=$(port)
    "${variant_args[@]}" --listen 127.0.0.1:$gp "${gateway_args[@]}" "$@" >/dev/null 2>&1 & gs+=($!); pids+=($!)
    gps+=($gp) names+=("$name:$config")
  done
  for gp in "${gps[@]}"; do wait_up "http://127.0.0.1:$gp/health"; done
  local loads=()
  for gp in "${gps[@]}"; do load "http://127.0.0.1:$gp/graphql" 2s & loads+=($!); done
  wait "${loads[@]}"
  local g0=() g1=() s0 s1
  for i in "${!gs[@]}"; do g0+=($(ticks "${gs[$i]}")); done; s0=$(subgraph_ticks)
  loads=()
  for i in "${!gps[@]}"; do load "http://127.0.0.1:${gps[$i]}/graphql" "${secs}s" "$work/out-$i.json" & loads+=($!); done
  wait "${loads[@]}"
  for i in "${!gs[@]}"; do g1+=($(ticks "${gs[$i]}")); done; s1=$(subgraph_ticks)
  for i in "${!gps[@]}"; do n0=$((n0 + $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["requests"])' "$work/out-$i.json"))); done
  for i in "${!gs[@]}"; do
    row "${names[$i]}" "$work/out-$i.json" $((${g1[$i]} - ${g0[$i]})) $((s1 - s0)) $n0
    stop_pid "${gs[$i]}"
  done
}
# The deep queries add one worker thread with 8 turns at execution (docs/deep.md, "Turns
# at execution"): the lab's answer to their no-cache target.
# Besides one thread: the gateway's default (one current-thread runtime per core, the
# shards) and tokio's work-stealing pool of as many threads.
default_variants="one-thread=$bin/gateway,--worker-threads,1 default=$bin/gateway pool=$bin/gateway,--worker-threads,$(nproc)"
$deep && default_variants="$default_variants turns-8=$bin/gateway,--worker-threads,1,--max-executing-requests,8"
# PGO=1: the profile-guided build of scripts/build-pgo.sh as one more gateway, with the
# deep queries' setting (one worker thread, 8 turns), or one thread on the seed query.
if [ "${PGO:-}" = 1 ]; then
  pgo=$PWD/target/pgo/release/gateway
  [ -x "$pgo" ] || { echo "PGO=1: no $pgo; build it first with scripts/build-pgo.sh" >&2; exit 2; }
  echo "pgo build: $(cat target/pgo/built-from 2>/dev/null || echo 'of an unknown commit')"
  grep -q "^$(git rev-parse HEAD)\b" target/pgo/built-from 2>/dev/null \
    || echo "warning: the pgo build is not of this commit ($(git rev-parse --short HEAD)): run scripts/build-pgo.sh again"
  if $deep; then
    default_variants="$default_variants pgo-turns-8=$pgo,--worker-threads,1,--max-executing-requests,8"
  else
    default_variants="$default_variants pgo=$pgo,--worker-threads,1"
  fi
fi
variants=${GATEWAYS:-$default_variants}
# Configurations, NAME=ARG,ARG...: the seed matrix's three, and on the deep query the
# request-level strategies beside them.
configs="no-cache= ttl-0=--ttl,0 ttl-10=--ttl,10"
if $deep; then
  configs="$configs coalesce=--request-strategy,coalesce ttl-0+coalesce=--ttl,0,--request-strategy,coalesce response-10=--request-strategy,response:ttl=10"
fi
# A replay answers only the requests recorded: those a no-cache gateway sends, as the
# coalescing one does too. The caches batch entities otherwise while they fill, and the
# response strategy asks for the keys it is invalidated by, so those are left out unless
# named (a request the replay does not hold is an error: counted, and not judged).
want=${CONFIGS:-}
if [ "${REPLAY:-}" = 1 ] && [ -z "$want" ]; then want="no-cache coalesce"; fi
if [ -n "$want" ]; then # only the configurations named, e.g. CONFIGS="no-cache ttl-10"
  chosen=""
  for name in $want; do
    match=$(tr ' ' '\n' <<< "$configs" | grep -m1 "^$name=" || true)
    [ -n "$match" ] || { echo "CONFIGS: no configuration named $name (there are: $(tr ' ' '\n' <<< "$configs" | cut -d= -f1 | tr '\n' ' '))" >&2; exit 2; }
    chosen="$chosen $match"
  done
  configs=${chosen# }
fi
echo "gateways: $variants"
if [ "${LOAD:-loadgen}" = wrk ]; then
  echo "load: wrk -t1, $connections connections (answers not checked; no client CPU)"
else
  echo "load: loadgen bench, $connections connections, one thread"
fi
[ "${TOGETHER:-}" = 1 ] && echo "TOGETHER=1: in each round, every gateway at a configuration is loaded at the same time, each by its own loadgen"
[ -n "${RATE:-}" ] && echo "RATE=$RATE: open loop, each loadgen sending $RATE requests per second"
echo "round what req/s errors server_cpu_us_per_request subgraph_cpu_us_per_request loadgen_cpu_us_per_request latency_p50_ms latency_p99_ms"
for round in $(seq "$rounds"); do
  # S is always taken in closed loop, at full load: what issue 14's and 23's targets are
  # set against (in open loop a bare exchange costs several times more, its wake-ups alone).
  RATE='' measure target $target "http://127.0.0.1:$tp/"
  RATE='' measure target-1-thread $target1 "http://127.0.0.1:$tp1/"
  if [ "${TOGETHER:-}" = 1 ]; then
    for config in $configs; do
      cfg_args=()
      IFS=, read -r -a cfg_args <<< "${config#*=}"
      together "${config%%=*}" "${cfg_args[@]}"
    done
    continue
  fi
  for variant in $variants; do
    name=${variant%%=*}; command=${variant#*=}
    for config in $configs; do
      cfg_args=()
      IFS=, read -r -a cfg_args <<< "${config#*=}"
      gateway "$name:${config%%=*}" "$command" "${cfg_args[@]}"
    done
  done
done
python3 - "$work/rows" "$variants" "$deep" "$configs" "${RATE:-}" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
variants = [v.split("=", 1)[0] for v in sys.argv[2].split()]
rounds = sorted({r[0] for r in rows}, key=int)
by = {(r[0], r[1]): r for r in rows}
s = {k: float(by[(k, "target")][4]) for k in rounds}
configs = [c.split("=", 1)[0] for c in sys.argv[4].split()]
configs = sorted(configs, key=lambda c: ["ttl-10", "response-10", "ttl-0", "coalesce", "ttl-0+coalesce", "no-cache"].index(c))
if sys.argv[3] == "true":
    # Issue 23's, on the deep query: everything cached, TTL 0, no cache.
    targets = {"ttl-10": 2.0, "response-10": 2.0, "ttl-0": 3.0, "coalesce": 3.0, "ttl-0+coalesce": 3.0, "no-cache": 20.0}
else:
    targets = {"ttl-10": 2.0, "ttl-0": 2.5, "no-cache": 8.0}
print()
what = "loadgen target --body, the captured deep answer" if sys.argv[3] == "true" else "loadgen target"
print(f"S, the server side of one bare exchange ({what}): {st.median(s.values()):.2f} us (median of {len(rounds)} rounds: "
      + ", ".join(f"{v:.2f}" for v in s.values()) + ")")
s1 = [float(by[(k, "target-1-thread")][4]) for k in rounds]
print(f"The same server on one thread: {st.median(s1):.2f} us (median; " + ", ".join(f"{v:.2f}" for v in s1)
      + "). Ratios below are against S, the two-thread figure.")
if sys.argv[5]:
    print(f"The gateways were loaded in open loop ({sys.argv[5]} requests/s each), S in closed loop:"
          " the ratios to S are not the targets' (a gateway's CPU per request is higher below full load); compare the gateways with each other.")
print()
print("| gateway | configuration | req/s | gateway CPU per request | / S (median, min-max of rounds) | target | latency p50 / p99 | subgraphs CPU per request | loadgen CPU per request | errors |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for variant in variants:
    for cfg in configs:
        rs = [by[(k, f"{variant}:{cfg}")] for k in rounds]
        ratios = [float(r[4]) / s[r[0]] for r in rs]
        med = lambda i: st.median(float(r[i]) for r in rs)
        errors = sum(int(r[3]) for r in rs)
        ok = "holds" if st.median(ratios) <= targets[cfg] else "misses"
        if errors:
            ok = "not judged: errors"
        elif sys.argv[5]:
            ok = "not judged: open loop"
        print(f"| {variant} | {cfg} | {med(2):.0f} | {med(4):.1f} us | {st.median(ratios):.2f} S ({min(ratios):.2f}-{max(ratios):.2f}) | <= {targets[cfg]} S: {ok} | {med(7):.1f} / {med(8):.1f} ms | {med(5):.1f} us | {med(6):.1f} us | {errors} |")
if len(variants) > 1:
    print()
    print(f"Each gateway's CPU per request against {variants[0]}'s, per round (median, min-max):")
    for variant in variants[1:]:
        for cfg in configs:
            ratios = [float(by[(k, f"{variant}:{cfg}")][4]) / float(by[(k, f"{variants[0]}:{cfg}")][4]) for k in rounds]
            print(f"  {variant} / {variants[0]} at {cfg}: {st.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
    print()
    print(f"Each gateway's req/s against {variants[0]}'s, per round (median, min-max):")
    for variant in variants[1:]:
        for cfg in configs:
            ratios = [float(by[(k, f"{variant}:{cfg}")][2]) / max(float(by[(k, f"{variants[0]}:{cfg}")][2]), 1) for k in rounds]
            print(f"  {variant} / {variants[0]} at {cfg}: {st.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
if "no-cache" in configs and len(configs) > 1:
    print()
    print("Each gateway's req/s against its own no-cache, per round (median, min-max):")
    for variant in variants:
        for cfg in configs:
            if cfg == "no-cache":
                continue
            ratios = [float(by[(k, f"{variant}:{cfg}")][2]) / max(float(by[(k, f"{variant}:no-cache")][2]), 1) for k in rounds]
            print(f"  {variant}: {cfg} / no-cache {st.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
PY
