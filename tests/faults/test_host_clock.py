"""The relay host's clock two minutes off (libfaketime): timers still come due by Redis's clock.

``relayd sweep`` runs with libfaketime preloaded, ``FAKETIME=+120s`` (and ``-120s``;
``support.faketime``); redis-server and this test do not. libfaketime moves ``time.time()`` and,
by default, ``time.monotonic()`` too (by a constant: intervals stay true), so both of the relay's
clocks are off. Timers are armed to fire a few seconds ahead by Redis ``TIME``; a local HTTP
receiver asks Redis ``TIME`` when each arrives. None may arrive before its ``fire_at``, nor later
than the poll interval plus ``SLACK_S`` (room for a loaded two-core machine: the relay sleeps
until the next timer is due, so on a quiet machine each arrives within milliseconds).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
from faults.harness import RecordProperty, scrape
from support.faketime import faked_clock, faked_offset_s
from support.ports import free_port
from support.processes import end_process
from support.redis_server import RedisServer
from support.waiting import wait_until

from store import Keyspace, timer_member

pytestmark = [pytest.mark.faults, pytest.mark.slow]

PREFIX = "clock"
POLL_INTERVAL_S = 1.0
#: Lateness allowed beyond the poll interval (seconds), for a busy machine.
SLACK_S = 3.0
#: Timers fire this many seconds after they are armed, by Redis's clock.
FIRE_IN_S = (3.0, 5.0, 7.0)
#: How far libfaketime moves the relay host's clock (seconds).
SHIFT_S = 120


class Receiver(ThreadingHTTPServer):
    """Records each envelope with Redis ``TIME`` at its arrival (epoch seconds)."""

    daemon_threads = True

    def __init__(self, redis_client: Any) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.redis = redis_client
        self.lock = threading.Lock()
        self.arrivals: list[tuple[dict[str, Any], float]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/timers"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            seconds, micros = self.server.redis.time()
            self.server.arrivals.append((orjson.loads(body), seconds + micros / 1_000_000))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reports what matters."""


@pytest.fixture
def receiver(redis_process: RedisServer) -> Iterator[Receiver]:
    server = Receiver(redis_process.client())
    thread = threading.Thread(target=server.serve_forever, name="receiver", daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def _redis_now(client: Any) -> float:
    seconds, micros = client.time()
    return float(seconds + micros / 1_000_000)


@pytest.mark.parametrize("shift", [f"+{SHIFT_S}s", f"-{SHIFT_S}s"])
def test_timers_fire_by_redis_time_whatever_the_relay_hosts_clock_says(
    shift: str,
    redis_process: RedisServer,
    receiver: Receiver,
    tmp_path: Path,
    record_property: RecordProperty,
) -> None:
    faking = faked_clock(shift)
    assert abs(faked_offset_s(faking) - float(shift[:-1])) < 10, "libfaketime moves the child's clock"
    client = redis_process.client()
    metrics_port = free_port()
    argv = [
        shutil.which("relayd") or "relayd", "sweep",
        "--redis-url", redis_process.url, "--prefix", PREFIX, "--sink", f"webhook:{receiver.url}",
        "--poll-interval", str(POLL_INTERVAL_S), "--lease-ttl", "3",
        "--metrics-addr", f"127.0.0.1:{metrics_port}", "--log-format", "json",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")} | faking
    with (tmp_path / "relay.log").open("wb") as log:
        relay = subprocess.Popen(argv, stdout=log, stderr=log, env=env, start_new_session=True)
    try:
        wait_until(
            lambda: scrape(metrics_port).get(("relayd_active", (("prefix", PREFIX),))) == 1,
            60,
            "the relay holding the lease",
        )
        armed_at = _redis_now(client)
        fire_ats = {f"exe-{n}": round(armed_at + delay, 3) for n, delay in enumerate(FIRE_IN_S)}
        client.zadd(Keyspace(PREFIX).timers, {timer_member(exe, "wait"): at for exe, at in fire_ats.items()})
        wait_until(
            lambda: len(receiver.arrivals) >= len(fire_ats),
            max(FIRE_IN_S) + POLL_INTERVAL_S + SLACK_S + 30,
            "every timer delivered",
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(relay.pid, signal.SIGTERM)
        end_process(relay)
    lateness_s = {
        envelope["execution_id"]: round(arrived - fire_ats[envelope["execution_id"]], 3)
        for envelope, arrived in receiver.arrivals
    }
    record_property("ledger", f"host clock {shift}: lateness by Redis TIME {lateness_s}")

    assert sorted(lateness_s) == sorted(fire_ats)
    early = {exe: late for exe, late in lateness_s.items() if late < 0}
    too_late = {exe: late for exe, late in lateness_s.items() if late > POLL_INTERVAL_S + SLACK_S}
    assert (early, too_late) == ({}, {})
