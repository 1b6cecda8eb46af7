"""A real redis-server on a free loopback port, for fixtures and tests that start their own."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from support.binaries import require_binaries
from support.ports import free_port
from support.processes import end_process
from support.waiting import wait_until


@dataclass
class RedisServer:
    """A real redis-server on loopback, owned by a test or the session.

    It can be stopped (SIGTERM: a clean shutdown, AOF flushed) or killed (SIGKILL) and started
    again on the same port and directory, so it comes back where it was (with AOF when its
    ``args`` ask). Without a port it picks a free one at its first start.
    """

    dir: Path
    port: int = 0
    args: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> None:
        if not self.port:
            self.port = free_port()
        self.dir.mkdir(parents=True, exist_ok=True)
        argv = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
            "--save", "", "--appendonly", "no", "--loglevel", "warning", *self.args,
        ]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self._answers, timeout_s, f"redis-server on {self.port}", poll_s=0.02)

    def _answers(self) -> bool:
        """This very process answers (not one left over on the port); it may want a password."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"redis-server on {self.port} exited with {self.proc.returncode}")
        client = self.client(socket_timeout=0.5)
        try:
            return bool(client.info("server").get("process_id") == self.proc.pid)
        except redis.AuthenticationError:
            return True  # it answered: a --requirepass server is up, it just wants the password
        except redis.RedisError:
            return False
        finally:
            client.close()

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """End the server (SIGTERM: a clean shutdown) and reap it."""
        end_process(self.proc, signum, wait_s=10)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: no shutdown at all."""
        self.stop(signal.SIGKILL)

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
    server = RedisServer(dir=Path(tempfile.mkdtemp(prefix="relayd-redis-")), args=args)
    server.start()
    return server
