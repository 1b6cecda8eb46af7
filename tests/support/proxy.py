"""A TCP proxy on loopback that a test switches between passing, cutting and blackholing traffic.

``TcpProxy(upstream_port)`` listens on a free 127.0.0.1 port and forwards every connection to
the upstream (normally a redis-server). Modes, switchable at any time from the test thread
(``set_mode`` returns once the switch has taken effect):

``pass``       forward both ways.
``cut``        close every connection and stop listening, so new connects are refused (RST);
               like a process or host going away.
``blackhole``  listen and accept, but forward nothing in either direction: bytes wait (at most
               one read buffer per direction and connection; the rest stays in the kernel and
               TCP backpressure holds the sender), like a partition. Going back to ``pass``
               releases what was held, as TCP retransmission would after a partition heals.

The proxy runs its own asyncio loop in a daemon thread; at most ``max_connections`` are held
at once (more are closed on accept). ``stop()`` (or leaving the ``with`` block) closes
everything and joins the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

Mode = Literal["pass", "cut", "blackhole"]
MODES: tuple[Mode, ...] = ("pass", "cut", "blackhole")

#: Bytes read per chunk and direction; also the most a blackholed direction holds in memory.
CHUNK_BYTES = 64 * 1024
#: How long a call from the test thread waits for the proxy loop, in seconds.
CALL_TIMEOUT_S = 5.0


@dataclass(eq=False)
class _Link:
    """One client connection and (once connected) its upstream twin."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    task: asyncio.Task[Any] | None = field(default=None, repr=False)

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()


class TcpProxy:
    """A loopback TCP proxy in front of ``upstream_host:upstream_port``."""

    def __init__(
        self,
        upstream_port: int,
        *,
        upstream_host: str = "127.0.0.1",
        max_connections: int = 64,
        mode: Mode = "pass",
    ) -> None:
        self.upstream_host, self.upstream_port = upstream_host, upstream_port
        self.max_connections = max_connections
        self._mode: Mode = mode
        self.port = 0
        #: connections accepted / closed on accept because the proxy was full (counters)
        self.accepted = 0
        self.rejected = 0
        self._links: set[_Link] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._flowing: asyncio.Event | None = None

    # -- test-thread API -----------------------------------------------------------------

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:P`` through the proxy."""
        return f"redis://127.0.0.1:{self.port}"

    @property
    def open_connections(self) -> int:
        return len(self._links)

    def start(self) -> None:
        """Start the loop thread and listen; ``port`` is set when this returns."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)
        self._thread.start()
        self._call(self._setup())

    def set_mode(self, mode: Mode) -> None:
        """Switch mode; returns once cut connections are closed and the listener is in place."""
        if mode not in MODES:
            raise ValueError(f"unknown proxy mode {mode!r}; known: {', '.join(MODES)}")
        self._call(self._switch(mode))

    def stop(self) -> None:
        """Close every connection and the listener, stop the loop, join the thread (idempotent)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            self._call(self._shutdown())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(CALL_TIMEOUT_S)
            loop.close()
            self._loop = self._thread = None

    def __enter__(self) -> TcpProxy:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _call(self, coro: Coroutine[object, object, None]) -> None:
        assert self._loop is not None, "proxy not started"
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(CALL_TIMEOUT_S)

    # -- loop side -----------------------------------------------------------------------

    async def _setup(self) -> None:
        self._flowing = asyncio.Event()
        if self._mode == "pass":
            self._flowing.set()
        # listen even when starting cut: the port is reserved, so the test knows where to point
        # its client before the fault ends
        await self._listen()
        if self._mode == "cut":
            await self._close_listener()

    async def _listen(self) -> None:
        # the same port again after a cut, so clients reconnect where they were
        self._server = await asyncio.start_server(
            self._handle, "127.0.0.1", self.port, reuse_address=True, backlog=self.max_connections
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _close_listener(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _switch(self, mode: Mode) -> None:
        assert self._flowing is not None
        self._mode = mode
        if mode == "cut":
            await self._close_listener()
            await self._drop_all()
            return
        if self._server is None:
            await self._listen()
        if mode == "pass":
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _drop_all(self) -> None:
        links = list(self._links)
        for link in links:
            link.abort()
            if link.task is not None:
                link.task.cancel()
        tasks = [link.task for link in links if link.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _shutdown(self) -> None:
        self._mode = "cut"
        await self._close_listener()
        await self._drop_all()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._mode == "cut" or len(self._links) >= self.max_connections:
            self.rejected += 1
            writer.transport.abort()
            return
        self.accepted += 1
        link = _Link(client=writer, task=asyncio.current_task())
        self._links.add(link)
        try:
            assert self._flowing is not None
            await self._flowing.wait()  # a blackholed connect is held before it reaches upstream
            up_reader, link.upstream = await asyncio.open_connection(self.upstream_host, self.upstream_port)
            pipes = {
                asyncio.create_task(self._pipe(reader, link.upstream)),
                asyncio.create_task(self._pipe(up_reader, writer)),
            }
            try:
                # either side closing ends the link: the other pipe is cancelled
                await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pipe in pipes:
                    pipe.cancel()
                await asyncio.gather(*pipes, return_exceptions=True)
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            link.abort()
            self._links.discard(link)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        with contextlib.suppress(OSError):
            while data := await source.read(CHUNK_BYTES):
                await self._flowing.wait()
                sink.write(data)
                await sink.drain()
