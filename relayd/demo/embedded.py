"""An embedded Redis for ``relayd demo`` and ``relayd bench``: fakeredis over real TCP, in a thread.

The relay talks to it over a socket exactly as it would to redis-server (Lua runs through lupa).
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Self

import fakeredis


class EmbeddedRedis:
    """fakeredis's ``TcpFakeServer`` on a free loopback port, served from a daemon thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = fakeredis.TcpFakeServer((host, port), server_type="redis", server_version=(7, 0))
        # Replies go out as several small writes: with Nagle's algorithm and delayed ACKs every
        # WATCH/MULTI/EXEC round-trip waits for the peer's delayed ACK (the demo's commit rate).
        handler: type = self._server.RequestHandlerClass  # type: ignore[assignment]  # a class, typed as a callable
        self._server.RequestHandlerClass = type(
            "NoDelayRequestHandler", (handler,), {"disable_nagle_algorithm": True}
        )
        self.host = host
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="embedded-redis", daemon=True)
        self._thread.start()

    @property
    def fake_server(self) -> fakeredis.FakeServer:
        """The in-process server behind the socket (for a test's direct ``FakeRedis`` client)."""
        return self._server.fake_server

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
