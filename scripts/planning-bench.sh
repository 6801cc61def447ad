#!/usr/bin/env bash
# Plan time (issue 20, point 2): runs gateway/benches/planning.rs (criterion) and records
# its output, with each benchmark's median, in results/<UTC stamp>-planning/summary.txt.
#   scripts/planning-bench.sh                 (criterion: --warm-up-time 1 --measurement-time 3)
#   scripts/planning-bench.sh ARGS...         (these criterion arguments instead, e.g.
#                                              --measurement-time 10, or a filter: compile)
# What is measured, through the gateway's public API: building the planner from the lab's
# own graph (composed, and from its supergraph SDL) and from the commerce supergraph; one
# plan for the seed query and for each operation of commerce-graph/queries/deep.graphql,
# with and without reference keys; and the parses a plan includes (the bench's doc
# comment says more). The medians come from criterion's estimates of this run
# (target/criterion/planning_*/*/new/estimates.json, written after the run started), with
# their 95% confidence interval; they are also kept in medians.json next to summary.txt. The machine is shared: a figure is one run's, on a
# noisy machine; compare figures taken in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/record.sh
. scripts/lib/record.sh # record_output
criterion_args=("$@")
[ ${#criterion_args[@]} -gt 0 ] || criterion_args=(--warm-up-time 1 --measurement-time 3)
target=${CARGO_TARGET_DIR:-target}
# Built before the run is recorded, so that the summary holds the run only.
cargo bench --locked -p gateway --bench planning --no-run
record_output planning # prints the commit; everything below is also kept in $out/summary.txt
machine_lines
echo "kernel: $(uname -sr)"
echo "rustc: $(rustc --version)"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: cargo bench --locked -p gateway --bench planning -- ${criterion_args[*]}"
echo
started=$(mktemp)
trap 'rm -f "$started"' EXIT
cargo bench --locked -p gateway --bench planning -- "${criterion_args[@]}"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
python3 - "$target/criterion" "$started" "$out/medians.json" <<'PY'
import json, os, sys
root, started, medians = sys.argv[1], os.path.getmtime(sys.argv[2]), sys.argv[3]
rows = []
for group in sorted(os.listdir(root)) if os.path.isdir(root) else []:
    if not group.startswith("planning_"):
        continue
    for bench in os.listdir(os.path.join(root, group)):
        new = os.path.join(root, group, bench, "new")
        estimates = os.path.join(new, "estimates.json")
        if not os.path.isfile(estimates) or os.path.getmtime(estimates) < started:
            continue
        full_id = json.load(open(os.path.join(new, "benchmark.json")))["full_id"]
        median = json.load(open(estimates))["median"]
        ci = median["confidence_interval"]
        rows.append((full_id, median["point_estimate"], ci["lower_bound"], ci["upper_bound"]))
if not rows:
    sys.exit("planning-bench.sh: criterion wrote no estimates in this run")
def fmt(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"
order = {"planning_build": 0, "planning_compile": 1, "planning_parse": 2}
rows.sort(key=lambda r: (order.get(r[0].split("/")[0], 3), r[0]))
with open(medians, "w") as f:
    json.dump([{"id": i, "median_ns": p, "ci95_ns": [lo, hi]} for i, p, lo, hi in rows], f, indent=2)
    f.write("\n")
print("| benchmark | median | 95% interval of the median |")
print("|---|---:|---:|")
for full_id, point, lo, hi in rows:
    print(f"| {full_id} | {fmt(point)} | {fmt(lo)} - {fmt(hi)} |")
PY
