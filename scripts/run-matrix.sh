#!/usr/bin/env bash
# The lab's main job. For now (until loadgen's matrix lands): build in release mode,
# start user-service, post-service and the gateway on free ports, print the seed
# query's answer, and stop them by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "run-matrix.sh: cargo is missing (install Rust with rustup)" >&2; exit 1; }
cargo build --release --locked -p gateway -p user-service -p post-service
bin=target/release

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

up=$(free_port); pp=$(free_port); gp=$(free_port)
"$bin/user-service" --listen "127.0.0.1:$up" & pids+=($!)
"$bin/post-service" --listen "127.0.0.1:$pp" & pids+=($!)
"$bin/gateway" --listen "127.0.0.1:$gp" \
  --subgraph "user=http://127.0.0.1:$up/graphql" --subgraph "post=http://127.0.0.1:$pp/graphql" & pids+=($!)

for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$gp/health" >/dev/null 2>&1 && break
  sleep 0.1
done
query='query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }'
curl -fsS "http://127.0.0.1:$gp/graphql" -H 'content-type: application/json' \
  --data "{\"query\":\"$query\"}"
echo
