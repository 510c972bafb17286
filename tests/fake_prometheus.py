"""A fake Prometheus HTTP API on 127.0.0.1 for the client's tests: each request is answered by
a function of the handler, and the request lines and headers it got are kept."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

__all__ = ["FakePrometheus", "json_answer"]


def json_answer(body: bytes, status: int = 200) -> Callable[[BaseHTTPRequestHandler], None]:
    """An answer of ``body`` (bytes of JSON, or not) with ``status``."""

    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return answer


class FakePrometheus:
    """``with FakePrometheus(answer) as fake``: serves ``fake.url`` until the block ends;
    ``fake.requests`` holds ``(path, headers)`` of every request; ``fake.stop`` is set when
    the block ends (an answer that trickles bytes checks it)."""

    def __init__(self, answer: Callable[[BaseHTTPRequestHandler], None]) -> None:
        self.answer = answer
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.stop = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                fake.requests.append((self.path, dict(self.headers)))
                try:
                    fake.answer(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass                       # the client hung up: what a deadline does

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,),
                                       daemon=True)

    def __enter__(self) -> "FakePrometheus":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
