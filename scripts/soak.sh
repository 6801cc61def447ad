#!/usr/bin/env bash
# A soak with flat memory: the lab's mixed workload with writes (experiments/ttl-tradeoff.toml:
# Zipf reads of posts, lists and `me`, 4% versioned writes, every answer checked) at TTL 10
# on two layered gateways sharing one Redis, for MINUTES, while Redis is restarted twice and
# user-service once. Every 5 s it samples each process's RSS, open file descriptors and
# tokio tasks, and the gateways' error counters.
#   scripts/soak.sh 10        # MINUTES (at least 3)
# It passes only if, after the warm-up (the first fifth, at least 1 min):
#   - RSS of each gateway and of post-service (never restarted) grows by at most
#     max(8 MiB, 10 %) from the first sample after warm-up to the median of the last three;
#   - their open fds grow by at most 8 and their tokio tasks by at most 32;
#   - loadgen saw 0 wrong answers, 0 transport errors, 0 timeouts and 0 non-2xx;
#   - the gateways answered with GraphQL errors only in samples that overlap a fault window
#     (from the kill until 15 s after the restart: the breakers' open time and a probe).
# Results: results/<stamp>-soak/ (soak.md with the verdict, samples.csv, faults.csv,
# loadgen.json, logs/). Exit status 0 only when it passes.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/record.sh
minutes=${1:?usage: scripts/soak.sh MINUTES (e.g. 10)}
[[ "$minutes" =~ ^[0-9]+$ && "$minutes" -ge 3 ]] || { echo "soak.sh: MINUTES must be a whole number, at least 3 (got $minutes)" >&2; exit 2; }
command -v cargo >/dev/null || { echo "soak.sh: cargo is missing (install Rust with rustup)" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "soak.sh: redis-server is missing (apt-get install redis-server)" >&2; exit 1; }
cargo build --release --locked -p gateway -p user-service -p post-service -p loadgen
bin=target/release
record_output soak
logs=$out/logs
mkdir -p "$logs"
echo "soak: $minutes min, Redis restarted twice and user-service once; $(nproc) cores, $(uname -r)"

pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop_all EXIT
trap 'exit 130' INT TERM

wait_port() { # wait_port PORT: until something listens on 127.0.0.1:PORT (10 s)
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "soak.sh: nothing listens on port $1 after 10 s" >&2; return 1
}

rp=$(port); up=$(port); pp=$(port); g1=$(port); g2=$(port)
start_redis() {
  redis-server --port "$rp" --bind 127.0.0.1 --save "" --appendonly no >>"$logs/redis.log" 2>&1 &
  redis_pid=$!; pids+=("$redis_pid"); wait_port "$rp"
}
start_user() {
  "$bin/user-service" --listen "127.0.0.1:$up" --users 1000 >>"$logs/user-service.log" 2>&1 &
  user_pid=$!; pids+=("$user_pid"); wait_port "$up"
}
start_redis
start_user
"$bin/post-service" --listen "127.0.0.1:$pp" --posts 10000 --users 1000 >"$logs/post-service.log" 2>&1 &
post_pid=$!; pids+=("$post_pid"); wait_port "$pp"
gw=()
gport=("$g1" "$g2")
for g in "$g1" "$g2"; do
  "$bin/gateway" --listen "127.0.0.1:$g" --subgraph "user=http://127.0.0.1:$up/graphql" \
    --subgraph "post=http://127.0.0.1:$pp/graphql" --ttl 10 --storage layered \
    --redis "redis://127.0.0.1:$rp" >"$logs/gateway-$g.log" 2>&1 &
  gw+=($!); pids+=($!); wait_port "$g"
done

metric() { # metric PORT NAME: a metric's value (its series summed, whatever their labels)
  # from 127.0.0.1:PORT/metrics; empty if the metric is absent
  curl -s -m 2 "http://127.0.0.1:$1/metrics" |
    awk -v n="$2" '$1 == n || index($1, n "{") == 1 { sum += $NF; found = 1 } END { if (found) print sum }'
}
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }

seconds=$((minutes * 60))
start=$(date +%s.%N)
now() { python3 -c "import time; print(f'{time.time() - $start:.1f}')"; }
"$bin/loadgen" bench --workload experiments/ttl-tradeoff.toml --url "http://127.0.0.1:$g1/graphql" \
  --url "http://127.0.0.1:$g2/graphql" --connections 50 --threads 1 --duration "${seconds}s" \
  --json --no-progress >"$out/loadgen.json" 2>"$logs/loadgen.log" &
loadgen_pid=$!; pids+=("$loadgen_pid")

echo "t_s,process,pid,rss_kib,fds,tokio_tasks,request_errors_total" >"$out/samples.csv"
echo "fault,start_s,end_s,window_end_s" >"$out/faults.csv"
sample() {
  local t; t=$(now)
  for i in 0 1; do
    echo "$t,gateway-$((i + 1)),${gw[$i]},$(rss_kib "${gw[$i]}"),$(fds "${gw[$i]}"),$(metric "${gport[$i]}" gateway_tokio_tasks),$(metric "${gport[$i]}" gateway_request_errors_total)" >>"$out/samples.csv"
  done
  echo "$t,user-service,$user_pid,$(rss_kib "$user_pid"),$(fds "$user_pid"),$(metric "$up" subgraph_tokio_tasks)," >>"$out/samples.csv"
  echo "$t,post-service,$post_pid,$(rss_kib "$post_pid"),$(fds "$post_pid"),$(metric "$pp" subgraph_tokio_tasks)," >>"$out/samples.csv"
  echo "$t,redis-server,$redis_pid,$(rss_kib "$redis_pid"),$(fds "$redis_pid"),," >>"$out/samples.csv"
}

# Faults at 30 %, 55 % and 80 % of the run: each process down 2 s, then started again on
# its port.
fault() { # fault NAME: stop and restart one process, and log its window
  local name=$1 t0 t1
  t0=$(now)
  case $name in
    redis) kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true; sleep 2; start_redis ;;
    user-service) kill "$user_pid"; wait "$user_pid" 2>/dev/null || true; sleep 2; start_user ;;
  esac
  t1=$(now)
  echo "$name,$t0,$t1,$(python3 -c "print(f'{$t1 + 15:.1f}')")" >>"$out/faults.csv"
  echo "fault: $name restarted (down from ${t0}s to ${t1}s)"
}
plan=("$((seconds * 30 / 100)) redis" "$((seconds * 55 / 100)) user-service" "$((seconds * 80 / 100)) redis")
next=0
while kill -0 "$loadgen_pid" 2>/dev/null; do
  sample
  elapsed=$(now); elapsed=${elapsed%.*}
  if [ "$next" -lt "${#plan[@]}" ]; then
    read -r at name <<<"${plan[$next]}"
    if [ "$elapsed" -ge "$at" ]; then fault "$name"; next=$((next + 1)); continue; fi
  fi
  sleep 5
done
wait "$loadgen_pid" || { echo "soak.sh: loadgen failed, see $logs/loadgen.log" >&2; exit 1; }
sample
python3 scripts/lib/soak_verdict.py "$out" "$minutes"
