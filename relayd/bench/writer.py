"""The steady suite's paced writer: commits to one prefix at a steady rate, as the store does.

Each commit is an ``INCR`` of ``P:outbox:seq``, then the commit's own ``MULTI`` / ``HSET`` /
``EXEC``, with the commit time (epoch seconds) in the event's data as ``committed_at``. Commits
due in the same millisecond go out in one write (one pipelined ``INCR`` round-trip, then their
transactions) over a plain socket speaking RESP, so one process keeps up with tens of thousands
a second. It runs as its own process (``python -m relayd.bench.writer URL PREFIX RATE
SECONDS``), so its CPU is nobody's figure, and prints how many commits it made.
"""

from __future__ import annotations

import socket
import sys
import time
from typing import Any, Final
from urllib.parse import unquote, urlsplit

import hiredis
import orjson

from relayd.bench.stats import COMMITTED_AT

#: Executions the commits are spread over (each commit targets one).
TARGETS: Final = 64


def command(*parts: bytes) -> bytes:
    """One command in RESP."""
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(part), part))
    return b"".join(out)


class RawConnection:
    """A plain socket speaking RESP: the writer's pipelined commands cost it a few µs each."""

    def __init__(self, url: str) -> None:
        found = urlsplit(url)
        if found.scheme != "redis" or not found.hostname:
            raise ValueError(f"the steady writer needs a plain redis://host:port URL, not {url!r}")
        self.sock = socket.create_connection((found.hostname, found.port or 6379))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = hiredis.Reader()
        setup: list[bytes] = []
        if found.password:
            user = unquote(found.username or "default")
            setup.append(command(b"AUTH", user.encode(), unquote(found.password).encode()))
        db = found.path.strip("/")
        if db and db != "0":
            setup.append(command(b"SELECT", db.encode()))
        for reply in self.call(b"".join(setup), len(setup)):
            if isinstance(reply, Exception):
                raise reply

    def call(self, payload: bytes, replies: int) -> list[Any]:
        if replies:
            self.sock.sendall(payload)
        out: list[Any] = []
        while len(out) < replies:
            reply = self.reader.gets()
            if reply is False:
                self.reader.feed(self.sock.recv(1 << 20))
                continue
            out.append(reply)
        return out


def write(url: str, prefix: str, rate: int, seconds: float) -> int:
    """Commit ``rate`` times a second for ``seconds``; return how many commits went out."""
    conn = RawConnection(url)
    seq_key, hash_key = f"{prefix}:outbox:seq".encode(), f"{prefix}:outbox".encode()
    incr, multi, exec_ = command(b"INCR", seq_key), command(b"MULTI"), command(b"EXEC")
    started = time.monotonic()
    sent = 0
    while True:
        elapsed = time.monotonic() - started
        if elapsed >= seconds:
            break
        due = int(rate * elapsed) - sent
        if due <= 0:
            time.sleep(0.0002)
            continue
        seqs = conn.call(incr * due, due)
        now = time.time()
        parts: list[bytes] = []
        for seq in seqs:
            event = {"id": f"e{seq}", "kind": "Tick", "data": {COMMITTED_AT: now}}
            value = orjson.dumps({"t": f"exe-{seq % TARGETS}", "e": orjson.dumps(event).decode()})
            parts += (multi, command(b"HSET", hash_key, b"%d" % seq, value), exec_)
        conn.call(b"".join(parts), 3 * due)
        sent += due
    return sent


def main(argv: list[str]) -> None:
    url, prefix, rate, seconds = argv
    print(write(url, prefix, int(rate), float(seconds)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
