"""Liveness around slow and hung sinks, with real relayd and redis-server processes.

A webhook receiver that accepts and never answers: relayd's pass hangs on it for longer than
the liveness threshold, yet ``/healthz`` stays 200 while the request is within the webhook's own
timeout (the process and its event loop are alive; a restart would not fix the receiver), and
the pass-progress gauge shows no pass finishing. A sink that ignores its own timeout (a plugin
whose ``deliver`` never returns) turns ``/healthz`` 503, naming the sink: a hung process."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from faults.harness import RecordProperty, RelayProcess, sample
from support.health import healthz as healthz_answer
from support.redis_server import RedisServer
from support.waiting import wait_until

from relayd.observability.health import DEFAULT_STALE_AFTER_S
from store import Event, Execution, RedisStore

pytestmark = [pytest.mark.faults, pytest.mark.slow]

PREFIX = "hung"
#: How long the test watches /healthz while the pass hangs: past today's threshold and the old
#: one (a pass finished within 60 s), with room for a probe period.
WATCH_S = 66.0


class HungReceiver:
    """A TCP listener that accepts every connection, reads what comes and never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.requests = 0
        self.connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="hung-receiver", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        try:
            while data := conn.recv(65536):
                if b"POST " in data:
                    self.requests += 1
        except OSError:
            return

    def close(self) -> None:
        self.sock.close()
        for conn in self.connections:
            conn.close()


@pytest.fixture
def hung_receiver() -> Iterator[HungReceiver]:
    receiver = HungReceiver()
    yield receiver
    receiver.close()


def test_a_hung_webhook_never_fails_liveness(
    redis_process: RedisServer, hung_receiver: HungReceiver, tmp_path: Path, record_property: RecordProperty
) -> None:
    """One request held open for longer than the liveness threshold: /healthz answers 200
    throughout, and no pass finishes meanwhile (the gauge stands still)."""
    store = RedisStore(redis_process.client(), prefix=PREFIX)
    exe = Execution(id="exe-1", definition_id="hung.flow")
    store.commit(exe, [("target-1", Event(id="e-1", kind="ping", data={}))])
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", PREFIX, "--sink", f"webhook:{hung_receiver.url}",
            "--webhook-timeout", "300", "--lease-ttl", "2", "--poll-interval", "0.2",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    relay.start()
    try:
        wait_until(lambda: hung_receiver.requests >= 1, 30, "the webhook request to reach the receiver")
        hung_since = time.monotonic()
        last_pass = sample(relay.metrics(), "relayd_last_sweep_timestamp_seconds", prefix=PREFIX)
        answers: list[int] = []
        while time.monotonic() - hung_since < WATCH_S:
            answers.append(healthz_answer(relay.metrics_port)[0])
            time.sleep(1.0)
        last_pass_after = sample(relay.metrics(), "relayd_last_sweep_timestamp_seconds", prefix=PREFIX)
        alive = relay.alive
    finally:
        relay.stop()
    record_property("healthz_answers", f"{len(answers)} probes over {WATCH_S:g}s: {sorted(set(answers))}")

    assert WATCH_S > DEFAULT_STALE_AFTER_S
    assert alive, relay.log_tail()
    assert hung_receiver.requests == 1
    assert set(answers) == {200}, (answers, relay.log_tail())
    assert last_pass is not None  # the series exists: the equality below compares readings
    assert last_pass_after == last_pass


def _one_event(server: RedisServer) -> None:
    RedisStore(server.client(), prefix=PREFIX).commit(
        Execution(id="exe-1", definition_id="hung.flow"),
        [("target-1", Event(id="e-1", kind="ping", data={}))],
    )


def test_a_sink_past_its_own_timeout_fails_liveness_naming_it(
    redis_process: RedisServer, tmp_path: Path
) -> None:
    """The plugin declares 0.5 s and never returns: /healthz turns 503 once the call has run past
    its timeout plus --hung-sink-grace, and says which sink and for how long."""
    _one_event(redis_process)
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", PREFIX,
            "--sink", "python:tests.plugins.hanging_sink:HangingSink?timeout_s=0.5",
            "--hung-sink-grace", "1", "--lease-ttl", "2", "--poll-interval", "0.2", "--shutdown-grace", "1",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    relay.start()
    try:
        wait_until(
            lambda: healthz_answer(relay.metrics_port)[0] == 503, 30, "/healthz to fail on the hung sink"
        )
        status, body = healthz_answer(relay.metrics_port)
        alive = relay.alive
    finally:
        relay.stop()

    assert alive, relay.log_tail()
    assert status == 503
    assert body.startswith(f"delivery to sink 'hanging' (prefix {PREFIX!r}, outbox) running for "), body
    assert "past its timeout 0.5s + grace 1s" in body


def test_a_slow_webhook_within_its_timeout_stays_live(
    redis_process: RedisServer, hung_receiver: HungReceiver, tmp_path: Path
) -> None:
    """Its request runs past --hung-sink-grace but not past --webhook-timeout: 200 throughout."""
    _one_event(redis_process)
    grace_s = 0.5
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", PREFIX, "--sink", f"webhook:{hung_receiver.url}",
            "--webhook-timeout", "120", "--hung-sink-grace", str(grace_s),
            "--lease-ttl", "2", "--poll-interval", "0.2", "--shutdown-grace", "1",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    relay.start()
    try:
        wait_until(lambda: hung_receiver.requests >= 1, 30, "the webhook request to reach the receiver")
        held_since = time.monotonic()
        answers: list[int] = []
        # Past the grace several times over: a deadline of the grace alone would have failed by now.
        while time.monotonic() - held_since < 6 * grace_s or len(answers) < 5:
            answers.append(healthz_answer(relay.metrics_port)[0])
            time.sleep(0.2)
        still_held = hung_receiver.requests == 1
        alive = relay.alive
    finally:
        relay.stop()

    assert alive, relay.log_tail()
    assert still_held  # the one request was in flight throughout
    assert set(answers) == {200}, (answers, relay.log_tail())
