#!/usr/bin/env python3
"""The literal flood (issue 7): does the parsed-document cache hold its byte bound when
every request is a new document?

Three cases, each on fresh services, each 40 000 requests from `loadgen bench
--unique-literals` (100 connections, one thread):

  literals      `{ getPost(pid: "p<n>") { pid title } }`, n unique per request:
                40 000 documents nobody sends twice, at --doc-cache-bytes 4 MiB
  literals-off  the same flood with the document cache off (--doc-cache-bytes 0): what the
                rest of the gateway grows by under this load, for comparison
  variables     `query($p: ID!) { getPost(pid: $p) { pid title } }` with {"p": "p<n>"}:
                one document, 40 000 variable sets, at 4 MiB: the hit ratio

The gateway runs with --ttl 10 (resolvers cached, as in the document-size experiment) and
--cache-max-entries 1000, so that the resolver cache, which also sees 40 000 distinct
calls, stays small and the growth measured is the document cache's.

RSS is the gateway's VmRSS, read before the flood (after one warm-up request), sampled
every 20 ms during it (peak), and after it. The bound checked: peak - before <= 3 x cap +
8 MiB. Output: results/<UTC stamp>-literal-flood/{summary.md,summary.json,runs/*.json}.

  scripts/literal-flood.py [--requests N] [--cap BYTES]
"""
import argparse, datetime, json, os, pathlib, re, socket, subprocess, sys, threading, time, urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release"
MIB = 1024 * 1024


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def http(url, body=None):
    req = urllib.request.Request(url, data=body, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read().decode()


def wait_up(url, proc, deadline=60):
    end = time.time() + deadline
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            http(url)
            return
        except Exception:
            time.sleep(0.1)
    raise RuntimeError(f"no answer from {url}")


def metric(text, name):
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def run_case(name, document, variables, cap, requests, out):
    procs = []
    try:
        up, pp, gp = free_port(), free_port(), free_port()
        for binary, port in (("user-service", up), ("post-service", pp)):
            procs.append(subprocess.Popen([str(BIN / binary), "--listen", f"127.0.0.1:{port}"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        gateway = subprocess.Popen(
            [str(BIN / "gateway"), "--listen", f"127.0.0.1:{gp}",
             "--subgraph", f"user=http://127.0.0.1:{up}/graphql",
             "--subgraph", f"post=http://127.0.0.1:{pp}/graphql",
             "--ttl", "10", "--cache-max-entries", "1000", "--doc-cache-bytes", str(cap)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(gateway)
        wait_up(f"http://127.0.0.1:{gp}/health", gateway)
        http(f"http://127.0.0.1:{gp}/graphql",
             json.dumps({"query": "{ getPost(pid: \"p1\") { pid title } }"}).encode())
        time.sleep(0.5)
        before = rss_kib(gateway.pid)
        peak = [before]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_kib(gateway.pid))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        query_file = out / f"{name}.graphql"
        query_file.write_text(document)
        cmd = [str(BIN / "loadgen"), "bench", "--url", f"http://127.0.0.1:{gp}/graphql",
               "--query-file", str(query_file), "--unique-literals", "--requests", str(requests),
               "--connections", "100", "--threads", "1", "--json", "--no-progress"]
        if variables:
            cmd += ["--variables", variables]
        bench = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        done.set()
        sampler.join()
        time.sleep(0.5)
        after = rss_kib(gateway.pid)
        text = http(f"http://127.0.0.1:{gp}/metrics")
        doc = {k: metric(text, f"gateway_document_cache_{k}") for k in
               ("hits_total", "misses_total", "evictions_total", "bytes", "capacity_bytes")}
        errors = sum(bench["errors"].values())
        hits, misses = doc["hits_total"] or 0, doc["misses_total"] or 0
        row = {
            "case": name, "document": document, "variables": variables, "cap_bytes": cap,
            "requests": bench["requests"], "errors": errors,
            "requests_per_sec": bench["requests_per_sec"],
            "rss_before_mib": before / 1024, "rss_peak_mib": peak[0] / 1024,
            "rss_after_mib": after / 1024, "growth_peak_mib": (peak[0] - before) / 1024,
            "bound_mib": (3 * cap + 8 * MIB) / MIB if cap else None,
            "document_cache": doc,
            "hit_ratio": hits / (hits + misses) if hits + misses else None,
        }
        row["within_bound"] = None if not cap else row["growth_peak_mib"] <= row["bound_mib"]
        (out / "runs").mkdir(exist_ok=True)
        (out / "runs" / f"{name}.json").write_text(json.dumps({"row": row, "bench": bench}, indent=2))
        return row
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=40_000, help="requests (unique documents) per case")
    ap.add_argument("--cap", type=int, default=4 * MIB, help="--doc-cache-bytes for the cached cases")
    ap.add_argument("--out", type=pathlib.Path, help="output directory [results/<stamp>-literal-flood]")
    args = ap.parse_args()
    for b in ("gateway", "user-service", "post-service", "loadgen"):
        if not (BIN / b).exists():
            sys.exit(f"literal-flood.py: {BIN / b} is missing; run `cargo build --release --workspace` first")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = args.out or ROOT / "results" / f"{stamp}-literal-flood"
    out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", ".", ":!results"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip() != ""
    literal = '{ getPost(pid: "p{{n}}") { pid title } }'
    cases = [
        ("literals", literal, None, args.cap),
        ("literals-off", literal, None, 0),
        ("variables", "query($p: ID!) { getPost(pid: $p) { pid title } }", '{"p": "p{{n}}"}', args.cap),
    ]
    rows = []
    for name, document, variables, cap in cases:
        print(f"literal-flood: {name} ...", file=sys.stderr)
        rows.append(run_case(name, document, variables, cap, args.requests, out))
    # What the document cache itself adds: growth with it, less growth without it under
    # the same flood (connection buffers, allocator arenas and resolver entries grow
    # either way). And the cache's own estimate must stay within its cap.
    off = next(r for r in rows if r["case"] == "literals-off")
    for r in rows:
        r["cache_share_mib"] = (r["growth_peak_mib"] - off["growth_peak_mib"]) if r["cap_bytes"] else None
        held = r["document_cache"]["bytes"]
        r["held_within_cap"] = None if not r["cap_bytes"] else (held is not None and held <= r["cap_bytes"])
    summary = {"schema": "lab.literal-flood/1", "commit": commit, "dirty": dirty,
               "requests_per_case": args.requests, "rows": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    fmt = lambda v, f="{:.1f}": "–" if v is None else f.format(v)
    lines = [
        f"# Literal flood ({args.requests} requests per case, commit {commit[:7]}{' (dirty)' if dirty else ''})",
        "",
        "| case | doc cache cap | req/s | errors | RSS before MiB | RSS peak MiB | growth MiB | bound MiB | within | growth beyond cache-off MiB | doc hits | doc misses | evictions | bytes held | held within cap | hit ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        d = r["document_cache"]
        lines.append(
            f"| {r['case']} | {r['cap_bytes'] / MIB:.0f} MiB | {r['requests_per_sec']:.0f} | {r['errors']} | "
            f"{r['rss_before_mib']:.1f} | {r['rss_peak_mib']:.1f} | {r['growth_peak_mib']:.1f} | "
            f"{fmt(r['bound_mib'])} | {fmt(r['within_bound'], '{}')} | {fmt(r['cache_share_mib'])} | "
            f"{fmt(d['hits_total'], '{:.0f}')} | "
            f"{fmt(d['misses_total'], '{:.0f}')} | {fmt(d['evictions_total'], '{:.0f}')} | "
            f"{fmt(d['bytes'], '{:.0f}')} | {fmt(r['held_within_cap'], '{}')} | {fmt(r['hit_ratio'], '{:.4f}')} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nliteral-flood: wrote {out}", file=sys.stderr)
    if any(r["errors"] for r in rows) or any(r["within_bound"] is False for r in rows) \
            or any(r["held_within_cap"] is False for r in rows):
        sys.exit("literal-flood: errors seen, the RSS bound exceeded, or the cache held more than its cap")


if __name__ == "__main__":
    main()
