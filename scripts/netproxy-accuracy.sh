#!/usr/bin/env bash
# How close is the RTT `loadgen netproxy` adds to its setting, and what does a forwarded
# chunk cost it? `loadgen netproxy-accuracy` (release build) pings an echo server over
# 8 concurrent connections, directly and through a proxy process, halves interleaved, at
# 0.5, 1 and 5 ms, in ROUNDS rounds whose order rotates; the added RTT is the proxied
# median minus the direct one (method: loadgen/src/netproxy/accuracy.rs).
#   scripts/netproxy-accuracy.sh [ROUNDS] [PINGS]     # default 5 rounds of 250 pings
# Output is kept in results/<stamp>-netproxy-accuracy/: summary.txt (the header: commit,
# machine, date, command, the load before and after; each measurement; the table) and
# measurements.json (every round's figures, written by --out).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}; pings=${2:-250}
cargo build --release --locked -p loadgen
. scripts/lib/record.sh
record_output netproxy-accuracy
bin=target/release/loadgen
echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
machine_lines
echo "kernel: $(uname -srm)"
echo "rustc $(rustc -V)"
echo "load before $(cut -d' ' -f1-3 /proc/loadavg)"
cmd=("$bin" netproxy-accuracy --rtt 500us --rtt 1ms --rtt 5ms --connections 8
     --pings "$pings" --pause 1ms --rounds "$rounds" --out "$out/measurements.json")
echo "command ${cmd[*]}"
"${cmd[@]}"
echo "load after $(cut -d' ' -f1-3 /proc/loadavg)"
