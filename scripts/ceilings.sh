#!/usr/bin/env bash
# What this machine allows at all, measured with the same load as the comparisons
# (loadgen bench, 100 connections, 1 thread, 2 s warm-up), so that a target like
# "N x Mercurius" can be checked against the machine before anyone optimises for it:
#   1. a server that does nothing: `loadgen target` answering a fixed body. No gateway
#      that does any work can answer faster on this machine with this load tool.
#   2. the CPU the subgraphs spend on one seed query without a cache: each of its three
#      subgraph requests (as the gateway sends them; the gateway's own answer is checked
#      first, so the planner has not drifted) is loaded straight onto its subgraph, and
#      the subgraph's CPU time (/proc/PID/stat) over the window is divided by the
#      requests it answered. The sum over the three requests is what one no-cache
#      client request costs in the subgraphs alone, so cores / that sum bounds a
#      no-cache gateway's req/s even if the gateway and the load generator cost nothing.
#   4. with --baseline DIR: the same three subgraph requests on two builds of the
#      subgraphs side by side, DIR's user-service and post-service against this tree's
#      (or --candidate DIR's), in ROUNDS rounds whose order alternates (AB, BA, ...),
#      each build's services started afresh in each round. It prints each build's CPU
#      per request (median over the rounds) and the median of the per-round ratios,
#      for each request and for the sum: one no-cache seed query. A baseline is any
#      older commit built on its own, e.g. for the commit the subgraph work started from:
#        git worktree add /tmp/base d5df775 && (cd /tmp/base && cargo build --release --locked -p user-service -p post-service)
#        scripts/ceilings.sh 10 --baseline /tmp/base/target/release
#   scripts/ceilings.sh [SECONDS] [--baseline DIR [--candidate DIR] [--rounds N]]
#                                        (default 10 s, candidate target/release, 3 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=10 baseline="" candidate=$PWD/target/release rounds=3
while [ $# -gt 0 ]; do
  case $1 in
    --baseline) baseline=$(realpath "$2"); shift 2 ;;
    --candidate) candidate=$(realpath "$2"); shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) secs=$1; shift ;;
  esac
done
for dir in $baseline ${baseline:+$candidate}; do
  for b in user-service post-service; do
    [ -x "$dir/$b" ] || { echo "ceilings.sh: no $b in $dir" >&2; exit 2; }
  done
done
. scripts/lib/record.sh
record_output ceilings   # everything printed is also kept in results/<stamp>-ceilings/summary.txt
cargo build --release --locked -p gateway -p user-service -p post-service -p loadgen
bin=$PWD/target/release
work=$(mktemp -d)
rows=$work/rows   # where bench() appends its lines
pids=() ab_pids=()
stop() { for p in "${pids[@]}" "${ab_pids[@]}"; do kill "$p" 2>/dev/null || true; done; for p in "${pids[@]}" "${ab_pids[@]}"; do wait "$p" 2>/dev/null || true; done; pids=() ab_pids=(); }
trap 'stop; rm -rf "$work"' EXIT
bench() { # label url body-file [pid whose CPU to count]
  local before=0 after=0
  [ -n "${4:-}" ] && before=$(ticks "$4")
  "$bin/loadgen" bench --url "$2" --body-file "$3" -H 'content-type: application/json' \
    --connections 100 --threads 1 --duration "${secs}s" --warmup 2s --json --no-progress > "$work/out.json"
  [ -n "${4:-}" ] && after=$(ticks "$4")
  python3 - "$1" "$work/out.json" "$before" "$after" "$(getconf CLK_TCK)" <<'PY' | tee -a "$rows"
import json, sys
r = json.load(open(sys.argv[2]))
ticks = int(sys.argv[4]) - int(sys.argv[3])
# The CPU counted covers warm-up and window; the requests, the window only: scale by time.
share = r["duration_s"] / (r["duration_s"] + r["warmup_s"])
cpu_us = ticks / int(sys.argv[5]) * share / max(r["requests"], 1) * 1e6
# The load generator is a hyper client: its CPU per request is one client-side exchange.
client_us = r["loadgen_cpu"]["process_cores"] / max(r["requests_per_sec"], 1) * 1e6
print(sys.argv[1], round(r["requests_per_sec"]), sum(r["errors"].values()),
      round(cpu_us, 1), round(client_us, 1), r["loadgen_cpu"]["may_be_bottleneck"])
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
# The planner must still send exactly these three requests (checked through a gateway).
gp=$(port)
"$bin/gateway" --listen 127.0.0.1:$gp --subgraph user=http://127.0.0.1:$up/graphql \
  --subgraph post=http://127.0.0.1:$pp/graphql >/dev/null 2>&1 & pids+=($!)
wait_up "http://127.0.0.1:$gp/health"
count() { curl -fs "http://127.0.0.1:$1/metrics" | awk '/^subgraph_requests_total/ {print $2}'; }
u0=$(count $up); p0=$(count $pp)
curl -fs "http://127.0.0.1:$gp/graphql" -H 'content-type: application/json' \
  -d '{"query":"query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }"}' >/dev/null
[ "$(( $(count $up) - u0 ))" = 1 ] && [ "$(( $(count $pp) - p0 ))" = 2 ] || {
  echo "ceilings.sh: the gateway no longer sends 1 users + 2 posts requests for the seed query; update the bodies" >&2; exit 1; }
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'
echo "what req/s errors server_cpu_us_per_request client_cpu_us_per_request loadgen_may_be_bottleneck"
bench fixed-answer-server "http://127.0.0.1:$tp/" "$work/user.json" "${pids[0]}"
bench users:me "http://127.0.0.1:$up/graphql" "$work/user.json" "${pids[1]}"
bench posts:topPosts "http://127.0.0.1:$pp/graphql" "$work/posts.json" "${pids[2]}"
bench posts:_entities "http://127.0.0.1:$pp/graphql" "$work/entities.json" "${pids[2]}"
python3 - "$work/rows" "$(nproc)" <<'PY'
import sys
rows = {l.split()[0]: l.split() for l in open(sys.argv[1]) if l.strip()}
cores = int(sys.argv[2])
cpu = sum(float(rows[k][3]) for k in ("users:me", "posts:topPosts", "posts:_entities"))
print()
print(f"ceiling of any server under this load: {float(rows['fixed-answer-server'][1]):.0f} req/s (a fixed answer, nothing else)")
print(f"subgraph CPU per no-cache seed query:  {cpu:.1f} us (users:me + posts:topPosts + posts:_entities)")
print(f"bound on a no-cache gateway:           {cores / cpu * 1e6:.0f} req/s on {cores} cores, even if the gateway and the load generator cost nothing")
server = float(rows["fixed-answer-server"][3])
client = float(rows["fixed-answer-server"][4])
floor = cpu + server + 4 * client
print(f"one HTTP exchange, doing nothing else:  {server:.1f} us on the server side, {client:.1f} us on the client side")
print(f"a no-cache request at the least:       {floor:.1f} us = subgraphs {cpu:.1f} + the gateway's server side {server:.1f}"
      f" + 3 client exchanges to the subgraphs and the load generator's own {4 * client:.1f}")
print(f"bound with those:                      {cores / floor * 1e6:.0f} req/s on {cores} cores (a gateway that only forwards bytes)")
PY
echo
echo "start-up with a big data set: seconds from spawn to the first /health answer, RSS then (peak), MiB"
for cmd in "user-service --users 1000000" "post-service --posts 1000000 --users 1000000"; do
  sp=$(port)
  python3 - "$bin" "$sp" $cmd <<'PY'
import subprocess, sys, time, urllib.request
bindir, port, name, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
started = time.monotonic()
p = subprocess.Popen([f"{bindir}/{name}", "--listen", f"127.0.0.1:{port}", *args],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            break
        except OSError:
            if p.poll() is not None or time.monotonic() - started > 60:
                sys.exit(f"{name} did not start")
            time.sleep(0.002)
    ready = time.monotonic() - started
    status = dict(l.split(":", 1) for l in open(f"/proc/{p.pid}/status"))
    mib = lambda k: int(status[k].split()[0]) / 1024
    print(f"{name} {' '.join(args)}: ready in {ready:.3f} s, RSS {mib('VmRSS'):.1f} MiB (peak {mib('VmHWM'):.1f})")
finally:
    p.terminate(); p.wait()
PY
done

[ -z "$baseline" ] && exit 0
echo
echo "A/B, $rounds rounds: baseline $baseline against candidate $candidate"
echo "round build what req/s errors server_cpu_us_per_request client_cpu_us_per_request loadgen_may_be_bottleneck"
rows=$work/ab
for r in $(seq "$rounds"); do
  order="baseline candidate"; [ $((r % 2)) = 0 ] && order="candidate baseline"
  for build in $order; do
    dir=$baseline; [ "$build" = candidate ] && dir=$candidate
    au=$(port); ap=$(port)
    "$dir/user-service" --listen 127.0.0.1:$au >/dev/null 2>&1 & ab_pids=($!)
    "$dir/post-service" --listen 127.0.0.1:$ap >/dev/null 2>&1 & ab_pids+=($!)
    wait_up "http://127.0.0.1:$au/health"; wait_up "http://127.0.0.1:$ap/health"
    bench "$r $build users:me" "http://127.0.0.1:$au/graphql" "$work/user.json" "${ab_pids[0]}"
    bench "$r $build posts:topPosts" "http://127.0.0.1:$ap/graphql" "$work/posts.json" "${ab_pids[1]}"
    bench "$r $build posts:_entities" "http://127.0.0.1:$ap/graphql" "$work/entities.json" "${ab_pids[1]}"
    kill "${ab_pids[@]}"; wait "${ab_pids[@]}" 2>/dev/null || true
  done
done
python3 - "$rows" <<'PY'
import statistics, sys
cpu = {}  # (build, what) -> {round: us}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 8:
        cpu.setdefault((f[1], f[2]), {})[int(f[0])] = float(f[5])
whats = ["users:me", "posts:topPosts", "posts:_entities"]
rounds = sorted(cpu[("baseline", whats[0])])
seed = {b: {r: sum(cpu[(b, w)][r] for w in whats) for r in rounds} for b in ("baseline", "candidate")}
print()
print(f"{'subgraph CPU per request (us)':32} {'baseline':>9} {'candidate':>9} {'candidate/baseline (min-max)':>30}")
for what, table in [(w, {b: cpu[(b, w)] for b in ("baseline", "candidate")}) for w in whats] + [("one no-cache seed query", seed)]:
    ratios = [table["candidate"][r] / table["baseline"][r] for r in rounds]
    print(f"{what:32} {statistics.median(table['baseline'].values()):9.1f} {statistics.median(table['candidate'].values()):9.1f}"
          f" {statistics.median(ratios):16.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
PY
