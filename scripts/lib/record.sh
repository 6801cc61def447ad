# Sourced by the lab's measuring scripts: what they share about recording a run, saying
# which machine it ran on, finding ports and waiting for servers.

# record_output NAME: from here on, everything the script prints is also kept in
# results/<UTC stamp>-NAME/summary.txt, headed by the commit ("(dirty)" when the tree
# outside results/ has changes).
record_output() {
  out=results/$(date -u +%Y%m%d-%H%M%S)-$1
  mkdir -p "$out"
  exec > >(tee "$out/summary.txt") 2>&1
  local changes
  changes=$(git status --porcelain -- . ':!results')
  echo "commit $(git rev-parse HEAD)${changes:+ (dirty)}"
}

# machine_lines: the machine, as two lines for a run's summary: the processor and its cores,
# and how an idle vCPU waits (the cpuidle driver and, with haltpoll, how long it polls before
# halting). With guest_halt_poll_ns=0 (this lab's virtual machines) it halts at once, and the
# process that wakes another on it pays for the hypervisor's round trip: several
# microseconds a write to an idle receiver (scripts/profile-deep.sh measures it).
machine_lines() {
  local poll
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) cores)"
  poll=$(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || true)
  echo "idle: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo unknown) driver${poll:+, guest_halt_poll_ns=$poll}"
}

# stop_pid PID: stop a process this script started, and reap it.
stop_pid() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# ticks PID: the CPU the process has used so far (utime + stime of /proc/PID/stat), in
# clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# post_load URL BODY-FILE DURATION [JSON-OUT [LOADGEN-ARG...]]: the load under which the deep
# scripts measure S_deep and the gateways: `loadgen bench` posting BODY-FILE as JSON to URL
# from one thread over $connections connections (100 unless the script set it), for
# DURATION; its JSON report to JSON-OUT (or nowhere); further arguments go to loadgen
# (e.g. --rate N). With LOAD=wrk, wrk -t1 does the same (wrk_load), for figures quoted
# "with wrk"; it takes no further arguments.
post_load() {
  local url=$1 body=$2 duration=$3 json=${4:-/dev/null}
  shift $(($# < 4 ? $# : 4))
  if [ "${LOAD:-loadgen}" = wrk ]; then
    [ $# -eq 0 ] || { echo "post_load: LOAD=wrk takes no loadgen arguments ($*): closed loop only" >&2; return 2; }
    wrk_load "$url" "$body" "$duration" > "$json"
    return
  fi
  "$bin/loadgen" bench --url "$url" --body-file "$body" -H 'content-type: application/json' \
    --connections "${connections:-100}" --threads 1 --duration "$duration" --json --no-progress "$@" > "$json"
}

# wrk_load URL BODY-FILE DURATION: wrk -t1 over $connections connections posting BODY-FILE as
# JSON; prints the part of loadgen's JSON report the scripts read (requests, requests_per_sec,
# errors, latency_ms p50/p99). wrk neither checks answers nor reports its own CPU:
# loadgen_cpu is 0, so a script's client column reads 0 under wrk.
wrk_load() {
  command -v wrk >/dev/null || { echo "LOAD=wrk: wrk is missing (apt-get install -y wrk)" >&2; return 1; }
  local lua; lua=$(mktemp --suffix=.lua)
  cat > "$lua" <<'LUA'
local f = assert(io.open(os.getenv("WRK_BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
function done(summary, latency, requests)
  local e = summary.errors
  local seconds = summary.duration / 1e6
  io.write(string.format(
    'WRK-JSON {"requests": %d, "requests_per_sec": %.1f, "errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, "latency_ms": {"p50": %.3f, "p99": %.3f}, "loadgen_cpu": {"process_cores": 0}}\n',
    summary.requests, summary.requests / seconds, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
LUA
  WRK_BODY_FILE=$body wrk -t1 -c"${connections:-100}" -d"$3" -s "$lua" "$1" | sed -n 's/^WRK-JSON //p'
  rm -f "$lua"
}

# port: a free TCP port on 127.0.0.1.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_up URL [TRIES]: wait until URL answers 2xx (every 0.1 s, TRIES times, default 300);
# else say so and fail.
wait_up() {
  for _ in $(seq "${2:-300}"); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "no answer from $1" >&2; return 1
}

# need_node MIN WHY: stop, naming what is missing, unless node (MIN or later), npm, curl and
# python3 (for port) are here. WHY says what needs that node version. Uses the caller's die.
need_node() {
  command -v node >/dev/null || die "node is missing (Node $1 or later; Debian: apt-get install nodejs npm)"
  command -v npm >/dev/null || die "npm is missing (it comes with node; Debian: apt-get install npm)"
  command -v curl >/dev/null || die "curl is missing (apt-get install curl)"
  command -v python3 >/dev/null || die "python3 is missing (it finds free ports; apt-get install python3)"
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge "$1" ] || die "node $(node --version) is too old: $2 (Node $1 or later)"
}

# start_seed_graph BIN WORK: the seed query as a request body in WORK/request.json, and
# the lab's own two subgraphs (user-service, post-service) started from BIN on free ports
# (their PIDs appended to the caller's pids). Sets seed_args: how a gateway reaches them.
start_seed_graph() {
  local up pp
  echo '{"query":"query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }"}' > "$2/request.json"
  up=$(port); pp=$(port)
  "$1/user-service" --listen 127.0.0.1:$up >/dev/null 2>&1 & pids+=($!)
  "$1/post-service" --listen 127.0.0.1:$pp >/dev/null 2>&1 & pids+=($!)
  wait_up "http://127.0.0.1:$up/health"; wait_up "http://127.0.0.1:$pp/health"
  seed_args=(--subgraph user=http://127.0.0.1:$up/graphql --subgraph post=http://127.0.0.1:$pp/graphql)
}

# start_deep_graph BIN WORK: the deep query of experiments/deep.toml (DeepWishlistChain) as
# a request body in WORK/request.json, and the commerce graph's four subgraphs started from
# BIN on free ports (their PIDs appended to the caller's pids). Sets deep_args: how a
# gateway reaches them (the committed supergraph, each subgraph's URL overridden).
start_deep_graph() {
  local s sp
  python3 -c 'import json, sys; sys.stdout.write(json.dumps({"query": open(sys.argv[1]).read(), "operationName": "DeepWishlistChain"}))' \
    commerce-graph/queries/deep.graphql > "$2/request.json"
  deep_args=(--supergraph commerce-graph/supergraph/supergraph.graphql)
  for s in products inventory reviews accounts; do
    sp=$(port)
    "$1/commerce-service" --subgraph "$s" --listen 127.0.0.1:$sp >/dev/null 2>&1 & pids+=($!)
    wait_up "http://127.0.0.1:$sp/health"
    deep_args+=(--subgraph-url "$s=http://127.0.0.1:$sp/graphql")
  done
}

# start_public_graph CHECKOUT WORK: the graph of the public gateways benchmark, where issue
# 23 took its figures (a checkout of graphql-hive/graphql-gateways-benchmark, whose
# subgraphs must be built: see build_public_graph). Its query (TestQuery, read from the
# checkout's k6.js) as a request body in WORK/request.json, and its one subgraphs process
# (all four, at /accounts, /inventory, /products and /reviews) started on a free port (its
# PID appended to the caller's pids). Sets deep_args, as start_deep_graph does, from the
# checkout's supergraph.
start_public_graph() {
  local s sp
  python3 - "$1/k6.js" > "$2/request.json" <<'PY2'
import json, re, sys
found = re.search(r"query:\s*`(.*?)`", open(sys.argv[1]).read(), re.S)
if not found:
    sys.exit(f"{sys.argv[1]}: no query: `...` in it (is this a checkout of graphql-gateways-benchmark?)")
sys.stdout.write(json.dumps({"query": found.group(1), "operationName": "TestQuery"}))
PY2
  sp=$(port)
  HOST=127.0.0.1 PORT=$sp "$1/target/release/subgraphs" >/dev/null 2>&1 & pids+=($!)
  wait_up "http://127.0.0.1:$sp/health"
  deep_args=(--supergraph "$1/gateways/hive-router/supergraph.graphql")
  for s in accounts inventory products reviews; do deep_args+=(--subgraph-url "$s=http://127.0.0.1:$sp/$s"); done
}

# build_public_graph CHECKOUT: build the public benchmark's subgraphs in the checkout, with
# its own Cargo.lock (crates from crates.io; a few minutes the first time). Stops, naming
# the path, when CHECKOUT is not such a checkout.
build_public_graph() {
  [ -f "$1/k6.js" ] && [ -f "$1/subgraphs/main.rs" ] && [ -f "$1/gateways/hive-router/supergraph.graphql" ] || {
    echo "$1 is not a checkout of graphql-hive/graphql-gateways-benchmark (no k6.js, subgraphs/main.rs or gateways/hive-router/supergraph.graphql)" >&2
    return 2
  }
  cargo build --release --locked --quiet --manifest-path "$1/Cargo.toml" -p subgraphs --target-dir "$1/target"
}

# record_deep_exchanges BIN REQUEST DIR ANSWER ARG...: the subgraph exchanges of one
# no-cache deep query, kept in DIR by scripts/lib/exchange_recorder.py, a proxy between a
# gateway from BIN and the subgraphs that ARG... (a gateway's arguments: the supergraph
# and a --subgraph-url NAME=URL per subgraph) name. The query's body is the file REQUEST,
# its answer is written to ANSWER; the proxy and that gateway are stopped again.
record_deep_exchanges() {
  local bin=$1 request=$2 dir=$3 answer=$4 rp gp recorder g
  shift 4
  rp=$(port)
  through "http://127.0.0.1:$rp" "$@"
  python3 scripts/lib/exchange_recorder.py "$dir" "$rp" "${through_upstreams[@]}" & recorder=$!; pids+=($recorder)
  wait_up "http://127.0.0.1:$rp/"
  gp=$(port)
  "$bin/gateway" --listen 127.0.0.1:$gp --worker-threads 1 "${through_args[@]}" >/dev/null 2>&1 & g=$!; pids+=($g)
  wait_up "http://127.0.0.1:$gp/health"
  deep_answer $gp "$request" "$answer"
  kill $g $recorder 2>/dev/null || true; wait $g $recorder 2>/dev/null || true
}

# deep_answer PORT REQUEST OUT: the answer of the gateway on PORT to the body in REQUEST,
# written to OUT; stops, quoting it, unless it has data and no errors.
deep_answer() {
  curl -fsS -H 'content-type: application/json' --data-binary @"$2" "http://127.0.0.1:$1/graphql" -o "$3"
  python3 - "$3" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
assert a.get("data") and not a.get("errors"), f"the deep answer is not a clean one: {str(a)[:300]}"
PY
}

# through BASE ARG...: a gateway's arguments ARG... (a supergraph and a --subgraph-url
# NAME=URL per subgraph) with every subgraph reached at BASE/NAME instead, in through_args;
# the NAME=URL pairs they replace, in through_upstreams.
through() {
  local base=$1 a prev=""
  shift
  through_args=() through_upstreams=()
  for a in "$@"; do
    if [ "$prev" = --subgraph-url ]; then through_upstreams+=("$a"); a="${a%%=*}=$base/${a%%=*}"; fi
    through_args+=("$a"); prev=$a
  done
}

# replay_graph BIN DIR ARG...: one `loadgen target --replay DIR` from BIN (one thread) on a
# free port, standing in for the subgraphs that ARG... (a gateway's arguments, as for
# record_deep_exchanges) name; its PID is appended to the caller's pids and kept in
# replay_pid. Sets replay_args: ARG... with every subgraph reached at the replay.
replay_graph() {
  local rp
  rp=$(port)
  "$1/loadgen" target --listen 127.0.0.1:$rp --threads 1 --replay "$2" >/dev/null 2>&1 & replay_pid=$!; pids+=($replay_pid)
  wait_up "http://127.0.0.1:$rp/"
  shift 2
  through "http://127.0.0.1:$rp" "$@"
  replay_args=("${through_args[@]}")
}
