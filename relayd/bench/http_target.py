"""A throwaway HTTP server on loopback for webhook benchmarks: answers 200 to every POST.

It runs in its own process (``python -m relayd.bench.http_target --server NAME --port N``), so
its CPU is neither the relay's nor the baseline's and it has a core of its own. ``GET /count``
answers how many POSTs it has taken. Two servers: aiohttp's own (the default: the webhook sink
already depends on aiohttp, and the raw client's rate against it was within the noise of its
rate against uvicorn in the same run, docs/benchmarks.md "Sink benchmarks") and uvicorn
(``--http-server uvicorn``, from the ``dev`` extra) with a bare ASGI app.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any, Final

from relayd.bench.server import free_port, stop_process
from relayd.errors import ConfigError

SERVERS: Final = ("aiohttp", "uvicorn")
#: How long a started server may take to accept a connection.
_START_TIMEOUT_S: Final = 15.0
#: What ``webhook:local`` in a bench sink spec stands for.
LOCAL_PLACEHOLDER: Final = "local"


class _Counter:
    posts = 0


def _serve_aiohttp(port: int) -> None:
    from aiohttp import web

    async def hook(request: web.Request) -> web.Response:
        await request.read()
        _Counter.posts += 1
        return web.Response(status=200)

    async def count(request: web.Request) -> web.Response:
        return web.Response(text=str(_Counter.posts))

    app = web.Application()
    app.router.add_post("/hook", hook)
    app.router.add_get("/count", count)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def _serve_uvicorn(port: int) -> None:
    import uvicorn

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        body = b""
        if scope["method"] == "POST":
            _Counter.posts += 1
        else:
            body = str(_Counter.posts).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


@contextlib.contextmanager
def http_target(server: str = "aiohttp") -> Iterator[str]:
    """Start the target server in a subprocess; yield its hook URL; stop it on exit."""
    if server not in SERVERS:
        raise ConfigError(f"--http-server takes one of {', '.join(SERVERS)}")
    try:
        __import__(server)
    except ImportError:
        raise ConfigError(
            f"--http-server {server} needs the package {server!r}: pip install {server}"
        ) from None
    port = free_port()
    argv = [sys.executable, "-m", "relayd.bench.http_target", "--server", server, "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    try:
        _wait_for(port, proc)
        yield f"http://127.0.0.1:{port}/hook"
    finally:
        stop_process(proc)


def _wait_for(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"the benchmark HTTP server did not start on port {port}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", choices=SERVERS, default="aiohttp")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    (_serve_aiohttp if args.server == "aiohttp" else _serve_uvicorn)(args.port)


if __name__ == "__main__":
    main()
