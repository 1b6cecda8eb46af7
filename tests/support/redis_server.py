"""A real redis-server on a free loopback port, for fixtures and tests that start their own."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from support.binaries import require_binaries
from support.processes import end_process


def free_port() -> int:
    """Return a TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    """A real redis-server process on loopback, owned by the test session."""

    port: int
    dir: Path
    args: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.dir),
            "--loglevel",
            "warning",
            *self.args,
        ]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                redis.Redis(port=self.port, socket_timeout=0.5).ping()
                return
            except redis.AuthenticationError:
                return  # it answered: a --requirepass server is up, it just wants the password
            except redis.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        end_process(self.proc)
        self.proc = None

    def cleanup(self) -> None:
        """Stop the server and remove its working directory."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(port=self.port, **kwargs)


def require_redis_server() -> str:
    """Return the redis-server path; skip (a failure under ``CI``) when it is missing."""
    return require_binaries("redis-server")["redis-server"]


def start_redis_server(*args: str) -> RedisServer:
    """Start a fresh redis-server on a free loopback port (caller stops it)."""
    require_redis_server()
    server = RedisServer(port=free_port(), dir=Path(tempfile.mkdtemp(prefix="relayd-redis-")), args=args)
    server.start()
    return server
