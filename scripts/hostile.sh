#!/usr/bin/env bash
# Hostile input against the gateway (issue 57): what each hostile request costs it, and
# whether the seed query keeps its latency meanwhile.
#
# The gateway runs as a user starts it (default flags: no cache, one worker per core)
# over the lab's two subgraphs. Then, from scripts/lib/hostile.py's cases (fragment
# cycles, doubling chains with and without @skip, wide spreads, a token flood, a
# directive flood, deep braces, the amplification query, alias fan-out, deep
# introspection):
#   1. each case alone: sent 20 times one after another, then 8 at once; the gateway's
#      CPU per request (all its threads, /proc/PID/task/*/schedstat), its RSS before,
#      at its peak and after, the answer, and /health after the case;
#   2. the seed query at a steady 400 req/s (loadgen, open loop) for 10 s alone, then
#      10 s with every case sent over and over beside it: its p99 and errors in both.
# Output: results/<stamp>-hostile/ with summary.md (the tables), cases.jsonl, the loadgen
# reports and the gateway's log.
#   scripts/hostile.sh                        # the gateway built from this checkout
#   GATEWAY=PATH scripts/hostile.sh           # another build (e.g. an older commit's)
#   scripts/hostile.sh --max-cost 0 ...       # further arguments go to the gateway
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "hostile.sh: cargo is missing (install Rust with rustup)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "hostile.sh: python3 is missing (apt-get install python3)" >&2; exit 1; }
cargo build --release --locked -p gateway -p user-service -p post-service -p loadgen
bin=target/release
gateway=${GATEWAY:-$bin/gateway}
source scripts/lib/record.sh
record_output hostile
machine_lines
echo "gateway: $gateway $*"

work=$(mktemp -d)
pids=()
# A gateway stuck on a hostile request may never run its SIGTERM handler: after 5 s, KILL.
stop_hard() {
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
trap 'for p in "${pids[@]}"; do stop_hard "$p"; done; rm -rf "$work"' EXIT
start_seed_graph "$bin" "$work"
gp=$(port)
"$gateway" --listen "127.0.0.1:$gp" "${seed_args[@]}" "$@" >"$out/gateway.log" 2>&1 &
gw=$!
pids+=("$gw")
wait_up "http://127.0.0.1:$gp/health"
url=http://127.0.0.1:$gp/graphql
# Warm the gateway (its pools, the document cache's first entries) before measuring.
post_load "$url" "$work/request.json" 2s /dev/null --rate 400

echo "== 1. each case alone"
stopped=false
python3 scripts/lib/hostile.py "$url" "$gw" --repeat 20 --concurrent 8 | tee "$out/cases.jsonl" || stopped=true

if $stopped; then
  echo "== 2. skipped: the gateway stopped answering /health in part 1"
else
  echo "== 2. the seed query at 400 req/s, alone, then beside every case in a loop"
  post_load "$url" "$work/request.json" 10s "$out/seed-alone.json" --rate 400
  # The cases over and over for the load's 10 s (bounded: at most 100 passes).
  (
    end=$((SECONDS + 10))
    for _ in $(seq 100); do
      [ $SECONDS -lt $end ] || break
      python3 scripts/lib/hostile.py "$url" "$gw" --repeat 2 --concurrent 2 >/dev/null || break
    done
  ) &
  beside=$!
  post_load "$url" "$work/request.json" 10s "$out/seed-beside.json" --rate 400
  wait "$beside" || true
fi
health=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$gp/health" || true)
[ -n "$health" ] && [ "$health" != 000 ] || health="no answer within 5 s"

python3 - "$out" "$health" <<'PY' | tee "$out/summary.md"
import json, sys
out, health = sys.argv[1], sys.argv[2]
cases = [json.loads(l) for l in open(f"{out}/cases.jsonl") if l.strip()]
print(f"# Hostile input ({out.split('/')[-1]})\n")
print("Each case sent 20 times one after another, then 8 at once, to the gateway alone. CPU: the")
print("gateway's, all threads, per request. RSS: before the case, its peak while the case ran, and")
print("0.5 s after.\n")
print("| case | body bytes | answer | gateway CPU per request | 8 at once, per request | RSS before → peak → after | /health after |")
print("|---|---:|---|---:|---:|---|---|")
for c in cases:
    if "stopped" in c:
        print(f"| {c['case']} | | **{c['stopped']}** | | | | no |")
        continue
    answer = "no answer" if c["status"] is None else f"{c['status']}: {c['message'][:90]}"
    if c["unanswered"]:
        answer += f" ({c['unanswered']} of {c['requests']} unanswered)"
    answer = answer.replace("|", "\\|")
    print(f"| {c['case']} | {c['bytes']:,} | {answer} | {c['cpu_ms_per_request']:.3f} ms | "
          f"{c['cpu_ms_per_concurrent_request']:.3f} ms | {c['rss_before_mib']:.1f} → {c['rss_peak_mib']:.1f} → "
          f"{c['rss_after_mib']:.1f} MiB | {'yes' if c['health'] else 'no'} |")
worst = max((c for c in cases if "cpu_ms_per_request" in c), key=lambda c: c["cpu_ms_per_request"])
print(f"\nMost CPU per request: {worst['case']}, {worst['cpu_ms_per_request']:.3f} ms.")
print("\n## The seed query beside them\n")
print("loadgen, open loop at 400 req/s, 100 connections, 10 s each.\n")
print("| phase | answered | errors | p50 | p99 | p99.9 |")
print("|---|---:|---:|---:|---:|---:|")
for phase in ("alone", "beside"):
    try:
        r = json.load(open(f"{out}/seed-{phase}.json"))
    except FileNotFoundError:
        print(f"| {phase} | not run: the gateway had stopped | | | | |")
        continue
    l = r["latency_ms"]
    e = r["errors"]
    errors = e["transport"] + e["timeouts"] + e["non_2xx"] + e["graphql"]
    print(f"| {phase} | {r['requests']:,} | {errors} | {l['p50']:.2f} ms | {l['p99']:.2f} ms | {l['p99_9']:.2f} ms |")
print(f"\n/health at the end: {health}.")
PY
