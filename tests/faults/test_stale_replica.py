"""A replica frozen mid-batch past its lease, then resumed, neither sends nor acks again.

Two real ``relayd sweep`` processes (``--lease-ttl 2``) relay one prefix's outbox to a slow local
aiohttp receiver, each to its own path, so every request names the replica that sent it. The
receiver itself freezes the active replica (SIGSTOP) while handling one of its requests, so a
batch is in flight at that moment. The standby takes over and delivers; the frozen one is
resumed (SIGCONT) while the standby still drains. Redis ``MONITOR`` records every command, and
the frozen replica's connections are known by their local ports (``/proc``), so its acks are
seen where they count: a write (``HDEL``, ``ZREM``, ``HSET``) it sent, or a script it called
ran, after the resume.

After the resume: no request from it, no entry deleted for it, nothing lost, and the first
receipt of each entry in its target's seq order.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from aiohttp import web
from faults.harness import RecordProperty, RelayProcess, sample, seed_backlog
from support.harel_backlog import order_violations
from support.redis_server import RedisServer
from support.replicas import wait_new_holder
from support.sockets import local_tcp_ports
from support.waiting import wait_until

from store import Keyspace

pytestmark = [pytest.mark.faults, pytest.mark.crash, pytest.mark.slow]

PREFIX = "fence"
ENTRIES = 1000
#: Each request is answered this late (seconds): the replica always has a batch in flight.
REPLY_DELAY_S = 0.05
LEASE_TTL_S = 2.0
#: The active replica is frozen on its receipt of this many requests.
FREEZE_AT = 120
#: How long it stays frozen (seconds): well past the lease TTL.
FROZEN_S = 5.0
#: How long the resumed replica is watched after everything was delivered (seconds).
WATCH_AFTER_S = 3.0
#: The commands that ack, dead-letter or record attempts ...
WRITES = {"HDEL", "ZREM", "HSET"}
#: ... on these keys (not the members registry, which a replica leaves on its way out).
_KS = Keyspace(PREFIX)
ENTRY_KEYS = (_KS.outbox, _KS.spawns, _KS.timers, _KS.relay("attempts:"), _KS.relay("dead:"))


@dataclass(frozen=True, slots=True)
class Hit:
    """One request as the receiver got it (``at_s``: monotonic, when its handler started)."""

    replica: str
    at_s: float
    envelope: dict[str, object]


@dataclass
class Receiver:
    """An aiohttp server in a thread: ``POST /{replica}`` answers 200 after ``REPLY_DELAY_S``."""

    hits: list[Hit] = field(default_factory=list)
    #: Called (from the server's thread) with each hit before it is answered.
    on_hit: list[object] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _runner: web.AppRunner | None = None

    def url(self, replica: str) -> str:
        return f"http://127.0.0.1:{self.port}/{replica}"

    def count(self, replica: str) -> int:
        return sum(1 for h in list(self.hits) if h.replica == replica)

    def ids(self) -> set[str]:
        return {str(h.envelope["id"]) for h in list(self.hits)}

    async def _handle(self, request: web.Request) -> web.Response:
        at_s = time.monotonic()
        envelope = orjson.loads(await request.read())
        hit = Hit(request.match_info["replica"], at_s, envelope)
        self.hits.append(hit)
        for callback in self.on_hit:
            callback(hit)  # type: ignore[operator]
        await asyncio.sleep(REPLY_DELAY_S)
        return web.Response(status=200)

    def start(self) -> None:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            app = web.Application()
            app.router.add_post("/{replica}", self._handle)
            self._runner = web.AppRunner(app, access_log=None)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="receiver", daemon=True)
        self._thread.start()
        ready.wait(10)

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)


@dataclass(frozen=True, slots=True)
class Command:
    """One ``MONITOR`` line: when (Redis epoch s), from which client port, and the command."""

    at: float
    port: int | None  # None for a command a script ran
    name: str
    args: str


class Monitor:
    """Every command Redis runs, recorded from a thread; a script's commands are attributed to
    the client whose ``EVAL``/``EVALSHA`` came just before them (Redis runs one at a time)."""

    def __init__(self, server: RedisServer) -> None:
        # No read timeout (redis-py's default is 5 s): Redis may run nothing for a while.
        self.client = server.client(socket_timeout=None)
        self.commands: list[tuple[Command, int | None]] = []  # (command, port of the caller)
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="monitor", daemon=True)

    def __enter__(self) -> Monitor:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.client.ping()  # a command of our own ends the blocking read
        self._thread.join(10)

    def _run(self) -> None:
        caller: int | None = None
        with self.client.monitor() as monitor:
            self._ready.set()
            while not self._stop.is_set():
                line = monitor.next_command()
                command = str(line["command"])
                name, _, args = command.partition(" ")
                is_script = line.get("client_type") == "lua"
                port = None if is_script else int(line["client_port"]) if line.get("client_port") else None
                if not is_script:
                    caller = port
                self.commands.append((Command(float(line["time"]), port, name.upper(), args), caller))

    def writes_by(self, ports: set[int], *, after: float) -> list[Command]:
        """Writes (``WRITES``) at or after ``after`` by a client on ``ports``, sent directly or
        run by a script it called."""
        return [
            c
            for c, caller in list(self.commands)
            if c.name in WRITES
            and c.args.startswith(ENTRY_KEYS)
            and c.at >= after
            and (c.port in ports or (c.port is None and caller in ports))
        ]

    def calls_by(self, ports: set[int], *, after: float) -> list[Command]:
        """Every command a client on ``ports`` sent at or after ``after``."""
        return [c for c, _ in list(self.commands) if c.port in ports and c.at >= after]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    server.start()
    yield server
    server.stop()


def _replica(name: str, redis: RedisServer, receiver: Receiver, tmp_path: Path) -> RelayProcess:
    return RelayProcess(
        [
            "--redis-url", redis.url, "--prefix", PREFIX, "--sink", f"webhook:{receiver.url(name)}",
            "--lease-ttl", str(LEASE_TTL_S), "--poll-interval", "0.2", "--batch", "50",
            "--log-format", "json", "--log-level", "info",
        ],
        tmp_path / f"{name}.log",
    )  # fmt: skip


def test_a_replica_frozen_mid_batch_past_its_lease_neither_sends_nor_acks_when_resumed(
    redis_process: RedisServer, receiver: Receiver, tmp_path: Path, record_property: RecordProperty
) -> None:
    client = redis_process.client()
    backlog = seed_backlog(
        client, PREFIX, outbox=ENTRIES, spawns=0, timers=0, targets=12, fire_at=time.time()
    )
    lease_key = Keyspace(PREFIX).relay("lease")
    first, second = (
        _replica("first", redis_process, receiver, tmp_path),
        _replica("second", redis_process, receiver, tmp_path),
    )
    frozen = threading.Event()

    def freeze_mid_batch(hit: Hit) -> None:
        # In the handler, before the answer: the replica waits on this very request.
        if hit.replica == "first" and not frozen.is_set() and receiver.count("first") >= FREEZE_AT:
            assert first.proc is not None
            os.kill(first.proc.pid, signal.SIGSTOP)
            frozen.set()

    receiver.on_hit.append(freeze_mid_batch)
    with Monitor(redis_process) as monitor:
        try:
            first.start()
            wait_until(lambda: receiver.count("first") > 0, 60, "the first replica delivering")
            second.start()
            wait_until(second.metrics, 60, "the standby serving /metrics")
            wait_until(frozen.is_set, 120, "the first replica frozen mid-batch")
            frozen_at_s = time.monotonic()
            assert first.proc is not None
            first_ports = local_tcp_ports(first.proc.pid, remote_port=redis_process.port)
            took_over_s, holder = wait_new_holder(client, lease_key, not_pids=[first.proc.pid], timeout_s=60)
            wait_until(lambda: receiver.count("second") > 0, 60, "the standby delivering")
            time.sleep(max(0.0, FROZEN_S - (time.monotonic() - frozen_at_s)))
            resumed_at, resumed_at_s = time.time(), time.monotonic()
            first.proc.send_signal(signal.SIGCONT)
            wait_until(lambda: receiver.ids() >= set(backlog.committed), 120, "every entry delivered")
            wait_until(lambda: client.hlen(Keyspace(PREFIX).outbox) == 0, 60, "every entry acked")
            time.sleep(WATCH_AFTER_S)
            first_ports |= local_tcp_ports(first.proc.pid, remote_port=redis_process.port)
            first_metrics = first.metrics()
        finally:
            first.stop()
            second.stop()
    hits = sorted(receiver.hits, key=lambda h: h.at_s)
    sent_after = [h for h in hits if h.replica == "first" and h.at_s >= resumed_at_s]
    acked_after = monitor.writes_by(first_ports, after=resumed_at)
    calls_after = monitor.calls_by(first_ports, after=resumed_at)
    refused = (
        sample(first_metrics, "relayd_fenced_total", prefix=PREFIX, kind="outbox", reason="ack_refused") or 0
    )
    expired = (
        sample(first_metrics, "relayd_fenced_total", prefix=PREFIX, kind="outbox", reason="ack_expired") or 0
    )
    record_property(
        "ledger",
        f"frozen after {FREEZE_AT} requests; standby held the lease {took_over_s - frozen_at_s:.1f}s later "
        f"(pid {holder}); after the resume the frozen replica sent {len(sent_after)} requests, "
        f"{len(calls_after)} Redis commands, {len(acked_after)} script writes; fenced acks: "
        f"{expired:g} entries by its deadline, {refused:g} refused by Redis",
    )

    assert first_ports, "the frozen replica's Redis connections were found"
    after_resume = {"requests": [h.envelope["id"] for h in sent_after], "acks": acked_after}
    assert after_resume == {"requests": [], "acks": []}
    assert receiver.ids() == set(backlog.committed), "nothing lost"
    assert client.hlen(Keyspace(PREFIX).outbox) == 0
    assert order_violations(h.envelope for h in hits) == []
    assert "ack_fenced" in first.log_tail(200_000) or "send_fenced" in first.log_tail(200_000)
