#!/usr/bin/env bash
# Runs graphql-hive/federation-gateway-audit (46 suites, 199 cases) against the lab's
# gateway and classifies every failing case (docs/federation-audit.md).
#   scripts/federation-audit.sh AUDIT_DIR [--mode supergraph|compose] [--gateway FILE]
#                               [--no-build] [--suite ID ...] [--keep-work] [-- GATEWAY_ARGS...]
# AUDIT_DIR: a checkout of the audit (docs/federation-audit.md names the commit), fetched by
# whoever runs this; it is not a registry package, so this is no CI step.
#   --mode supergraph  the gateway reads each suite's composed supergraph (--supergraph FILE,
#                      downloaded from the audit's /{suite}/supergraph); the default when
#                      `gateway --help` lists --supergraph
#   --mode compose     the gateway composes the suite's subgraphs itself: one --subgraph
#                      NAME=URL per value of the supergraph's join__Graph enum; the default
#                      otherwise
#   --gateway FILE     run this gateway binary (default: build target/release/gateway)
#   --no-build         use target/release/gateway as it is
#   --suite ID         only these suites (repeat), replayed and classified without the
#                      audit's runner: a quick loop, written under target/federation-audit/
#   --keep-work        keep the scratch folder (each suite's supergraph file), and say where
#   -- ARGS            more gateway arguments for every suite, e.g. -- --ttl 30
# What it does: installs the audit's npm dependencies in AUDIT_DIR when they are missing
# (without dev dependencies, whose `wgc` is not on the registry, plus tsx and graphql);
# preloads scripts/federation-audit/node-preload.mjs into every node process (a
# Promise.withResolvers polyfill for Node 20, and loopback-only listening); runs the audit's
# `test` command with scripts/federation-audit/run-gateway.sh as the gateway's run script;
# then replays every suite (classify.mjs) to tell the failures apart, and summarizes.
# Writes results/<UTC stamp>-federation-audit/: results.txt (the audit's), logs/ (the audit's
# per-suite gateway and test logs; logs/replay/ the replay's gateway logs), runner.log,
# cases.json (each case's outcome), manifest.json, summary.md and summary.json.
# Everything listens on 127.0.0.1, on free ports. Exit status: 0 when the run completed
# (whatever the audit's count), non-zero with a message when it could not run.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
# shellcheck source=scripts/lib/record.sh
source scripts/lib/record.sh # port
tools=$repo/scripts/federation-audit
expected_audit_commit=f59c05e

die() { echo "federation-audit.sh: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit "${1:-2}"; }

audit_dir="" mode="" gateway="" build=true keep_work=false
suites=() gateway_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --mode) [ $# -ge 2 ] || die "--mode needs supergraph or compose"; mode=$2; shift 2 ;;
    --gateway) [ $# -ge 2 ] || die "--gateway needs a FILE"; gateway=$2; shift 2 ;;
    --no-build) build=false; shift ;;
    --suite) [ $# -ge 2 ] || die "--suite needs an ID"; suites+=("$2"); shift 2 ;;
    --keep-work) keep_work=true; shift ;;
    -h | --help) usage 0 ;;
    --) shift; gateway_args=("$@"); break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$audit_dir" ] || die "one AUDIT_DIR only (got $audit_dir and $1)"; audit_dir=$1; shift ;;
  esac
done
[ -n "$audit_dir" ] || { echo "federation-audit.sh: AUDIT_DIR is required" >&2; usage; }
case $mode in "" | supergraph | compose) ;; *) die "--mode must be supergraph or compose, got '$mode'" ;; esac

# --- what the run needs ---------------------------------------------------------------
need_node 20 "the audit needs it"
command -v git >/dev/null || die "git is missing"
[ -d "$audit_dir" ] || die "AUDIT_DIR $audit_dir is not a folder (clone graphql-hive/federation-gateway-audit from GitHub: docs/federation-audit.md)"
audit_dir=$(cd "$audit_dir" && pwd)
if ! [ -f "$audit_dir/package.json" ] || ! [ -f "$audit_dir/src/cli.ts" ] ||
  [ "$(node -p 'require(process.argv[1]).name' "$audit_dir/package.json")" != "@graphql-hive/federation-gateway-audit" ]; then
  die "$audit_dir is not a checkout of graphql-hive/federation-gateway-audit (no package.json named @graphql-hive/federation-gateway-audit with src/cli.ts)"
fi
[ "$(git -C "$audit_dir" rev-parse --show-toplevel 2>/dev/null)" = "$audit_dir" ] ||
  die "$audit_dir is not a git checkout of its own: the run must name the audit's commit (git clone the audit, then git checkout $expected_audit_commit)"
audit_commit=$(git -C "$audit_dir" rev-parse HEAD)
audit_dirty=false
[ -z "$(git -C "$audit_dir" status --porcelain --untracked-files=no)" ] || audit_dirty=true
case $audit_commit in
  "$expected_audit_commit"*) ;;
  *) echo "federation-audit.sh: note: the audit is at ${audit_commit:0:7}, not $expected_audit_commit (the commit docs/federation-audit.md quotes): redo the figures" >&2 ;;
esac
case $tools in *[[:space:]]*) die "the repository's path has a space ($tools): NODE_OPTIONS cannot carry it" ;; esac

# --- the audit's dependencies ---------------------------------------------------------
if [ ! -x "$audit_dir/node_modules/.bin/tsx" ] || [ ! -f "$audit_dir/node_modules/graphql/package.json" ] ||
  [ ! -f "$audit_dir/node_modules/@apollo/composition/package.json" ]; then
  echo "federation-audit.sh: installing the audit's dependencies in $audit_dir (npm, without dev dependencies)"
  tsx_spec=$(node -p 'require(process.argv[1]).devDependencies.tsx' "$audit_dir/package.json")
  # an explicit graphql must be spelt as the audit's override of it, or npm refuses
  graphql_spec=$(node -p 'const p = require(process.argv[1]); (p.overrides && p.overrides.graphql) || p.devDependencies.graphql' "$audit_dir/package.json")
  (
    cd "$audit_dir"
    if [ -f package-lock.json ]; then npm ci --omit=dev --no-audit --no-fund; else npm install --omit=dev --no-audit --no-fund; fi
    # tsx and graphql are dev dependencies of the audit: --save-prod keeps them from being
    # omitted, --no-save leaves package.json and the lock as they are
    npm install --no-save --save-prod --omit=dev --no-audit --no-fund "tsx@$tsx_spec" "graphql@$graphql_spec"
  ) || die "npm could not install the audit's dependencies in $audit_dir (see above)"
fi

# --- the gateway ----------------------------------------------------------------------
if [ -n "$gateway" ]; then
  [ -x "$gateway" ] || die "--gateway $gateway is not an executable file"
  gateway=$(cd "$(dirname "$gateway")" && pwd)/$(basename "$gateway")
else
  if $build; then
    command -v cargo >/dev/null || die "cargo is missing (install Rust with rustup), or pass --gateway FILE"
    cargo build --release --locked -p gateway || die "cargo build --release -p gateway failed"
  fi
  gateway=$repo/target/release/gateway
  [ -x "$gateway" ] || die "$gateway is missing: build it (cargo build --release -p gateway) or drop --no-build"
fi
help=$("$gateway" --help) || die "$gateway --help failed"
has_supergraph=false
grep -q -- '--supergraph' <<<"$help" && has_supergraph=true
if [ -z "$mode" ]; then
  if $has_supergraph; then mode=supergraph; else mode=compose; fi
elif [ "$mode" = supergraph ] && ! $has_supergraph; then
  die "--mode supergraph: $gateway --help lists no --supergraph flag (use --mode compose, today's path)"
fi

# --- the run --------------------------------------------------------------------------
stamp=$(date -u +%Y%m%d-%H%M%S)
if [ ${#suites[@]} -gt 0 ]; then
  run_id=$stamp-federation-audit-partial
  out=$repo/target/federation-audit/$run_id
else
  run_id=$stamp-federation-audit
  out=$repo/results/$run_id
fi
[ ! -e "$out" ] || die "$out exists already"
mkdir -p "$out/logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/federation-audit.XXXXXX")
mkdir -p "$work/audit" "$work/replay"

pids=()
cleanup() {
  local status=$? p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  # a gateway whose run script could not stop it (the runner killed, say)
  for f in "$work"/audit/*.pid "$work"/replay/*.pid; do
    if [ -f "$f" ]; then kill "$(cat "$f")" 2>/dev/null || true; fi
  done
  if $keep_work; then echo "federation-audit.sh: scratch folder kept: $work" >&2; else rm -rf "$work"; fi
  if [ "$status" -ne 0 ] && [ ! -f "$out/summary.md" ]; then
    echo "federation-audit.sh: the run did not complete; what it wrote is in $out (no summary.md): not a result to keep" >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

gateway_port=$(port)
export NODE_OPTIONS="--import=$tools/node-preload.mjs${NODE_OPTIONS:+ $NODE_OPTIONS}"
export NO_COLOR=1
export FEDERATION_AUDIT_GATEWAY=$gateway
export FEDERATION_AUDIT_MODE=$mode
export FEDERATION_AUDIT_LISTEN=127.0.0.1:$gateway_port
FEDERATION_AUDIT_GATEWAY_ARGS=$(printf '%s\n' "${gateway_args[@]}")
export FEDERATION_AUDIT_GATEWAY_ARGS
graphql_url=http://127.0.0.1:$gateway_port/graphql
health_url=http://127.0.0.1:$gateway_port/health
tsx=$audit_dir/node_modules/.bin/tsx
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
t0=$SECONDS

echo "federation-audit: $run_id, mode $mode, gateway $gateway${gateway_args[*]:+ ${gateway_args[*]}}"
echo "federation-audit: audit ${audit_commit:0:7} in $audit_dir; gateway on 127.0.0.1:$gateway_port"

if [ ${#suites[@]} -eq 0 ]; then
  # The audit's own runner: every suite in turn, each with a fresh gateway from the run
  # script; it writes results.txt and logs/ under --cwd. The gateway's port is a free one:
  # the runner kills whatever listens on it before each suite.
  audit_port=$(port)
  export FEDERATION_AUDIT_SERVER=http://127.0.0.1:$audit_port FEDERATION_AUDIT_WORK=$work/audit
  echo "federation-audit: the audit's runner (server on 127.0.0.1:$audit_port); its output is in runner.log"
  (cd "$audit_dir" && exec "$tsx" src/cli.ts test --cwd "$out" --run-script "$tools/run-gateway.sh" \
    --graphql "$graphql_url" --healthcheck "$health_url" --port "$audit_port" --reporter dot \
    --write results.txt) >"$out/runner.log" 2>&1 &
  pids+=($!)
  runner_status=0
  wait "${pids[-1]}" || runner_status=$?
  unset 'pids[-1]'
  [ -f "$out/results.txt" ] || die "the audit's runner ended (status $runner_status) without results.txt; the end of runner.log:
$(tail -n 20 "$out/runner.log")"
  sed -n '/^---$/,$p' "$out/results.txt"
  echo
fi

# The replay: a fresh audit server (fresh subgraph state), the same run script per suite.
replay_port=$(port)
export FEDERATION_AUDIT_SERVER=http://127.0.0.1:$replay_port FEDERATION_AUDIT_WORK=$work/replay
(cd "$audit_dir" && exec "$tsx" src/cli.ts serve --port "$replay_port") >"$out/logs/replay-server.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do # /ids answers once every suite's routes are registered
  curl -sf "http://127.0.0.1:$replay_port/ids" >/dev/null && break
  kill -0 "${pids[-1]}" 2>/dev/null || die "the audit's server did not start: $(tail -n 5 "$out/logs/replay-server.log")"
  sleep 0.1
done
curl -sf "http://127.0.0.1:$replay_port/ids" >/dev/null || die "the audit's server did not answer /ids within 30 s"
echo "federation-audit: replaying each suite to classify the failures (server on 127.0.0.1:$replay_port)"
suite_args=()
for s in "${suites[@]}"; do suite_args+=(--suite "$s"); done
node "$tools/classify.mjs" --server "$FEDERATION_AUDIT_SERVER" --graphql "$graphql_url" \
  --health "$health_url" --run-script "$tools/run-gateway.sh" --work "$work/replay" \
  --logs "$out/logs/replay" --out "$out/cases.json" "${suite_args[@]}" >"$out/replay.log" 2>&1 ||
  die "the replay failed: $(tail -n 20 "$out/replay.log")"
kill "${pids[-1]}" 2>/dev/null || true
wait "${pids[-1]}" 2>/dev/null || true
unset 'pids[-1]'

# --- the record -----------------------------------------------------------------------
lab_dirty=false
[ -z "$(git status --porcelain -- . ':!results' ':!target')" ] || lab_dirty=true
npm_version() { node -p 'require(process.argv[1]).version' "$audit_dir/node_modules/$1/package.json" 2>/dev/null || echo unknown; }
command_line=("scripts/federation-audit.sh" "$audit_dir")
[ "$gateway" = "$repo/target/release/gateway" ] || command_line+=(--gateway "$gateway")
[ ${#suites[@]} -eq 0 ] || for s in "${suites[@]}"; do command_line+=(--suite "$s"); done
command_line+=(--mode "$mode")
[ ${#gateway_args[@]} -eq 0 ] || command_line+=(-- "${gateway_args[@]}")
RUN_ID=$run_id STARTED=$started SECONDS_TAKEN=$((SECONDS - t0)) MODE=$mode \
  LAB_COMMIT=$(git rev-parse HEAD) LAB_DIRTY=$lab_dirty AUDIT_COMMIT=$audit_commit \
  AUDIT_DIRTY=$audit_dirty AUDIT_DIR=$audit_dir GATEWAY=$gateway \
  GATEWAY_SHA256=$(sha256sum "$gateway" | cut -d' ' -f1) \
  RUSTC=$(rustc --version 2>/dev/null || echo unknown) NPM=$(npm --version) \
  TSX=$(npm_version tsx) GRAPHQL=$(npm_version graphql) \
  COMPOSITION=$(npm_version @apollo/composition) \
  CPU_MODEL=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1) CORES=$(nproc) \
  KERNEL=$(uname -r) HOST_OS=$(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release 2>/dev/null) \
  MEM_KB=$(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo) \
  REPLAY_ONLY=$([ ${#suites[@]} -gt 0 ] && echo true || echo false) \
  node - "${command_line[@]}" -- "${gateway_args[@]}" >"$out/manifest.json" <<'EOF'
const e = process.env;
const argv = process.argv.slice(2);
const split = argv.lastIndexOf("--");
console.log(JSON.stringify({
  schema: "federation-audit.manifest/1",
  run_id: e.RUN_ID,
  timestamp: e.STARTED,
  duration_s: Number(e.SECONDS_TAKEN),
  command: argv.slice(0, split),
  mode: e.MODE,
  replay_only: e.REPLAY_ONLY === "true",
  gateway_args: argv.slice(split + 1),
  lab: { commit: e.LAB_COMMIT, dirty: e.LAB_DIRTY === "true", rustc: e.RUSTC },
  gateway: { path: e.GATEWAY, sha256: e.GATEWAY_SHA256 },
  audit: {
    repository: "graphql-hive/federation-gateway-audit",
    commit: e.AUDIT_COMMIT,
    dirty: e.AUDIT_DIRTY === "true",
    dir: e.AUDIT_DIR,
    tsx: e.TSX,
    graphql: e.GRAPHQL,
    "@apollo/composition": e.COMPOSITION,
  },
  node: { version: process.version, npm: e.NPM },
  machine: {
    cpu_model: e.CPU_MODEL,
    cores: Number(e.CORES),
    memory_kib: Number(e.MEM_KB),
    kernel: e.KERNEL,
    os: e.HOST_OS,
  },
}, null, 2));
EOF
replay_only=()
[ ${#suites[@]} -eq 0 ] || replay_only=(--replay-only)
node "$tools/summary.mjs" --run-dir "$out" "${replay_only[@]}"
echo "federation-audit: $out/summary.md"
