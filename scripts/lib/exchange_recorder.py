"""A reverse proxy that keeps every exchange it forwards: what the deep ceilings
(scripts/deep-ceilings.sh) replay as bare exchanges, and what `loadgen target --replay`
answers back in place of the subgraphs (scripts/cpu-per-request.sh --deep, REPLAY=1).

    python3 scripts/lib/exchange_recorder.py DIR PORT NAME=URL [NAME=URL ...]

A POST to http://127.0.0.1:PORT/NAME goes to URL, and its request and answer bodies
are written to DIR as NNN-NAME.request.json and NNN-NAME.answer.json, numbered in the
order the requests arrived. A GET of any path answers 200 (to wait for it); it
forwards nothing but POST, and answers 502 (naming the upstream) when one fails.
"""
import http.server
import itertools
import os
import sys
import threading
import urllib.error
import urllib.request

out_dir, port = sys.argv[1], int(sys.argv[2])
upstreams = dict(arg.split("=", 1) for arg in sys.argv[3:])
numbers = itertools.count(1)
numbering = threading.Lock()


class Recorder(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.answer(200, b"recording")

    def do_POST(self):
        name = self.path.strip("/")
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if name not in upstreams:
            return self.answer(404, f"no upstream named {name!r}".encode())
        with numbering:
            number = next(numbers)
        request = urllib.request.Request(
            upstreams[name], data=body, headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, answer = response.status, response.read()
        except (urllib.error.URLError, OSError) as e:
            return self.answer(502, f"upstream {name} ({upstreams[name]}): {e}".encode())
        for part, data in (("request", body), ("answer", answer)):
            with open(os.path.join(out_dir, f"{number:03}-{name}.{part}.json"), "wb") as f:
                f.write(data)
        self.answer(status, answer)

    def answer(self, status, body):
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Recorder)
server.serve_forever()
