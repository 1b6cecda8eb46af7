"""The Redis a benchmark runs on: a throwaway redis-server, the embedded fakeredis, or a given URL.

Also the probes the benchmark takes of that Redis (INFO commandstats and CPU) and the clean-up
of every key under a throwaway prefix.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import redis

from relayd.bench.stats import parse_commandstats
from store import glob_escape

#: How long a started redis-server may take to answer PING.
_START_TIMEOUT_S: Final = 10.0
#: Keys deleted per UNLINK while cleaning a prefix.
_CLEAN_CHUNK: Final = 1000


@dataclass(frozen=True, slots=True)
class BenchRedis:
    """Where the benchmark runs: its URL and what kind of server answers there."""

    url: str
    flavour: str  # "redis-server (started)", "embedded fakeredis", or "given"


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for a server the bench starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def bench_redis(url: str | None) -> Iterator[BenchRedis]:
    """Yield the Redis to benchmark on; a server started here is stopped on exit.

    With no ``url``: a ``redis-server`` on a free loopback port when one is on PATH (no
    persistence), else fakeredis's ``TcpFakeServer`` in a thread (no INFO: no command counts).
    """
    if url is not None:
        yield BenchRedis(url, "given")
        return
    binary = shutil.which("redis-server")
    if binary is not None:
        with _redis_server(binary) as port:
            yield BenchRedis(f"redis://127.0.0.1:{port}/0", "redis-server (started)")
        return
    with _embedded() as port:
        yield BenchRedis(f"redis://127.0.0.1:{port}/0", "embedded fakeredis")


@contextlib.contextmanager
def _redis_server(binary: str) -> Iterator[int]:
    with throwaway_redis_server(binary) as proc_port:
        yield proc_port[1]


@contextlib.contextmanager
def throwaway_redis_server(
    binary: str = "redis-server",
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A redis-server without persistence on a free loopback port: ``(process, port)``."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="relayd-bench-") as workdir:
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        proc = subprocess.Popen(
            [*argv, "--dir", workdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            _wait_for(port, proc)
            yield proc, port
        finally:
            stop_process(proc)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM a server the bench started, SIGKILL it if it has not gone within five seconds."""
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_for(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(redis.ConnectionError), redis.Redis(port=port, socket_timeout=0.5) as probe:
            probe.ping()
            return
        time.sleep(0.02)
    raise RuntimeError(f"redis-server did not start on port {port}")


@contextlib.contextmanager
def _embedded() -> Iterator[int]:
    from relayd.demo.embedded import EmbeddedRedis

    with EmbeddedRedis() as server:
        yield server.port


def command_calls(client: redis.Redis) -> dict[str, int] | None:
    """Calls per command so far (INFO commandstats); None when the server has no INFO."""
    try:
        return parse_commandstats(client.info("commandstats"))
    except redis.ResponseError:
        return None


def server_cpu_s(client: redis.Redis) -> float | None:
    """CPU seconds the server has used so far (user + system); None without INFO."""
    try:
        info: dict[str, Any] = client.info("cpu")
    except redis.ResponseError:
        return None
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def delete_prefix(client: redis.Redis, prefix: str) -> int:
    """UNLINK every key under ``prefix:`` (SCAN, so it works on a shared server); return how many."""
    deleted = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=f"{glob_escape(prefix)}:*", count=_CLEAN_CHUNK):
        batch.append(key)
        if len(batch) >= _CLEAN_CHUNK:
            deleted += int(client.delete(*batch))
            batch.clear()
    if batch:
        deleted += int(client.delete(*batch))
    return deleted
