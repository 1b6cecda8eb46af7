"""A forward proxy on loopback that tunnels ``CONNECT host:port``, for the webhook proxy tests.

``ConnectProxy(credentials=("user", "password"))`` listens on a free 127.0.0.1 port on a loop of
its own in a daemon thread. A ``CONNECT`` whose ``Proxy-Authorization`` is the Basic form of the
credentials (any, when none are set) is answered ``200 Connection established`` and then piped
both ways to its target; a wrong or missing one is answered ``407`` with ``Proxy-Authenticate``.
A request in absolute form (``POST http://host:port/path``, a plain ``http://`` target) is
authorized alike, then sent to its target in origin form with ``Connection: close`` and the
answer relayed, after which the client's connection is closed (one request per connection).

``tunnels`` lists the ``host:port`` of every tunnel opened, ``forwarded`` the URL of every plain
request, ``refused`` counts the 407s.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
from types import TracebackType
from urllib.parse import urlsplit

#: How long a call from the test thread waits for the proxy loop, in seconds.
CALL_TIMEOUT_S = 5.0
#: Bytes read per chunk and direction.
CHUNK_BYTES = 64 * 1024


class ConnectProxy:
    """A CONNECT-only forward proxy on 127.0.0.1 (see the module docstring)."""

    def __init__(self, *, credentials: tuple[str, str] | None = None) -> None:
        self.credentials = credentials
        self.port = 0
        self.tunnels: list[str] = []
        self.forwarded: list[str] = []
        self.refused = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ConnectProxy:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="connect-proxy", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(CALL_TIMEOUT_S)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._close(), loop).result(CALL_TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(CALL_TIMEOUT_S)
        loop.close()
        self._loop = self._thread = None

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _authorized(self, headers: dict[str, str]) -> bool:
        if self.credentials is None:
            return True
        expected = base64.b64encode(":".join(self.credentials).encode()).decode()
        return headers.get("proxy-authorization") == f"Basic {expected}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        try:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
                await self._serve(reader, writer)
        finally:
            writer.transport.abort()
            self._tasks.discard(task)  # type: ignore[arg-type]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:  # answers on one connection until a tunnel takes it over
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *lines = head.decode("latin-1").split("\r\n")
            method, target, _version = request_line.split(" ", 2)
            headers = {}
            for line in lines:
                name, _, value = line.partition(":")
                if name:
                    headers[name.strip().lower()] = value.strip()
            body = b""
            if method != "CONNECT":
                body = await reader.readexactly(int(headers.get("content-length", "0")))
            if not self._authorized(headers):
                self.refused += 1
                writer.write(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n'
                )
                await writer.drain()
                continue
            if method != "CONNECT":
                await self._forward(method, target, lines, body, writer)
                return
            host, _, port = target.rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            self.tunnels.append(target)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.transport.abort()
            return

    async def _forward(
        self, method: str, url: str, lines: list[str], body: bytes, writer: asyncio.StreamWriter
    ) -> None:
        parts = urlsplit(url)
        self.forwarded.append(url)
        kept = [
            line
            for line in lines
            if line and line.partition(":")[0].strip().lower() not in {"proxy-authorization", "connection"}
        ]
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        head = "\r\n".join([f"{method} {path or '/'} HTTP/1.1", *kept, "Connection: close", "", ""])
        up_reader, up_writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        try:
            up_writer.write(head.encode("latin-1") + body)
            await up_writer.drain()
            writer.write(await up_reader.read())  # until the target closes: Connection: close
            writer.close()  # gracefully: an abort would drop what is still buffered
            await writer.wait_closed()
        finally:
            up_writer.transport.abort()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await source.read(CHUNK_BYTES):
            sink.write(data)
            await sink.drain()
    with contextlib.suppress(OSError):
        sink.write_eof()
