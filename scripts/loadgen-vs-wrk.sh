#!/usr/bin/env bash
# Is loadgen the bottleneck? The seed experiment's configurations (no cache, TTL 0,
# TTL 10) loaded side by side by wrk, by `loadgen bench` on the one-query path, and by
# `loadgen bench --workload` with every answer parsed and checked
# (experiments/workloads/seed-checked.toml). One thread and 100 connections each, as the
# matrix; rounds interleaved, the order rotating. Prints every run, then per
# configuration the median per-round req/s ratio of each loadgen path to wrk and each
# tool's CPU per request (its own user + system time over the run / requests).
# With --deep, the same on the deep query of experiments/deep.toml (DeepWishlistChain,
# 98.5 KB answers) over the commerce graph's four subgraphs, the gateway started from
# the committed supergraph; its checked workload is experiments/workloads/deep-checked.toml.
# A fourth configuration, `bare`, comes first: `loadgen target --body` on one thread,
# answering one answer of the gateway to the same query (captured at the start) as fast
# as it is asked, so that the tools run flat out and what each spends per answer of
# that size is measured without the gateway's pace in it (at a gateway's few hundred
# requests a second the tools idle between answers, and their wake-ups and the kernel's
# loopback work dominate, with a wide spread).
#   scripts/loadgen-vs-wrk.sh [--deep] [ROUNDS] [SECONDS]   # default 3 rounds of 5 s
# Output is kept in results/<stamp>-loadgen-vs-wrk/summary.txt (-loadgen-vs-wrk-deep).
set -euo pipefail
cd "$(dirname "$0")/.."
deep=false
if [ "${1:-}" = --deep ]; then deep=true; shift; fi
rounds=${1:-3}; secs=${2:-5}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
cargo build --release --locked --workspace
. scripts/lib/record.sh
if $deep; then record_output loadgen-vs-wrk-deep; else record_output loadgen-vs-wrk; fi
bin=target/release
lua=$(mktemp); query=$(mktemp); body=$(mktemp); rows=$(mktemp); runout=$(mktemp)
pids=()
answer=$(mktemp)
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -f "$lua" "$query" "$body" "$rows" "$runout" "$answer"' EXIT
if $deep; then
  cp commerce-graph/queries/deep.graphql "$query"
  one_query=(--query-file "$query" --operation-name DeepWishlistChain)
  checked=experiments/workloads/deep-checked.toml
  python3 -c 'import json, sys; sys.stdout.write(json.dumps({"query": open(sys.argv[1]).read(), "operationName": "DeepWishlistChain"}))' "$query" > "$body"
else
  printf '%s\n' 'query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }' > "$query"
  one_query=(--query-file "$query")
  checked=experiments/workloads/seed-checked.toml
  python3 -c 'import json, sys; sys.stdout.write(json.dumps({"query": open(sys.argv[1]).read().strip()}))' "$query" > "$body"
fi
cat > "$lua" <<LUA
wrk.method = "POST"
wrk.body = io.open("$body"):read("*a")
wrk.headers["Content-Type"] = "application/json"
LUA
# start_graph ARGS...: the graph's subgraphs and a gateway (with ARGS) on free ports; sets $gp.
start_graph() {
  gp=$(port)
  if $deep; then
    local s p overrides=()
    for s in products inventory reviews accounts; do
      p=$(port)
      "$bin/commerce-service" --subgraph "$s" --listen 127.0.0.1:$p 2>/dev/null & pids+=($!)
      overrides+=(--subgraph-url "$s=http://127.0.0.1:$p/graphql")
    done
    for _ in $(seq 100); do
      curl -fs "http://127.0.0.1:$p/health" >/dev/null 2>&1 && break; sleep 0.1
    done
    "$bin/gateway" --listen 127.0.0.1:$gp --supergraph commerce-graph/supergraph/supergraph.graphql \
      "${overrides[@]}" "$@" 2>/dev/null & pids+=($!)
  else
    local up pp
    up=$(port); pp=$(port)
    "$bin/user-service" --listen 127.0.0.1:$up 2>/dev/null & pids+=($!)
    "$bin/post-service" --listen 127.0.0.1:$pp 2>/dev/null & pids+=($!)
    "$bin/gateway" --listen 127.0.0.1:$gp --subgraph user=http://127.0.0.1:$up/graphql \
      --subgraph post=http://127.0.0.1:$pp/graphql "$@" 2>/dev/null & pids+=($!)
  fi
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$gp/health" >/dev/null 2>&1 && break; sleep 0.1; done
}
# cpu_of CMD...: run it, print "<its stdout> CPU <user+system seconds>" (bash's time).
cpu_of() { local t; t=$( { TIMEFORMAT='%U %S'; time "$@" > "$runout" 2>/dev/null; } 2>&1 ); cat "$runout"; echo " CPU $(echo "$t" | awk '{print $1 + $2}')"; }
tool() { # tool NAME URL: one measured run; prints "req/s requests cpu_s"
  case $1 in
    wrk) cpu_of wrk -t1 -c100 -d"${secs}s" -s "$lua" "$2" | python3 -c '
import re, sys
t = sys.stdin.read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
n = int(re.search(r"(\d+) requests in", t).group(1))
print(rps, n, re.search(r"CPU ([\d.]+)", t).group(1))';;
    one-query|workload)
      local extra=("${one_query[@]}"); [ "$1" = workload ] && extra=(--workload "$checked")
      cpu_of "$bin/loadgen" bench -t1 -c100 -d"${secs}s" --url "$2" --json --no-progress "${extra[@]}" | python3 -c '
import json, re, sys
t = sys.stdin.read()
j = json.loads(t.split(" CPU ")[0])
w = j.get("workload") or {}
assert w.get("wrong_answers", 0) == 0, w
print(j["requests_per_sec"], j["requests"], re.search(r"CPU ([\d.]+)", t).group(1))';;
  esac
}
# The bare configuration's answer: the gateway's own, captured once.
start_graph
curl -fsS -H 'content-type: application/json' --data-binary @"$body" "http://127.0.0.1:$gp/graphql" -o "$answer"
python3 - "$answer" <<'PY'
import json, os, sys
a = json.load(open(sys.argv[1]))
assert a.get("data") and not a.get("errors"), f"the captured answer is not a clean one: {str(a)[:300]}"
print(f"bare: loadgen target --body, one captured gateway answer ({os.path.getsize(sys.argv[1])} bytes)")
PY
kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true; pids=()
tools=(wrk one-query workload)
for cfg in bare no-cache ttl-0 ttl-10; do
  case $cfg in no-cache|bare) args=();; ttl-0) args=(--ttl 0);; ttl-10) args=(--ttl 10);; esac
  if [ "$cfg" = bare ]; then
    gp=$(port)
    "$bin/loadgen" target --listen 127.0.0.1:$gp --threads 1 --body "$answer" 2>/dev/null & pids+=($!)
    wait_up "http://127.0.0.1:$gp/"
    url=http://127.0.0.1:$gp/
  else
    start_graph "${args[@]}"
    url=http://127.0.0.1:$gp/graphql
  fi
  wrk -t1 -c100 -d2s -s "$lua" "$url" >/dev/null   # warm-up, not reported
  for r in $(seq "$rounds"); do
    for i in 0 1 2; do
      t=${tools[$(( (i + r) % 3 ))]}
      line="$cfg $r $t $(tool "$t" "$url")"
      echo "$line"; echo "$line" >> "$rows"
    done
  done
  kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true; pids=()
done
python3 - "$rows" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {(c, int(r), t): (float(rps), int(n), float(cpu)) for c, r, t, rps, n, cpu in rows}
print("\nconfig    path        req/s (median)  vs wrk, per round: median (min-max)  CPU us/request")
for cfg in dict.fromkeys(c for c, *_ in rows):
    rounds = sorted({r for c, r, _ in by if c == cfg})
    for t in ("wrk", "one-query", "workload"):
        rps = [by[(cfg, r, t)][0] for r in rounds]
        # A round that answered nothing (a stalled target) has no ratio and no CPU per
        # request: it is named, not divided by.
        empty = [r for r in rounds if by[(cfg, r, t)][1] == 0 or by[(cfg, r, "wrk")][0] == 0]
        cpu = [by[(cfg, r, t)][2] * 1e6 / by[(cfg, r, t)][1] for r in rounds if r not in empty]
        ratios = [by[(cfg, r, t)][0] / by[(cfg, r, "wrk")][0] for r in rounds if r not in empty]
        ratio = f"{st.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "n/a"
        note = f"  rounds without answers: {', '.join(map(str, empty))}" if empty else ""
        cpu_s = f"{st.median(cpu):6.1f}" if cpu else "   n/a"
        print(f"{cfg:9} {t:10} {st.median(rps):14.0f}  {ratio:35} {cpu_s}{note}")
PY
