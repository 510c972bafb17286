"""A test-only exporter of Prometheus native histograms: it serves
``io.prometheus.client.MetricFamily`` messages in the protobuf exposition format (each message
preceded by its length as a varint: the "delimited" encoding Prometheus asks for), encoded here
by hand -- varints, zigzag integers, little-endian doubles and length-delimited fields
(Google 2008, "Protocol Buffers: Encoding") -- so no protobuf package is needed.
``prometheus_client`` serves native histograms only in OpenMetrics text 2.0, which Prometheus
2.42 does not read.

A native histogram of schema ``s`` (Rabenstein 2022, "Native histograms"; Prometheus'
``metrics.proto``) has buckets of index ``i`` holding the observations in
``(base^(i-1), base^i]``, ``base = 2^(2^-s)``, and a zero bucket of the observations within
``zero_threshold``; the populated indices are sent as spans (a gap, a run length) and the
counts as deltas from the previous bucket's.
"""

from __future__ import annotations

import math
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterable

CONTENT_TYPE = ("application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
                "encoding=delimited")
#: MetricType
COUNTER, HISTOGRAM = 0, 4


def varint(n: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative integer (a negative ``int64``: its two's
    complement, ten bytes)."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def zigzag(n: int) -> int:
    """``sint32``/``sint64``: 0, -1, 1, -2 -> 0, 1, 2, 3."""
    return (n << 1) ^ (n >> 63)


def key(field: int, wire: int) -> bytes:
    return varint((field << 3) | wire)


def f_varint(field: int, n: int) -> bytes:
    return key(field, 0) + varint(n)


def f_double(field: int, x: float) -> bytes:
    return key(field, 1) + struct.pack("<d", x)


def f_bytes(field: int, data: bytes) -> bytes:
    return key(field, 2) + varint(len(data)) + data


def f_str(field: int, text: str) -> bytes:
    return f_bytes(field, text.encode())


class NativeHistogram:
    """One series' cumulative native histogram: observations added, its message encoded."""

    def __init__(self, schema: int, zero_threshold: float = 1e-128) -> None:
        if not -4 <= schema <= 8:
            raise ValueError(f"schema: must be within [-4, 8], got {schema}")
        self.schema, self.zero_threshold = schema, zero_threshold
        self.count, self.sum, self.zero_count = 0, 0.0, 0
        self.buckets: dict[int, int] = {}

    def index(self, v: float) -> int:
        """The bucket of ``v > zero_threshold``: the least ``i`` with ``v <= base^i``."""
        frac, exp = math.frexp(v)              # v = frac 2^exp, frac in [0.5, 1)
        if self.schema <= 0:
            # base^i = 2^(i 2^-s); exact at powers of two (frac == 0.5: v = 2^(exp-1))
            e = exp - 1 if frac == 0.5 else exp
            return -((-e) >> -self.schema) if self.schema < 0 else e
        i = math.ceil(math.log2(v) * (1 << self.schema))
        base = 2.0 ** (2.0 ** -self.schema)
        while i > -10_000 and v <= base ** (i - 1):     # float residue at a bound
            i -= 1
        while v > base ** i:
            i += 1
        return i

    def observe(self, v: float) -> None:
        self.count += 1
        self.sum += v
        if v <= self.zero_threshold:
            self.zero_count += 1
        else:
            i = self.index(v)
            self.buckets[i] = self.buckets.get(i, 0) + 1

    def upper(self, i: int) -> float:
        return 2.0 ** (i * 2.0 ** -self.schema)

    def message(self) -> bytes:
        """``io.prometheus.client.Histogram`` with spans and deltas (integer counts)."""
        out = (f_varint(1, self.count) + f_double(2, self.sum) + f_varint(5, zigzag(self.schema))
               + f_double(6, self.zero_threshold) + f_varint(7, self.zero_count))
        spans, deltas, previous, last = [], [], 0, None
        for i in sorted(self.buckets):
            if last is None or i != last + 1:
                spans.append([i if last is None else i - last - 1, 0])
            spans[-1][1] += 1
            deltas.append(zigzag(self.buckets[i] - previous))
            previous, last = self.buckets[i], i
        for offset, length in spans:
            out += f_bytes(12, f_varint(1, zigzag(offset)) + f_varint(2, length))
        if deltas:
            out += f_bytes(13, b"".join(varint(d) for d in deltas))
        return out


def family(name: str, kind: int, metrics: Iterable[tuple[dict[str, str], bytes]],
           help_text: str = "test") -> bytes:
    """A delimited ``MetricFamily``: ``metrics`` are (labels, the Metric's value field)."""
    body = f_str(1, name) + f_str(2, help_text) + f_varint(3, kind)
    for labels, value in metrics:
        metric = b"".join(f_bytes(1, f_str(1, k) + f_str(2, v)) for k, v in labels.items())
        body += f_bytes(4, metric + value)
    return varint(len(body)) + body


class NativeExporter:
    """Serves, per ``handler``, a native histogram ``<name>`` and a counter
    ``<busy>_total``, over HTTP on loopback (a thread)."""

    def __init__(self, name: str, schemas: dict[str, int], busy: str = "app_busy_seconds",
                 zero_threshold: float = 1e-128) -> None:
        self.name, self.busy_name = name, busy
        self.histograms = {h: NativeHistogram(s, zero_threshold) for h, s in schemas.items()}
        self.busy = 0.0
        self.lock = threading.Lock()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:                               # noqa: N802
                body = exporter.payload()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def observe(self, handler: str, v: float) -> None:
        with self.lock:
            self.histograms[handler].observe(v)

    def add_busy(self, seconds: float) -> None:
        with self.lock:
            self.busy += seconds

    def payload(self) -> bytes:
        with self.lock:
            hist = family(self.name, HISTOGRAM,
                          [({"handler": h}, f_bytes(7, nh.message()))
                           for h, nh in sorted(self.histograms.items())])
            busy = family(f"{self.busy_name}_total", COUNTER,
                          [({}, f_bytes(3, f_double(1, self.busy)))])
        return hist + busy

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
