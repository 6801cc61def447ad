#!/usr/bin/env bash
# Two builds of one criterion bench, side by side in alternating rounds (A B, A B, ...):
# on a shared machine a bench's time moves by tens of percent from one minute to the
# next, so one run of each build compares two moments as much as two builds. Each round
# runs both binaries once; the summary gives, per benchmark, each build's median time
# over the rounds and the second build's time over the first's per round (median,
# min-max), the ratio the sessions quote.
#
# The binaries are criterion bench executables, built beforehand and copied aside, e.g.
#   git checkout OLD && cargo bench -p gateway --bench answer_parse --no-run
#   cp target/release/deps/answer_parse-<hash> /tmp/bench-old   (the path cargo printed)
#   git checkout - && cargo bench -p gateway --bench answer_parse --no-run
#   scripts/bench-abab.sh before=/tmp/bench-old after=target/release/deps/answer_parse-<hash> 6
# Usage: scripts/bench-abab.sh NAME=BINARY NAME=BINARY [ROUNDS] (default 6;
# MEASURE_SECONDS=3 of measurement per benchmark and run). The benches run from the
# repository root, so criterion's own files go to target/criterion.
# Output: results/<stamp>-bench-abab/summary.txt, and rounds.tsv beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "bench-abab: $*" >&2; exit 2; }
[ $# -ge 2 ] || die "usage: $0 NAME=BINARY NAME=BINARY [ROUNDS]"
a_name=${1%%=*}; a_bin=${1#*=}
b_name=${2%%=*}; b_bin=${2#*=}
rounds=${3:-6}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive whole number, not '$rounds'"
for bin in "$a_bin" "$b_bin"; do
  [ -x "$bin" ] || die "no executable bench binary at $bin"
done
[ "$a_name" != "$b_name" ] || die "the two builds need different names"
a_bin=$(realpath "$a_bin"); b_bin=$(realpath "$b_bin")
. scripts/lib/record.sh
record_output "${RUN_NAME:-bench-abab}"
machine_lines
echo "builds: $a_name=$a_bin ($(sha256sum "$a_bin" | cut -c1-12)), $b_name=$b_bin ($(sha256sum "$b_bin" | cut -c1-12))"
measure=${MEASURE_SECONDS:-3}
[[ "$measure" =~ ^[1-9][0-9]*$ ]] || die "MEASURE_SECONDS must be a positive whole number, not '$measure'"
echo "$rounds rounds, $measure s of measurement per benchmark and run"
tsv="$out/rounds.tsv"
printf 'round\tbuild\tbenchmark\tmicroseconds\n' > "$tsv"
# run BUILD BINARY ROUND: one criterion run, each benchmark's estimate (the middle of its
# interval) appended to rounds.tsv in microseconds.
run() {
  "$2" --bench --warm-up-time 1 --measurement-time "$measure" --noplot --discard-baseline 2>&1 |
    python3 -c '
import re, sys
build, round_ = sys.argv[1], sys.argv[2]
name = None
scale = {"ps": 1e-6, "ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
estimate = r"([\d.]+) (ps|ns|µs|us|ms|s)"
for line in sys.stdin:
    # A benchmark is named on a line of its own, or ahead of its time on the same line;
    # its time is the first "time:" after that ("change:" lines are relative, in %).
    m = re.match(r"^(\S+)\s*(time:.*)?$", line.rstrip("\n"))
    if m:
        name = m.group(1)
    t = re.search(r"time:\s+\[" + " ".join([estimate] * 3) + r"\]", line)
    if t and name:
        print(f"{round_}\t{build}\t{name}\t{float(t.group(3)) * scale[t.group(4)]:.3f}")
        name = None
' "$1" "$3" >> "$tsv"
}
for r in $(seq "$rounds"); do
  run "$a_name" "$a_bin" "$r"
  run "$b_name" "$b_bin" "$r"
done
python3 - "$tsv" "$a_name" "$b_name" <<'EOF'
import csv, statistics, sys
path, a, b = sys.argv[1:4]
rows = list(csv.DictReader(open(path), delimiter="\t"))
times = {}
for r in rows:
    times.setdefault(r["benchmark"], {}).setdefault(r["build"], {})[r["round"]] = float(r["microseconds"])
if not times:
    sys.exit("bench-abab: no benchmark times were read from the runs")
print()
print(f"| benchmark | {a}, median | {b}, median | {b} / {a}, per round (median, min-max) | rounds where {b} took less |")
print("|---|---:|---:|---:|---:|")
for name, by in times.items():
    rounds = sorted(set(by.get(a, {})) & set(by.get(b, {})), key=int)
    if not rounds:
        continue
    ratios = [by[b][r] / by[a][r] for r in rounds]
    fewer = sum(x < 1 for x in ratios)
    print(f"| {name} | {statistics.median(by[a][r] for r in rounds):.1f} µs "
          f"| {statistics.median(by[b][r] for r in rounds):.1f} µs "
          f"| {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) | {fewer} of {len(rounds)} |")
EOF
