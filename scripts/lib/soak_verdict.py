#!/usr/bin/env python3
"""The soak's verdict (scripts/soak.sh): reads OUT/samples.csv, OUT/faults.csv and
OUT/loadgen.json, writes OUT/soak.md, prints it, and exits 1 if a bound is broken.

Bounds, over the samples taken under load after the warm-up (the first fifth of the
run, at least 60 s), for each gateway
and for post-service (never restarted): RSS grows by at most max(8 MiB, 10 %) from the
first sample after warm-up to the median of the last three; open fds by at most 8; tokio
tasks by at most 32. loadgen: 0 wrong answers, transport errors, timeouts and non-2xx.
The gateways' gateway_request_errors_total rises only in sample intervals that overlap a
fault window. user-service and redis-server are restarted, so their figures are shown
but not bounded."""

import csv
import json
import statistics
import sys
from pathlib import Path

RSS_FLOOR_KIB = 8 * 1024
RSS_SHARE = 0.10
FD_SLACK = 8
TASK_SLACK = 32
BOUNDED = ("gateway-1", "gateway-2", "post-service")


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def main(out: Path, minutes: int) -> int:
    samples = list(csv.DictReader(open(out / "samples.csv")))
    faults = list(csv.DictReader(open(out / "faults.csv")))
    report = json.load(open(out / "loadgen.json"))
    warmup = max(60.0, minutes * 60 / 5)
    load_end = minutes * 60 - 1.0
    lines = [f"# Soak: {minutes} min ({out.name})", ""]
    lines.append(
        f"Two layered gateways (TTL 10) sharing one Redis, the ttl-tradeoff workload "
        f"(96 % reads, 4 % versioned writes, every answer checked), 50 connections. "
        f"Warm-up: first {warmup:.0f} s. Samples every 5 s: `samples.csv`."
    )
    lines.append("")
    lines.append("Faults (window = the kill until 15 s after the restart):")
    lines.append("")
    lines.append("| fault | down from | restarted at | window ends |")
    lines.append("|---|---:|---:|---:|")
    windows = []
    for f in faults:
        start, end, window_end = float(f["start_s"]), float(f["end_s"]), float(f["window_end_s"])
        windows.append((start, window_end))
        lines.append(f"| {f['fault']} restart | {start:.1f} s | {end:.1f} s | {window_end:.1f} s |")
    lines.append("")
    failures = []

    by_process = {}
    for s in samples:
        by_process.setdefault(s["process"], []).append(s)
    lines.append("| process | RSS after warm-up | RSS at the end (median of last 3) | growth | bound | fds after warm-up → end | tokio tasks after warm-up → end | bounded |")
    lines.append("|---|---:|---:|---:|---:|---|---|---|")
    for name, rows in by_process.items():
        # Under load only: the last sample, taken after loadgen stopped, would flatter
        # the end (idle connections closed, tasks ended).
        after = [r for r in rows if warmup <= float(r["t_s"]) <= load_end]
        if len(after) < 4:
            failures.append(f"{name}: too few samples after the warm-up ({len(after)})")
            continue
        first, last3 = after[0], after[-3:]
        rss0 = number(first["rss_kib"]) or 0.0
        rss1 = statistics.median(number(r["rss_kib"]) or 0.0 for r in last3)
        growth = rss1 - rss0
        bound = max(RSS_FLOOR_KIB, RSS_SHARE * rss0)
        fd0, fd1 = number(first["fds"]), number(after[-1]["fds"])
        t0, t1 = number(first["tokio_tasks"]), number(after[-1]["tokio_tasks"])
        bounded = name in BOUNDED
        if bounded:
            if growth > bound:
                failures.append(f"{name}: RSS grew {growth / 1024:.1f} MiB (bound {bound / 1024:.1f} MiB)")
            if fd0 is not None and fd1 is not None and fd1 - fd0 > FD_SLACK:
                failures.append(f"{name}: open fds {fd0:.0f} → {fd1:.0f}")
            if t0 is None or t1 is None:
                failures.append(f"{name}: no tokio task count in its /metrics")
            elif t1 - t0 > TASK_SLACK:
                failures.append(f"{name}: tokio tasks {t0:.0f} → {t1:.0f}")
        tasks = f"{t0:.0f} → {t1:.0f}" if t0 is not None and t1 is not None else "–"
        lines.append(
            f"| {name} | {rss0 / 1024:.1f} MiB | {rss1 / 1024:.1f} MiB | {growth / 1024:+.1f} MiB ({growth / rss0 * 100 if rss0 else 0:+.1f} %) "
            f"| {bound / 1024:.1f} MiB | {fd0:.0f} → {fd1:.0f} | {tasks} | {'yes' if bounded else 'no (restarted)'} |"
        )
    lines.append("")

    # GraphQL errors per sample interval, per gateway: only inside fault windows.
    outside = 0
    inside = 0
    for name in ("gateway-1", "gateway-2"):
        rows = by_process.get(name, [])
        for a, b in zip(rows, rows[1:]):
            e0, e1 = number(a["request_errors_total"]), number(b["request_errors_total"])
            if e0 is None or e1 is None or e1 <= e0:
                continue
            t0, t1 = float(a["t_s"]), float(b["t_s"])
            if any(t0 <= w1 and w0 <= t1 for w0, w1 in windows):
                inside += e1 - e0
            else:
                outside += e1 - e0
                failures.append(f"{name}: {e1 - e0:.0f} answers with errors between {t0:.0f} s and {t1:.0f} s, outside every fault window")
    e = report["errors"]
    w = report.get("workload") or {}
    lines.append(
        f"loadgen: {report['requests']} requests, {report['requests_per_sec']:.0f} req/s, "
        f"p99 {report['latency_ms']['p99']:.1f} ms; errors: transport {e['transport']}, timeouts {e['timeouts']}, "
        f"non-2xx {e['non_2xx']}, GraphQL errors in 2xx {e['graphql']}; wrong answers {w.get('wrong_answers')}, "
        f"reads checked {w.get('reads_checked')}, stale reads {w.get('stale_reads')}, writes acknowledged {w.get('writes_acked')}, failed {w.get('writes_failed')}."
    )
    lines.append(
        f"Gateways' answers with errors: {inside:.0f} inside fault windows, {outside:.0f} outside."
    )
    if w.get("wrong_answers", 1) != 0:
        failures.append(f"wrong answers: {w.get('wrong_answers')} ({w.get('wrong_answer_examples')})")
    for k in ("transport", "timeouts", "non_2xx"):
        if e[k]:
            failures.append(f"loadgen saw {e[k]} {k} error(s)")
    lines.append("")
    if failures:
        lines.append("**Verdict: FAILED**")
        lines.append("")
        lines.extend(f"- {f}" for f in failures)
    else:
        lines.append(
            f"**Verdict: passed** (RSS growth ≤ max(8 MiB, 10 %), fds ≤ +{FD_SLACK}, tokio tasks ≤ +{TASK_SLACK} "
            "for the gateways and post-service; 0 wrong answers; errors only in fault windows)"
        )
    text = "\n".join(lines) + "\n"
    (out / "soak.md").write_text(text)
    print(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2])))
