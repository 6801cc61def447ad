#!/usr/bin/env bash
# What the machine and the lab's parts allow on the deep query, measured, next to issue
# 23's targets, which are in S_deep: the server-side CPU of one bare exchange of the
# deep answer (98.5 KB), as scripts/cpu-per-request.sh --deep measures it. Each figure
# is a floor: work any gateway built on these parts must do per request, with every
# other cost left out, so a target below a floor cannot be met by tuning.
#   1. S_deep: `loadgen target --body` serving one real gateway answer to
#      DeepWishlistChain (captured first), loaded as the gateway is (loadgen bench, 100
#      connections, 1 thread); its CPU per request from /proc/PID/stat.
#   2. No cache: the gateway's own server side (S_deep), the client side of each
#      subgraph exchange of one deep query, and parsing the subgraph answers. The
#      exchanges are recorded as the gateway sends them (scripts/lib/exchange_recorder.py,
#      a proxy between a no-cache gateway and the four subgraphs), and each is replayed as
#      a bare exchange: loadgen (a hyper client, as the gateway's reqwest is) sends that
#      request's body to `loadgen target --body` holding that answer, and loadgen's own
#      CPU per request is the client side. Parsing is the gateway's tape parser on the
#      committed deep answer (`cargo bench -p gateway --bench answer_parse`), per byte,
#      times the answers' bytes. Each bench figure is its fastest sample, the one least
#      disturbed by the rest of the machine. Left out: planning, building the representations and
#      request bodies, merging, and writing the answer.
#   3. TTL 10 with per-entity entries (the resolver cache): S_deep and one store read per
#      cache call a fully cached deep answer makes (counted from the gateway's metrics on
#      a warm TTL 10 gateway), each at the memory store's cost with its key built
#      beforehand and one clock reading for all (`cargo bench -p cache-core --bench cache
#      -- hits_of_one_deep_answer`). Left out: the keys, the walks, merging and writing.
# Beside the floors, the gateway itself without a cache, in the same run: one worker
# thread, loaded as S_deep is, its subgraphs replayed from the same recording by
# `loadgen target --replay` (so that their own work does not share the cores with it).
# What it spends above the no-cache floor is its own work on the answers.
#   scripts/deep-ceilings.sh [SECONDS]     (default 10 s per load; results/<stamp>-deep-ceilings)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
. scripts/lib/record.sh
record_output deep-ceilings
cargo build --release --locked -p gateway -p commerce-graph -p loadgen
bin=$PWD/target/release
machine_lines
work=$(mktemp -d)
mkdir "$work/exchanges"
pids=()
trap 'for p in "${pids[@]}"; do stop_pid "$p"; done; rm -rf "$work"' EXIT
start_deep_graph "$bin" "$work"
deep_query() { deep_answer "$1" "$work/request.json" "$2"; } # PORT OUT: one deep query, its answer checked clean
# The subgraph exchanges of one deep query, recorded between a no-cache gateway and the subgraphs.
record_deep_exchanges "$bin" "$work/request.json" "$work/exchanges" "$work/answer.json" "${deep_args[@]}"
# The cache calls of one fully cached deep answer, on a warm TTL 10 gateway.
gp=$(port)
"$bin/gateway" --listen 127.0.0.1:$gp --worker-threads 1 --ttl 10 "${deep_args[@]}" >/dev/null 2>&1 & g=$!; pids+=($g)
wait_up "http://127.0.0.1:$gp/health"
hits() { curl -fsS "http://127.0.0.1:$gp/metrics" | awk '/^gateway_cache_hits_total/ {n += $NF} END {print n + 0}'; }
deep_query $gp "$work/warm.json"
h0=$(hits); deep_query $gp "$work/cached.json"; h1=$(hits)
stop_pid $g
cmp -s <(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])), sort_keys=True))' "$work/answer.json") \
       <(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])), sort_keys=True))' "$work/cached.json") ||
  { echo "deep-ceilings.sh: the cached deep answer differs from the uncached one" >&2; exit 1; }
echo "one deep query: $(stat -c %s "$work/answer.json")-byte answer; $(ls "$work/exchanges" | grep -c answer) subgraph exchanges; $((h1 - h0)) cache hits when fully cached"
# window URL BODY-FILE PID OUT: load URL as S_deep is loaded (2 s of warm-up, then the
# window), the figures in OUT; prints PID's CPU ticks over the window.
window() {
  local t0
  post_load "$1" "$2" 2s
  t0=$(ticks "$3")
  post_load "$1" "$2" "${secs}s" "$4"
  echo $(($(ticks "$3") - t0))
}
bench() { # NAME BODY-FILE ANSWER-FILE: a bare exchange of that request and answer, one row
  local tp t ticked; tp=$(port)
  "$bin/loadgen" target --listen 127.0.0.1:$tp --threads 2 --body "$3" >/dev/null 2>&1 & t=$!; pids+=($t)
  wait_up "http://127.0.0.1:$tp/"
  ticked=$(window "http://127.0.0.1:$tp/" "$2" $t "$work/out.json")
  stop_pid $t
  python3 - "$1" "$work/out.json" "$ticked" "$(getconf CLK_TCK)" "$(stat -c %s "$2")" "$(stat -c %s "$3")" <<'PY' | tee -a "$work/rows"
import json, sys
r = json.load(open(sys.argv[2]))
n = max(r["requests"], 1)
server = int(sys.argv[3]) * 1e6 / int(sys.argv[4]) / n
client = r["loadgen_cpu"]["process_cores"] / max(r["requests_per_sec"], 1) * 1e6
print(sys.argv[1], sys.argv[5], sys.argv[6], round(r["requests_per_sec"]), sum(r["errors"].values()), round(server, 2), round(client, 2))
PY
}
echo
echo "bare exchanges: what request_bytes answer_bytes req/s errors server_cpu_us_per_request client_cpu_us_per_request"
bench deep-answer "$work/request.json" "$work/answer.json"
for answer in "$work"/exchanges/*.answer.json; do
  name=$(basename "$answer" .answer.json)
  bench "$name" "$work/exchanges/$name.request.json" "$answer"
done
# The gateway itself without a cache, its subgraphs replayed from the recording.
replay_graph "$bin" "$work/exchanges" "${deep_args[@]}"
gp=$(port)
"$bin/gateway" --listen 127.0.0.1:$gp --worker-threads 1 "${replay_args[@]}" >/dev/null 2>&1 & g=$!; pids+=($g)
wait_up "http://127.0.0.1:$gp/health"
deep_query $gp "$work/replayed.json"
cmp -s "$work/answer.json" "$work/replayed.json" ||
  { echo "deep-ceilings.sh: the answer with the subgraphs replayed differs from the recorded one" >&2; exit 1; }
ticked=$(window "http://127.0.0.1:$gp/graphql" "$work/request.json" $g "$work/gateway.json")
stop_pid $g; stop_pid $replay_pid
python3 - "$work/gateway.json" "$ticked" "$(getconf CLK_TCK)" > "$work/gateway-row" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n = max(r["requests"], 1)
print(round(r["requests_per_sec"]), sum(r["errors"].values()), round(int(sys.argv[2]) * 1e6 / int(sys.argv[3]) / n, 2))
PY
echo "the gateway itself, no cache, one worker thread, its subgraphs replayed: req/s errors cpu_us_per_request"
cat "$work/gateway-row"
echo
echo "the lab's parts, in criterion benches:"
# criterion's own lines, without its comparison with an earlier run of the bench.
criterion_lines() { awk '/^(answer_parse|hits_of)/ {n = 2; print; next} n > 0 && /time:|thrpt:/ {print; n--}'; }
cargo bench -p gateway --bench answer_parse -- --warm-up-time 1 --measurement-time 3 2>&1 | criterion_lines
cargo bench -p cache-core --bench cache -- hits_of_one_deep_answer --warm-up-time 1 --measurement-time 3 2>&1 | criterion_lines
python3 - "$work/rows" "$((h1 - h0))" target/criterion "$work/gateway-row" <<'PY'
import json, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
hits = int(sys.argv[2])
def fastest(path):
    """The fastest of criterion's samples, per iteration: the run least disturbed by
    the rest of a shared machine (criterion's own median is printed above)."""
    sample = json.load(open(f"{sys.argv[3]}/{path}/new/sample.json"))
    return min(t / i for t, i in zip(sample["times"], sample["iters"]))
deep = rows[0]
s = float(deep[5])
exchanges = rows[1:]
answer_bytes = sum(int(r[2]) for r in exchanges)
request_bytes = sum(int(r[1]) for r in exchanges)
parse_ns_per_byte = fastest("answer_parse/deep_answer") / int(deep[2])
hit_ns = fastest("hits_of_one_deep_answer/hit_at_690_keys") / 690
client = sum(float(r[6]) for r in exchanges)
parse = answer_bytes * parse_ns_per_byte / 1e3
no_cache = s + client + parse
ttl10 = s + hits * hit_ns / 1e3
print()
print(f"S_deep, the server side of one bare exchange of the {deep[2]}-byte answer: {s:.1f} us")
print(f"no cache, at the least: {no_cache:.1f} us = {no_cache / s:.1f} S_deep (issue 23's target: 20 S_deep)")
print(f"  = S_deep {s:.1f} + the client side of {len(exchanges)} subgraph exchanges {client:.1f}"
      f" ({request_bytes} bytes sent, {answer_bytes} received) + parsing the answers {parse:.1f}"
      f" ({parse_ns_per_byte:.2f} ns per byte)")
rps, errors, gateway = open(sys.argv[4]).read().split()
if int(errors):
    print(f"the gateway itself, no cache: {errors} errors in its window, so its figure is left out")
else:
    gateway = float(gateway)
    print(f"the gateway itself, no cache, its subgraphs replayed: {gateway:.1f} us = {gateway / s:.1f} S_deep,"
          f" {gateway / no_cache:.1f} times the floor; above it, {gateway - no_cache:.1f} us of its own work on the answers"
          " (planning, walks, representations and request bodies, merging, writing) and its runtime")
print(f"TTL 10 with per-entity entries, at the least: {ttl10:.1f} us = {ttl10 / s:.2f} S_deep (issue 23's target: 2 S_deep)")
print(f"  = S_deep {s:.1f} + {hits} store reads at {hit_ns:.0f} ns ({hits * hit_ns / 1e3:.1f} us)")
left = 2 * s - ttl10
if left > 0:
    print(f"  what per-entity caching may spend on everything else within 2 S_deep: {left:.1f} us, {left * 1e3 / max(hits, 1):.0f} ns per entity")
else:
    print(f"  the store reads alone exceed 2 S_deep by {-left:.1f} us: no per-entity cache on this store can meet it")
PY
