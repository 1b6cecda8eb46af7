"""A scripted HTTP server (stdlib ``http.server`` in a thread) for tests of webhook delivery.

It answers every POST as a ``Script`` says and records each request; the sink tests drive it
in-process, the end-to-end tests point a ``relayd`` process at it.
"""

from __future__ import annotations

import gzip
import json
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Reply:
    """What the server answers: status, headers, and how long it waits first.

    ``hold`` (when set) is waited on before answering, for at most ``hold_timeout_s``: a test
    releases it when what must come first has come (causal, not timed).
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    hold: threading.Event | None = None
    hold_timeout_s: float = 30.0


@dataclass(frozen=True)
class Request:
    """One request as received: headers, raw body, parsed body and when it finished (monotonic)."""

    headers: dict[str, str]
    raw: bytes
    body: dict[str, Any]
    done_at: float
    client_port: int = 0


#: ``script(body, nth)`` → the Reply; ``nth`` counts requests with that envelope id, from 1.
Script = Callable[[dict[str, Any], int], Reply]


class ScriptedServer:
    """Answers every POST with ``script`` and records it."""

    def __init__(self, script: Script, host: str = "127.0.0.1") -> None:
        self.script = script
        self.requests: list[Request] = []
        self.in_flight = self.max_in_flight = 0
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real webhook receiver does

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                decoded = gzip.decompress(raw) if self.headers.get("Content-Encoding") == "gzip" else raw
                body = json.loads(decoded)
                with server._lock:
                    server._seen[body["id"]] += 1
                    nth = server._seen[body["id"]]
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                reply = server.script(body, nth)
                if reply.hold is not None:
                    reply.hold.wait(reply.hold_timeout_s)
                time.sleep(reply.delay_s)
                with server._lock:
                    server.in_flight -= 1
                    request = Request(dict(self.headers), raw, body, time.monotonic(), self.client_address[1])
                    server.requests.append(request)
                server.on_request(request)
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers:
                        self.send_header(name, value)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the client gave up (timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                """Keep test output quiet."""

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False

    def on_request(self, request: Request) -> None:
        """Called after each request is recorded, before it is answered (tests override it)."""

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        """The loopback URL (a server bound to every address answers there too)."""
        scheme = "https" if isinstance(self.httpd.socket, ssl.SSLSocket) else "http"
        return f"{scheme}://127.0.0.1:{self.port}/hook"


@contextmanager
def serve(
    script: Script,
    on_request: Callable[[Request], None] | None = None,
    *,
    tls: tuple[Path, Path] | None = None,
    host: str = "127.0.0.1",
) -> Iterator[ScriptedServer]:
    """Run a ScriptedServer on ``host`` in a thread for the block (HTTPS with ``tls=(cert, key)``)."""
    server = ScriptedServer(script, host)
    if on_request is not None:
        server.on_request = on_request  # type: ignore[assignment]  # a hook for this run
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.httpd.socket = context.wrap_socket(server.httpd.socket, server_side=True)
    thread = threading.Thread(target=server.httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
        thread.join(5)
