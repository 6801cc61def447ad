#!/usr/bin/env python3
"""The hostile requests of scripts/hostile.sh, and what each costs the gateway.

Each case is one request body a hostile client could send (issue 57's findings, and
some of this lab's own). For each case this sends it REPEAT times one after another,
then CONCURRENT copies at once, to the gateway at URL, and reads from /proc:
  - the gateway's CPU for the case (all its threads, from /proc/PID/task/*/schedstat,
    in nanoseconds), per request;
  - its resident memory before the case, its peak while the case ran, and after;
  - the answer: the HTTP status and the first error's message, or "no answer" when
    none came within the timeout;
  - whether /health answered after the case.
Results go to standard output as JSON lines, one a case, for hostile.sh's table.

  hostile.py URL PID [--repeat N] [--concurrent N] [--timeout S] [--only NAME,...]
  hostile.py --list      # the cases' names and sizes
"""

import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse


def chain(n, width=2, skip=False):
    """Fragments F0..Fn, each spreading the next `width` times (under @skip(if: true)
    with `skip`): width^n expansions."""
    directive = " @skip(if: true)" if skip else ""
    spreads = lambda i: " ".join([f"...F{i + 1}{directive}"] * width)
    frags = " ".join(f"fragment F{i} on Query {{ {spreads(i)} }}" for i in range(n))
    return f"query {{ ...F0 }} {frags} fragment F{n} on Query {{ me {{ id }} }}"


def amplification(levels):
    """`levels` nested topPosts(count: 3) { author { ... } }: 3^levels posts."""
    q = "{ id }"
    for _ in range(levels):
        q = f"{{ topPosts(count: 3) {{ pid author {q} }} }}"
    return f"{{ me {q} }}"


def cases():
    """(name, what it is, query text) of every case."""
    mib = 1 << 20
    return [
        ("cycle", "the 61-byte fragment cycle at the root",
         "query { ...A } fragment A on Query { ...A ...A }"),
        ("cycle-long", "a cycle of 50 fragments entered through an inline fragment",
         "query { ... on Query { ...C0 } } "
         + " ".join(f"fragment C{i} on Query {{ ...C{(i + 1) % 50} ...C{(i + 1) % 50} }}" for i in range(50))),
        ("chain-24", "24 fragments, each spreading the next twice (2^24 fields)", chain(24)),
        ("chain-skip", "the same chain, every spread under @skip(if: true)",
         chain(24, skip=True)),
        ("wide-spreads", "one fragment spread 5,000 times",
         "query { " + "...W " * 5000 + "} fragment W on Query { me { id } }"),
        ("unknown-chain", "a chain of 24 doubling fragments ending in an unknown one",
         chain(24).rsplit(" fragment F24", 1)[0]),
        ("token-flood", "1 MiB of 500,000 tokens",
         "{ me { " + "a " * ((mib - 64) // 2) + "} }"),
        ("directive-flood", "50,000 unknown directives on one field",
         "{ me { id " + "@x " * 50000 + "} }"),
        ("deep-text", "braces nested 10,000 deep", "{" * 10000 + "}" * 10000),
        ("amplification", "12 levels of topPosts(count: 3) { author { ... } } (475 bytes)",
         amplification(12)),
        ("aliases-64", "64 aliases of one root field (64 subgraph requests)",
         "{ " + " ".join(f"a{i}: topPosts(count: 1) {{ pid }}" for i in range(64)) + " }"),
        ("aliases-1999", "1,999 aliases of one leaf",
         "{ me { " + " ".join(f"a{i}: id" for i in range(1999)) + " } }"),
        ("long-string", "one string argument of nearly 1 MiB",
         '{ getPost(pid: "' + "x" * (mib - 128) + '") { pid } }'),
        ("comments", "nearly 1 MiB of comments around one field",
         ("# " + "c" * 1000 + "\n") * ((mib - 256) // 1003) + "{ me { id } }"),
        ("operations-1000", "1,000 named operations, none named by the request",
         " ".join(f"query Q{i} {{ me {{ id }} }}" for i in range(1000))),
        ("introspection-deep", "introspection 8 levels of ofType deep, 40 times",
         "{ " + " ".join(
             f"s{i}: __schema {{ types {{ fields {{ type {{ ofType {{ ofType {{ ofType {{ ofType {{ ofType {{ ofType {{ name }} }} }} }} }} }} }} }} }} }}"
             for i in range(40)) + " }"),
    ]


def cpu_ns(pid):
    """The CPU time of every thread of PID so far, in nanoseconds."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return total


def memory_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def send(url, body, timeout):
    """POST body; (status, first error message or "", seconds) or (None, "no answer", s)."""
    parts = urllib.parse.urlsplit(url)
    started = time.monotonic()
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("POST", parts.path, body=body, headers={"content-type": "application/json"})
        r = conn.getresponse()
        text = r.read()
        try:
            message = json.loads(text).get("errors", [{}])[0].get("message", "")
        except (ValueError, AttributeError, IndexError):
            message = text[:120].decode("utf-8", "replace")
        return r.status, message, time.monotonic() - started
    except OSError as e:
        return None, f"no answer ({e.__class__.__name__})", time.monotonic() - started
    finally:
        conn.close()


def healthy(url, timeout=5):
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def run_case(url, pid, name, about, query, repeat, concurrent, timeout):
    body = json.dumps({"query": query}).encode()
    rss_before = memory_kib(pid, "VmRSS")
    # Peak RSS while the case runs, sampled every 5 ms (VmHWM never comes down, so it
    # cannot tell one case's peak from an earlier one's).
    peak = [rss_before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            try:
                peak[0] = max(peak[0], memory_kib(pid, "VmRSS"))
            except FileNotFoundError:
                return
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu0 = cpu_ns(pid)
    answers = []
    for _ in range(repeat):
        answers.append(send(url, body, timeout))
        if answers[-1][0] is None:
            # No answer: the gateway is stuck on it; sending more would only wait.
            concurrent = 0
            break
    cpu1 = cpu_ns(pid)
    threads, together = [], [None] * concurrent

    def one(i):
        together[i] = send(url, body, timeout)

    for i in range(concurrent):
        threads.append(threading.Thread(target=one, args=(i,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu2 = cpu_ns(pid)
    done.set()
    sampler.join()
    time.sleep(0.5)
    status, message, _ = answers[0]
    unanswered = sum(1 for a in answers + together if a[0] is None)
    return {
        "case": name,
        "about": about,
        "bytes": len(body),
        "status": status,
        "message": message,
        "unanswered": unanswered,
        "requests": len(answers) + concurrent,
        "cpu_ms_per_request": (cpu1 - cpu0) / 1e6 / max(len(answers), 1),
        "cpu_ms_per_concurrent_request": (cpu2 - cpu1) / 1e6 / max(concurrent, 1),
        "rss_before_mib": rss_before / 1024,
        "rss_peak_mib": peak[0] / 1024,
        "rss_after_mib": memory_kib(pid, "VmRSS") / 1024,
        "health": healthy(url),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url", nargs="?")
    ap.add_argument("pid", nargs="?", type=int)
    ap.add_argument("--repeat", type=int, default=20, help="requests sent one after another")
    ap.add_argument("--concurrent", type=int, default=8, help="requests sent at once")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for an answer")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--list", action="store_true", help="list the cases")
    args = ap.parse_args()
    chosen = [c for c in cases() if not args.only or c[0] in args.only.split(",")]
    if args.list:
        for name, about, query in chosen:
            print(f"{name:20} {len(query):>8} bytes  {about}")
        return
    if not args.url or not args.pid:
        ap.error("URL and PID are needed (or --list)")
    for name, about, query in chosen:
        result = run_case(args.url, args.pid, name, about, query, args.repeat, args.concurrent, args.timeout)
        print(json.dumps(result), flush=True)
        if not result["health"]:
            print(json.dumps({"case": name, "stopped": "the gateway no longer answers /health"}), flush=True)
            sys.exit(1)


if __name__ == "__main__":
    main()
