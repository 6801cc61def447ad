#!/bin/sh
# The federation audit's run script for the lab's gateway. The audit's runner starts it as
# `sh /abs/path/run-gateway.sh SUITE` once per suite, from this folder, and kills it when
# the suite's tests are done; scripts/federation-audit/classify.mjs starts it the same way.
# scripts/federation-audit.sh sets everything else through the environment:
#   FEDERATION_AUDIT_GATEWAY       the gateway binary
#   FEDERATION_AUDIT_MODE          supergraph (--supergraph FILE) or compose (--subgraph NAME=URL ...)
#   FEDERATION_AUDIT_SERVER        the audit's server, http://127.0.0.1:PORT
#   FEDERATION_AUDIT_LISTEN        where the gateway listens, 127.0.0.1:PORT
#   FEDERATION_AUDIT_WORK          a folder for the suite's supergraph, its exit record and pid
#   FEDERATION_AUDIT_GATEWAY_ARGS  more gateway arguments, one per line (may be empty)
# Output: the runner pipes stdout and stderr into one log and ends it with the first of the
# two to close, so a write to the other after that kills the runner. Everything goes to
# stdout; stderr is kept open on fd 3, unused, and closed last, after stdout has drained.
# Writes $FEDERATION_AUDIT_WORK/SUITE.exit: "stopped STATUS" when the runner stopped the
# gateway, "exited STATUS" when it ended by itself (refused the suite, or crashed).
set -u
suite=${1:?usage: run-gateway.sh SUITE}
for var in FEDERATION_AUDIT_GATEWAY FEDERATION_AUDIT_MODE FEDERATION_AUDIT_SERVER \
  FEDERATION_AUDIT_LISTEN FEDERATION_AUDIT_WORK; do
  eval "value=\${$var:-}"
  # shellcheck disable=SC2154 # value is set by the eval above
  [ -n "$value" ] || { echo "run-gateway.sh: $var is not set (start the audit with scripts/federation-audit.sh)" >&2; exit 2; }
done
exec 3>&2 2>&1

here=$(cd "$(dirname "$0")" && pwd)
work=$FEDERATION_AUDIT_WORK
record() { printf '%s\n' "$1" >"$work/$suite.exit"; }
finish() { # finish STATUS: end stdout first, then (on exit) the kept stderr
  exec 1>&- 2>&-
  sleep 0.5
  exit "$1"
}

if ! args=$(node "$here/gateway-args.mjs" --server "$FEDERATION_AUDIT_SERVER" --suite "$suite" \
  --mode "$FEDERATION_AUDIT_MODE" --out "$work/$suite.supergraph.graphql"); then
  echo "run-gateway.sh: no gateway arguments for suite $suite"
  record "exited no-arguments"
  finish 1
fi
set --
while IFS= read -r arg; do
  [ -n "$arg" ] && set -- "$@" "$arg"
done <<ARGS
$args
${FEDERATION_AUDIT_GATEWAY_ARGS:-}
ARGS

echo "run-gateway.sh: $FEDERATION_AUDIT_GATEWAY --listen $FEDERATION_AUDIT_LISTEN --drain-timeout 1s $*"
"$FEDERATION_AUDIT_GATEWAY" --listen "$FEDERATION_AUDIT_LISTEN" --drain-timeout 1s "$@" 3>&- &
pid=$!
echo "$pid" >"$work/$suite.pid"
stopped=exited
trap 'stopped=stopped; kill -TERM "$pid" 2>/dev/null' TERM INT
while :; do
  wait "$pid"
  status=$?
  kill -0 "$pid" 2>/dev/null || break
done
echo "run-gateway.sh: gateway $stopped with status $status"
record "$stopped $status"
rm -f "$work/$suite.pid"
finish "$status"
