"""The Prometheus client's memory on a large answer, and how long a trickled answer holds it.

A local server in another process answers every ``query_range`` with a body of ``--mb`` MiB
(a matrix of that many spaces: valid JSON once whole); the client reads it with each
``max_response_mb`` given, and the peak resident memory of this process (``ru_maxrss``) is
printed. Then a server that trickles one byte per 50 ms is asked with ``deadline_s`` given,
and the time to the error is printed.

    python -m bench.speed.prometheus_body --mb 200 --caps 64 4096 --deadline 2
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

from streams.sources.prometheus import source_from_mapping
from streams.sources.prometheus_http import PrometheusClient, PrometheusError

_SERVER = r'''
import sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
mb, trickle = int(sys.argv[1]), sys.argv[2] == "trickle"
chunk = b" " * (1 << 20)
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Connection", "close"); self.end_headers()
        try:
            self.wfile.write(b'{"status":"success","data":{"resultType":"matrix","result":[')
            if trickle:
                while True:
                    self.wfile.write(b" "); self.wfile.flush(); time.sleep(0.05)
            for _ in range(mb):
                self.wfile.write(chunk)
            self.wfile.write(b"]}}")
        except OSError:
            pass
    def log_message(self, *a):
        pass
s = HTTPServer(("127.0.0.1", 0), H); print(s.server_address[1], flush=True); s.serve_forever()
'''


def _ask(mode: str, mb: int, **settings: float) -> tuple[str, float]:
    server = subprocess.Popen([sys.executable, "-c", _SERVER, str(mb), mode],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        source = source_from_mapping({
            "prometheus": {"url": f"http://127.0.0.1:{port}", "system": "s", **settings},
            "tiers": {"a": {"busy_seconds": "b", "completions": "c"}}})
        t0 = time.monotonic()
        try:
            PrometheusClient(source, env={}).query_range("up", 0, 5000, 5000)
            outcome = "read"
        except PrometheusError as err:
            outcome = str(err).split(": ", 1)[1][:120]
        return outcome, time.monotonic() - t0
    finally:
        server.kill()
        server.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=200, help="answer size, MiB")
    ap.add_argument("--caps", type=float, nargs="+", default=[64.0, 4096.0],
                    help="max_response_mb values, smallest first (peak memory only grows)")
    ap.add_argument("--deadline", type=float, default=2.0, help="deadline_s of the trickle")
    args = ap.parse_args()
    print("| max_response_mb | answer | outcome | peak RSS of the process |")
    print("|---|---|---|---|")
    for cap in sorted(args.caps):
        outcome, _ = _ask("body", args.mb, max_response_mb=cap)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"| {cap:g} | {args.mb} MiB | {outcome} | {peak:.0f} MB |")
    outcome, seconds = _ask("trickle", 0, timeout_s=min(1.0, args.deadline),
                            deadline_s=args.deadline)
    print(f"\ntrickled at 1 byte / 50 ms, deadline_s = {args.deadline:g}: {outcome} "
          f"after {seconds:.2f} s")


if __name__ == "__main__":
    main()
