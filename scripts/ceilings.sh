#!/usr/bin/env bash
# What this machine allows at all, measured with the same load as the comparisons
# (loadgen bench, 100 connections, 1 thread, 2 s warm-up), so that a target like
# "N x Mercurius" can be checked against physics before anyone optimises for it:
#   1. a server that does nothing: `loadgen target` answering a fixed body. No gateway,
#      whatever it does, can answer faster on this machine with this load tool.
#   2. each subgraph request of the seed query (captured from the gateway), sent
#      straight to the subgraph. With no cache, every client request costs these three,
#      so 1 / (sum of 1/capacity) bounds the no-cache gateway even if the gateway itself
#      cost nothing (the subgraphs would then have the whole machine).
#   scripts/ceilings.sh [SECONDS]      (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
# Everything printed is also kept in results/<UTC stamp>-ceilings/summary.txt, with the commit.
out=results/$(date -u +%Y%m%d-%H%M%S)-ceilings; mkdir -p "$out"
exec > >(tee "$out/summary.txt") 2>&1
echo "commit $(git rev-parse HEAD)$(git status --porcelain -- . ':!results' | grep -q . && echo ' (dirty)')"
secs=${1:-10}
cargo build --release --locked -p gateway -p user-service -p post-service -p loadgen
bin=$PWD/target/release
work=$(mktemp -d)
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done; pids=(); }
trap 'stop; rm -rf "$work"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 300); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; }
bench() { # label url body-file
  "$bin/loadgen" bench --url "$2" --body-file "$3" -H 'content-type: application/json' \
    --connections 100 --threads 1 --duration "${secs}s" --warmup 2s --json --no-progress > "$work/out.json"
  python3 - "$1" "$work/out.json" <<'PY' | tee -a "$work/rows"
import json, sys
r = json.load(open(sys.argv[2]))
print(sys.argv[1], round(r["requests_per_sec"]), sum(r["errors"].values()))
PY
}
# The three subgraph requests of the seed query at no cache, as the gateway sends them.
echo '{"query":"{me{id name nickname:name __typename _gw_k_id:id}}"}' > "$work/user.json"
echo '{"query":"{topPosts(count:2){pid __typename _gw_k_pid:pid}}"}' > "$work/posts.json"
echo '{"query":"query($r0:[_Any!]!){e0:_entities(representations:$r0){...on User{topPosts(count:2){pid author{id __typename _gw_k_id:id} __typename _gw_k_pid:pid} __typename _gw_k_id:id}}}","variables":{"r0":[{"__typename":"User","id":"u1"}]}}' > "$work/entities.json"
tp=$(port); up=$(port); pp=$(port)
"$bin/loadgen" target --listen 127.0.0.1:$tp --threads 2 >/dev/null 2>&1 & pids+=($!)
"$bin/user-service" --listen 127.0.0.1:$up >/dev/null 2>&1 & pids+=($!)
"$bin/post-service" --listen 127.0.0.1:$pp >/dev/null 2>&1 & pids+=($!)
wait_up "http://127.0.0.1:$tp/"; wait_up "http://127.0.0.1:$up/health"; wait_up "http://127.0.0.1:$pp/health"
echo "what req/s errors"
bench fixed-answer-server "http://127.0.0.1:$tp/" "$work/user.json"
bench users:me "http://127.0.0.1:$up/graphql" "$work/user.json"
bench posts:topPosts "http://127.0.0.1:$pp/graphql" "$work/posts.json"
bench posts:_entities "http://127.0.0.1:$pp/graphql" "$work/entities.json"
python3 - "$work/rows" <<'PY'
import sys
r = {l.split()[0]: float(l.split()[1]) for l in open(sys.argv[1]) if l.strip()}
bound = 1 / sum(1 / r[k] for k in ("users:me", "posts:topPosts", "posts:_entities"))
print()
print(f"ceiling of any server under this load:            {r['fixed-answer-server']:.0f} req/s")
print(f"bound on a no-cache gateway (3 subgraph requests): {bound:.0f} req/s, with a gateway that costs nothing")
PY
