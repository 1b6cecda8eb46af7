"""The HTTP endpoints: ``/metrics``, ``/healthz`` and ``/readyz`` on one threaded WSGI server.

``/metrics`` is prometheus_client's own WSGI app; the server is the threading WSGI server its
``start_http_server`` uses. No HTTP is parsed here.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, disable_created_metrics, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from relayd.errors import ListenerUnavailable
from relayd.observability.health import Answer, Health

_StartResponse = Callable[..., Any]
#: prometheus_client's switch, unannotated there: typed here so strict mypy can call it.
_disable_created: Callable[[], None] = disable_created_metrics
_Environ = dict[str, Any]


class _QuietHandler(WSGIRequestHandler):
    """Request handler that leaves logging to relayd (stdlib writes every request to stderr)."""

    def log_message(self, format: str, *args: Any) -> None:
        return


def _answer(start_response: _StartResponse, answer: Answer) -> Iterable[bytes]:
    status = "200 OK" if answer.ok else "503 Service Unavailable"
    body = (answer.reason + "\n").encode()
    start_response(
        status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    )
    return [body]


def make_app(
    registry: CollectorRegistry, health: Health
) -> Callable[[_Environ, _StartResponse], Iterable[bytes]]:
    """The WSGI app: probes by path, everything else to the Prometheus exposition app."""
    metrics_app = make_wsgi_app(registry)

    def app(environ: _Environ, start_response: _StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            return _answer(start_response, health.live(time.monotonic()))
        if path == "/readyz":
            return _answer(start_response, health.ready())
        return metrics_app(environ, start_response)  # type: ignore[no-any-return]

    return app


class HttpHandle:
    """A running server: ``port`` is the bound port (useful with port 0); ``close()`` stops it."""

    def __init__(self, server: ThreadingWSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self.host, self.port = server.server_address[:2]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def serve_http(host: str, port: int, registry: CollectorRegistry, health: Health) -> HttpHandle:
    """Serve the endpoints on ``host:port`` from a daemon thread.

    Raises ``ListenerUnavailable`` when the address cannot be bound (a busy port, say).
    """
    server_class = ThreadingWSGIServer
    if ":" in host:  # an IPv6 literal such as "::" or "::1"

        class _V6Server(ThreadingWSGIServer):
            address_family = socket.AF_INET6

        server_class = _V6Server
    # No ``_created`` series: a timestamp per counter and histogram series that nobody graphs,
    # a third of a scrape's samples (prometheus_client's switch is process-wide).
    _disable_created()
    app = make_app(registry, health)
    try:
        server = make_server(host, port, app, server_class, handler_class=_QuietHandler)
    except OSError as exc:
        raise ListenerUnavailable("metrics endpoint", host, port, exc) from None
    thread = threading.Thread(target=server.serve_forever, name="relayd-http", daemon=True)
    thread.start()
    return HttpHandle(server, thread)
