#!/usr/bin/env bash
# Where the CPU of one deep request goes, for the gateway and for S_deep's bare server side
# by side: why the gateway's ratio to S_deep differs from one machine to another.
#
# Under the load of scripts/cpu-per-request.sh --deep (loadgen bench, 100 connections, one
# thread, DeepWishlistChain), each of the two is measured in turn:
#   - S_deep's server, `loadgen target --body` holding one real gateway answer to the deep
#     query (98.5 KB), captured first (while its subgraph exchanges are recorded);
#   - the gateway without a cache, its subgraphs replayed (`loadgen target --replay`, from
#     the exchanges of one no-cache deep query, recorded first), with GATEWAY's flags.
# For each, over the measured window (a warm-up run comes first):
#   - CPU per request and its share in the kernel (utime and stime of /proc/PID/stat);
#   - write system calls per request (syscw of /proc/PID/io: write and writev);
#   - a `perf record -e cpu-clock -g` profile (sampling at 2 kHz with call graphs costs
#     each process 8–18% more CPU per request than without, on Intel Xeon): the share
#     per binary (the process's own, the kernel, libc), the functions with the most
#     samples of their own, the shares of the writes, the reads and epoll_wait with all the
#     kernel does under them (on the loopback a write carries the receiver's TCP work too),
#     and the share under `sock_def_readable`: the kernel waking the receiving process at
#     the end of a write on the loopback, which the sender pays.
#   scripts/profile-deep.sh [SECONDS]                   (default 10 s per window)
#   GATEWAY="target/pgo/release/gateway --worker-threads 1 --max-executing-requests 8" \
#     scripts/profile-deep.sh                           (the default: the PGO build, as the
#                                                        decisive run measures it; the plain
#                                                        build when there is no PGO build)
# Output: results/<stamp>-profile-deep (summary.txt, and each process's perf report as text).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
die() { echo "profile-deep.sh: $*" >&2; exit 2; }
[[ "$secs" =~ ^[1-9][0-9]*$ ]] || die "SECONDS must be a whole number of seconds, not '$secs'"
command -v perf >/dev/null || die "perf is missing (Debian: apt-get install linux-perf)"
. scripts/lib/record.sh
default_gateway="target/release/gateway --worker-threads 1 --max-executing-requests 8"
[ -x target/pgo/release/gateway ] && default_gateway="target/pgo/release/gateway --worker-threads 1 --max-executing-requests 8"
read -r -a gateway <<< "${GATEWAY:-$default_gateway}"
[ -x "${gateway[0]}" ] || die "GATEWAY: ${gateway[0]} is not an executable"
record_output profile-deep
cargo build --release --locked -p gateway -p commerce-graph -p loadgen
bin=$PWD/target/release
machine_lines
echo "gateway: ${gateway[*]}"
if [ "${gateway[0]}" = target/pgo/release/gateway ]; then echo "pgo build: $(cat target/pgo/built-from 2>/dev/null || echo 'of an unknown commit')"; fi
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do stop_pid "$p"; done; rm -rf "$work"' EXIT

start_deep_graph "$bin" "$work"
subgraphs=("${pids[@]}")
# S's body is the deep answer as it came through the recorder, as in deep-ceilings.sh.
mkdir "$work/exchanges"
record_deep_exchanges "$bin" "$work/request.json" "$work/exchanges" "$work/answer.json" "${deep_args[@]}"
for p in "${subgraphs[@]}"; do stop_pid "$p"; done
replay_graph "$bin" "$work/exchanges" "${deep_args[@]}"
echo "S's answer: $(stat -c %s "$work/answer.json") bytes; subgraphs replayed from $(ls "$work/exchanges" | grep -c answer) exchanges"
echo "load: loadgen bench, 100 connections, one thread, ${secs} s per window"

# profile NAME PID URL: one measured window of PID under load, with perf attached.
profile() {
  local name=$1 pid=$2 url=$3 stat0 stat1 io0 io1
  post_load "$url" "$work/request.json" 3s
  stat0=$(awk '{print $14, $15}' "/proc/$pid/stat"); io0=$(awk '/^syscw/ {print $2}' "/proc/$pid/io")
  perf record -e cpu-clock -F 2000 -g -p "$pid" -o "$work/$name.data" -- sleep "$secs" >/dev/null 2>"$work/$name.perf-err" & local rec=$!
  post_load "$url" "$work/request.json" "${secs}s" "$work/$name.json"
  wait $rec || die "perf record on $name (PID $pid) failed: $(tail -3 "$work/$name.perf-err")"
  stat1=$(awk '{print $14, $15}' "/proc/$pid/stat"); io1=$(awk '/^syscw/ {print $2}' "/proc/$pid/io")
  perf report -i "$work/$name.data" --no-children --sort dso -q -g none 2>/dev/null > "$work/$name.dso"
  perf report -i "$work/$name.data" --no-children --sort sym -q -g none 2>/dev/null > "$out/profile-$name.txt"
  perf report -i "$work/$name.data" --children --sort sym -q -g none 2>/dev/null > "$work/$name.children"
  python3 - "$name" "$work/$name.json" "$stat0" "$stat1" "$io0" "$io1" "$(getconf CLK_TCK)" \
    "$work/$name.dso" "$out/profile-$name.txt" "$work/$name.children" <<'PY'
import json, re, sys
name, load, (u0, s0), (u1, s1), io0, io1, hz = (sys.argv[1], json.load(open(sys.argv[2])),
    sys.argv[3].split(), sys.argv[4].split(), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]))
n = max(load["requests"], 1)
errors = sum(load["errors"].values())
if errors:  # a window with failed requests measures something else: no figures from it
    sys.exit(f"profile-deep.sh: {name}: {errors} of {n} requests failed in the measured window")
user, system = (int(u1) - int(u0)) / hz, (int(s1) - int(s0)) / hz
def shares(path):
    rows = []
    for line in open(path):
        m = re.match(r"\s*([0-9.]+)%\s+(?:[0-9.]+%\s+)?(?:\[[.k]\]\s+)?(.+?)\s*$", line)  # with --children, the first of two shares
        if m: rows.append((float(m.group(1)), m.group(2)))
    return rows
cpu_us = (user + system) / n * 1e6
print(f"\n== {name}: {load['requests_per_sec']:.0f} req/s, no errors, "
      f"{cpu_us:.1f} us CPU per request, {system / max(user + system, 1e-9):.0%} of it in the kernel (stime), "
      f"{(io1 - io0) / n:.2f} write system calls per request")
print("by binary: " + ", ".join(f"{d} {p:.1f}%" for p, d in shares(sys.argv[8])[:4]))
print("the functions with the most samples of their own:")
for p, s in shares(sys.argv[9])[:12]: print(f"  {p:5.2f}%  {s}")
children = {}
for p, s in shares(sys.argv[10]): children.setdefault(s, p)
writes = max((io1 - io0) / n, 1e-9)
# The kernel's entry points of each kind of system call, with everything under them (on the
# loopback a write also carries the receiver's TCP processing and its wake-up).
calls = {"writes": ("do_writev", "ksys_write"), "reads": ("__sys_recvfrom", "ksys_read"),
         "waits": ("do_epoll_wait",)}
spent = {kind: sum(children.get(f, 0.0) for f in entries) for kind, entries in calls.items()}
print("system calls, with all under them: "
      f"writes {spent['writes']:.1f}% = {spent['writes'] / 100 * cpu_us:.1f} us per request "
      f"({spent['writes'] / 100 * cpu_us / writes:.2f} us a write), "
      f"reads {spent['reads']:.1f}% = {spent['reads'] / 100 * cpu_us:.1f} us, "
      f"epoll_wait {spent['waits']:.1f}% = {spent['waits'] / 100 * cpu_us:.1f} us")
wake = children.get("sock_def_readable", 0.0)
print(f"waking the receiver (under sock_def_readable): {wake:.1f}% = {wake / 100 * cpu_us:.1f} us per request, "
      f"{wake / 100 * cpu_us / writes:.2f} us per write")
PY
}

tp=$(port)
"$bin/loadgen" target --listen 127.0.0.1:$tp --body "$work/answer.json" >/dev/null 2>&1 & t=$!; pids+=($t)
wait_up "http://127.0.0.1:$tp/"
profile s-deep $t "http://127.0.0.1:$tp/graphql"
stop_pid $t
gp=$(port)
"${gateway[@]}" --listen 127.0.0.1:$gp "${replay_args[@]}" >/dev/null 2>&1 & g=$!; pids+=($g)
wait_up "http://127.0.0.1:$gp/health"
profile gateway $g "http://127.0.0.1:$gp/graphql"
curl -fsS -H 'content-type: application/json' --data-binary @"$work/request.json" "http://127.0.0.1:$gp/graphql" -o "$work/check.json"
cmp -s "$work/check.json" "$work/answer.json" || die "the replayed gateway's answer differs from the one S served"
