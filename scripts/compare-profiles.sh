#!/usr/bin/env bash
# Repeats the release-profile measurement: the seed query at 100 connections (wrk -t1
# -c100), no cache and --ttl 0, for the `release` (fat LTO, one codegen unit),
# `release-thin` (thin LTO), `release-no-lto` and `release-cgu1` profiles, interleaved
# round by round. Prints one line per run, the median per-round ratio to release-no-lto,
# and per profile the TTL 0 / no-cache ratio (the matrix's headline, measured with wrk
# instead of loadgen).
#   scripts/compare-profiles.sh [ROUNDS] [SECONDS]
#   PROFILES="release" scripts/compare-profiles.sh 3 10    # wrk's view of the 4x only
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}; secs=${2:-4}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
read -r -a profiles <<< "${PROFILES:-release-no-lto release-thin release release-cgu1}"
for p in "${profiles[@]}"; do cargo build --locked --profile "$p" -p gateway -p user-service -p post-service; done
body='{"query":"query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }"}'
lua=$(mktemp); out=$(mktemp)
pids=()
# Whatever happens, stop what this script started (by PID) and remove its files.
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -f "$lua" "$out"' EXIT
cat > "$lua" <<LUA
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
LUA
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
run() { # profile config gateway-args...
  local prof=$1 dir=target/$1 cfg=$2; shift 2
  local up pp gp; up=$(port); pp=$(port); gp=$(port)
  "$dir/user-service" --listen 127.0.0.1:$up 2>/dev/null & local u=$!; pids+=($u)
  "$dir/post-service" --listen 127.0.0.1:$pp 2>/dev/null & local p=$!; pids+=($p)
  "$dir/gateway" --listen 127.0.0.1:$gp --subgraph user=http://127.0.0.1:$up/graphql \
    --subgraph post=http://127.0.0.1:$pp/graphql "$@" 2>/dev/null & local g=$!; pids+=($g)
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$gp/health" >/dev/null 2>&1 && break; sleep 0.1; done
  wrk -t1 -c100 -d1s -s "$lua" "http://127.0.0.1:$gp/graphql" >/dev/null
  local rps; rps=$(wrk -t1 -c100 -d"${secs}s" -s "$lua" "http://127.0.0.1:$gp/graphql" | awk '/Requests\/sec/ {print $2}')
  echo "$prof $cfg $rps" | tee -a "$out"
  kill $u $p $g; wait $u $p $g 2>/dev/null || true
  pids=()
}
for r in $(seq "$rounds"); do
  for p in "${profiles[@]}"; do run "$p" no-cache; run "$p" ttl-0 --ttl 0; done
done
python3 - "$out" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
profiles = list(dict.fromkeys(p for p, _, _ in rows))
for cfg in ("no-cache", "ttl-0"):
    base = [float(v) for p, c, v in rows if p == "release-no-lto" and c == cfg]
    for prof in profiles:
        vals = [float(v) for p, c, v in rows if p == prof and c == cfg]
        line = f"{cfg:9} {prof:15} median {st.median(vals):8.0f} req/s"
        if base:
            ratios = [a / b for a, b in zip(vals, base)]
            line += f", vs release-no-lto {st.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})"
        print(line)
for prof in profiles:
    nc = [float(v) for p, c, v in rows if p == prof and c == "no-cache"]
    t0 = [float(v) for p, c, v in rows if p == prof and c == "ttl-0"]
    ratios = [a / b for a, b in zip(t0, nc)]
    print(f"ttl-0 / no-cache with wrk, {prof}: {st.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")
PY
