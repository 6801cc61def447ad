#!/usr/bin/env bash
# Runs the GraphQL-over-HTTP spec audit of the `graphql-http` npm package (its
# `serverAudits`: 61 audits, each MUST, SHOULD or MAY) against the lab's gateway over the
# lab's own two subgraphs (docs/graphql-http-audit.md).
#   scripts/graphql-http-audit.sh [-- GATEWAY_ARGS...]   (e.g. -- --ttl 10)
#   BIN=DIR scripts/graphql-http-audit.sh                (gateway, user-service and
#                                                         post-service from DIR; no build)
# user-service and post-service start on free 127.0.0.1 ports, the gateway composes them
# (`--subgraph user=… --subgraph post=…`) on another. graphql-http, at the version
# scripts/graphql-http-audit/package-lock.json pins, is installed with `npm ci` into a
# scratch folder (target/graphql-http-audit/, nothing under scripts/), and
# scripts/graphql-http-audit/audit.mjs runs its audits one by one.
# Writes results/<UTC stamp>-graphql-http-audit/: summary.txt (a header: commit, machine,
# node, package, date, command, gateway; then the counts ok / notice / warn / error, and
# each audit's id, status and name, with the reason of each one that did not pass),
# results.json (the raw results, with what the gateway answered to each failing audit)
# and gateway.log. An audit's status is graphql-http's: a failing MUST is an error, a
# failing SHOULD a warning, a failing MAY a notice.
# Exit status: 0 when the audit ran (whatever its counts), non-zero when it could not.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
# shellcheck source=scripts/lib/record.sh
source scripts/lib/record.sh # port, record_output
die() { echo "graphql-http-audit.sh: $*" >&2; exit 1; }
command_line="scripts/graphql-http-audit.sh${*:+ $*}"
gateway_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; gateway_args=("$@"); break ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (gateway arguments go after --; see --help)" ;;
  esac
done
need_node 18 "the audit uses fetch"

# --- the binaries ---------------------------------------------------------------------
if [ -n "${BIN:-}" ]; then
  bin=$(cd "$BIN" && pwd) || die "BIN=$BIN is not a folder"
  built="binaries from $bin, not built from this tree"
else
  cargo build --release --locked -p gateway -p user-service -p post-service ||
    die "cargo build --release -p gateway -p user-service -p post-service failed"
  bin=$repo/target/release
  built="built from this tree (cargo build --release)"
fi
for b in gateway user-service post-service; do
  [ -x "$bin/$b" ] || die "$bin/$b is missing"
done

# --- the audit's package --------------------------------------------------------------
modules=$repo/target/graphql-http-audit
mkdir -p "$modules"
cp scripts/graphql-http-audit/package.json scripts/graphql-http-audit/package-lock.json "$modules/"
(cd "$modules" && npm ci --no-audit --no-fund --loglevel=error) ||
  die "npm ci could not install graphql-http in $modules (see above)"
package_version=$(node -p 'require(process.argv[1]).version' "$modules/node_modules/graphql-http/package.json")

# --- the services ---------------------------------------------------------------------
work=$(mktemp -d)
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap 'stop_all; rm -rf "$work"' EXIT
wait_up() { for _ in $(seq 300); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; die "no answer from $1 (log: $2)"; }
up=$(port); pp=$(port); gp=$(port)
"$bin/user-service" --listen "127.0.0.1:$up" >"$work/user.log" 2>&1 & pids+=($!)
"$bin/post-service" --listen "127.0.0.1:$pp" >"$work/post.log" 2>&1 & pids+=($!)
wait_up "http://127.0.0.1:$up/health" "$work/user.log"
wait_up "http://127.0.0.1:$pp/health" "$work/post.log"
"$bin/gateway" --listen "127.0.0.1:$gp" --subgraph "user=http://127.0.0.1:$up/graphql" \
  --subgraph "post=http://127.0.0.1:$pp/graphql" "${gateway_args[@]}" >"$work/gateway.log" 2>&1 & pids+=($!)
wait_up "http://127.0.0.1:$gp/health" "$work/gateway.log"

# --- the run --------------------------------------------------------------------------
record_output graphql-http-audit # prints the commit; everything below is also kept in $out/summary.txt
machine_lines
echo "kernel: $(uname -sr)"
echo "node: $(node --version)"
echo "package: graphql-http@$package_version (scripts/graphql-http-audit/package-lock.json)"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "command: $command_line"
echo "gateway: $built; $bin/gateway --subgraph user=… --subgraph post=…${gateway_args[*]:+ ${gateway_args[*]}}"
echo "url: http://127.0.0.1:$gp/graphql"
echo
node scripts/graphql-http-audit/audit.mjs "$modules" "http://127.0.0.1:$gp/graphql" "$out/results.json" ||
  die "the audit could not run to the end (see above)"
stop_all
cp "$work/gateway.log" "$out/gateway.log"
