#!/usr/bin/env bash
# Instructions the gateway executes per seed request, counted by valgrind's callgrind:
# the same figure for the same binary and inputs whatever else the shared machine is
# doing, so two builds can be compared without the rounds' spread of a CPU-time run.
#
# Each gateway (one worker thread, --ttl 10 unless FLAGS says otherwise) runs under
# callgrind over one pair of subgraphs; 300 requests warm it (documents, plans and
# cache entries), its counters are zeroed, and N requests (default 3000, 4 connections)
# are counted. Printed per gateway: instructions per request in all, and split into
# executing the plan (`Executor::run`), writing the response (`pipeline::produce`), the
# rest of the request pipeline (`pipeline::handle`) and everything else (hyper, tokio,
# the kernel interface); then the functions whose own count differs most between the
# first two gateways.
#   scripts/count-instructions.sh NAME=GATEWAY [NAME=GATEWAY ...]
#   N=3000 FLAGS="--ttl 10" scripts/count-instructions.sh after=target/release/gateway before=/path/to/old/gateway
# With CACHE_SIM=1, callgrind also simulates the caches and the branch predictor
# (--cache-sim=yes --branch-sim=yes), and a second table gives per request the L1
# instruction and data misses and the mispredicted branches: why two builds can differ
# in CPU time by more than their instructions do. The simulation models valgrind's
# default caches (32 KiB L1s), not this machine's, so compare builds with it, never
# read it as the machine's own counts. It makes the run about twice as slow.
# With KEEP=DIR, each gateway's callgrind profile is also kept as DIR/NAME.callgrind, to
# read with callgrind_annotate (per function, inclusive with --inclusive=yes, per line with
# --auto=yes).
# With --deep, the same on the deep query (DeepWishlistChain over the commerce graph's
# four subgraphs, the gateway started from the committed supergraph, as
# scripts/cpu-per-request.sh --deep runs it): 30 requests warm it, and N defaults to 200.
# Output: results/<stamp>-instructions/summary.txt (results/<stamp>-instructions-deep).
set -euo pipefail
cd "$(dirname "$0")/.."
deep=false
if [ "${1:-}" = --deep ]; then deep=true; shift; fi
[ $# -ge 1 ] || { echo "usage: $0 [--deep] NAME=GATEWAY [NAME=GATEWAY ...]" >&2; exit 2; }
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
cargo build --release --locked -p gateway -p user-service -p post-service -p commerce-graph -p loadgen
. scripts/lib/record.sh
if $deep; then
  record_output "${RUN_NAME:-instructions-deep}"
  n=${N:-200}; warm=30
else
  record_output "${RUN_NAME:-instructions}"
  n=${N:-3000}; warm=300
fi
flags=${FLAGS:---ttl 10}
bin=target/release
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
if $deep; then
  start_deep_graph "$bin" "$work"
  subgraph_args=("${deep_args[@]}")
else
  start_seed_graph "$bin" "$work"
  subgraph_args=("${seed_args[@]}")
fi
machine_lines
echo "simulator: $(valgrind --version)"
echo "gateway flags: --worker-threads 1 $flags; $n counted requests after $warm of warm-up, 4 connections"
load() { # url requests
  "$bin/loadgen" bench --url "$1" --body-file "$work/request.json" -H 'content-type: application/json' \
    --connections 4 --threads 1 --requests "$2" --json --no-progress > "$work/load.json"
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); e = sum(r["errors"].values()); sys.exit("%d errors in %d requests" % (e, r["requests"]) if e else 0)' "$work/load.json"
}
simulate=""
[ "${CACHE_SIM:-0}" = 1 ] && simulate="--cache-sim=yes --branch-sim=yes"
names=()
for spec in "$@"; do
  name=${spec%%=*}; gateway=${spec#*=}; names+=("$name")
  gp=$(port)
  # shellcheck disable=SC2086
  valgrind --tool=callgrind $simulate --callgrind-out-file="$work/$name.%p" "$gateway" --listen 127.0.0.1:$gp \
    "${subgraph_args[@]}" --worker-threads 1 $flags >/dev/null 2>&1 & g=$!; pids+=($g)
  wait_up "http://127.0.0.1:$gp/health" 600 # valgrind starts it slowly
  load "http://127.0.0.1:$gp/graphql" $warm
  callgrind_control -z $g >/dev/null; sleep 1
  load "http://127.0.0.1:$gp/graphql" "$n"; sleep 1
  callgrind_control -d $g >/dev/null; sleep 1
  kill $g; wait $g 2>/dev/null || true
  mv "$(ls "$work/$name".*.1)" "$work/$name.out"
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work/$name.out" "$KEEP/$name.callgrind"; fi
done
python3 - "$n" "$work" "${names[@]}" <<'PY'
import collections, re, sys

n, work, names = int(sys.argv[1]), sys.argv[2], sys.argv[3:]

def read(path):
    """Own instructions per function, and per (caller, callee) the instructions spent
    inside the callee's calls from that caller."""
    names, own, calls = {}, collections.Counter(), collections.Counter()
    fn = cfn = None
    lines = open(path).read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line)
        if m:
            kind, key, name = m.groups()
            if name:
                names[key] = name
            if kind == "fn":
                fn = names.get(key, key)
            else:
                cfn = names.get(key, key)
        elif line.startswith("calls="):
            calls[(fn, cfn)] += int(lines[i + 1].split()[1])
            i += 1
        elif line and (line[0].isdigit() or line[0] in "+-*"):
            parts = line.split()
            if len(parts) >= 2:
                own[fn] += int(parts[1])
        i += 1
    return own, calls

data = {}
print()
print("| gateway | instructions per request | executing the plan | writing the response | rest of the pipeline | everything else |")
print("|---|---:|---:|---:|---:|---:|")
for name in names:
    own, calls = read(f"{work}/{name}.out")
    total = sum(own.values())
    handle = sum(v for (caller, c), v in calls.items()
                 if c == "gateway::pipeline::handle::{{closure}}" and caller != c)
    # What the request pipeline calls: the plan's execution is the future it polls
    # (`Executor::run`'s, or in older builds the pinned future's `poll` the compiler
    # left between); the response, `produce` (or `response::write` in builds before it).
    under_handle = {c: v for (caller, c), v in calls.items() if caller == "gateway::pipeline::handle::{{closure}}"}
    execute = sum(v for c, v in under_handle.items()
                  if c.startswith("<core::pin::Pin<P> as core::future::future::Future>::poll")
                  or c == "gateway::execute::Executor::run::{{closure}}")
    write = sum(v for c, v in under_handle.items() if c in ("gateway::pipeline::produce", "gateway::response::write"))
    data[name] = own
    print(f"| {name} | {total / n:,.0f} | {execute / n:,.0f} | {write / n:,.0f} | {(handle - execute - write) / n:,.0f} | {(total - handle) / n:,.0f} |")
sims = {}
for name in names:
    events = summary = None
    for line in open(f"{work}/{name}.out"):
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            summary = [int(v) for v in line.split()[1:]]
    if events and summary and "I1mr" in events:
        sims[name] = dict(zip(events, summary))
if sims:
    print()
    print("Simulated per request (valgrind's default caches, not this machine's):")
    print()
    print("| gateway | L1 instruction misses | L1 data read misses | L1 data write misses | mispredicted conditional branches | mispredicted indirect branches |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, e in sims.items():
        cells = " | ".join(f"{e.get(k, 0) / n:,.0f}" for k in ("I1mr", "D1mr", "D1mw", "Bcm", "Bim"))
        print(f"| {name} | {cells} |")
if len(names) >= 2:
    a, b = names[0], names[1]
    print()
    print(f"Functions whose own instructions per request differ most, {a} against {b}:")
    keys = set(data[a]) | set(data[b])
    for k in sorted(keys, key=lambda k: -abs(data[a].get(k, 0) - data[b].get(k, 0)))[:20]:
        print(f"  {data[a].get(k, 0) / n:7.0f} {data[b].get(k, 0) / n:7.0f} {(data[a].get(k, 0) - data[b].get(k, 0)) / n:+7.0f}  {k[:110]}")
PY
