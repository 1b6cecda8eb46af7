"""The webhook receiver answers 503 for about half a minute while the engine keeps committing.

A real HTTP server on 127.0.0.1 plays the receiver. During the outage the backlog and
``relayd_oldest_due_age_seconds`` (scraped from the relay's /metrics) must rise; when it
heals, everything drains, and what the receiver accepted keeps per-target order: outbox
events of one target in seq order, timers of one execution in fire_at order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson
import pytest
from faults.harness import RecordProperty, RelayProcess, sample
from support.harel_backlog import order_violations
from support.ledger import assert_ledger, ledger_from_jsonl, report_ledger, wait_delivered
from support.redis_server import RedisServer
from support.waiting import wait_until
from support.workload import Workload

from store import RedisStore

pytestmark = [pytest.mark.faults, pytest.mark.slow]

#: How long the receiver answers 503, in seconds.
OUTAGE_S = 24.0
PREFIX = "hook"


class Receiver(ThreadingHTTPServer):
    """Accepts envelopes while healthy (appending them to a jsonl file), else answers 503."""

    daemon_threads = True

    def __init__(self, out: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.out = out
        self.healthy = True
        self.accepted: list[dict[str, object]] = []
        self.refused = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            if self.server.healthy:
                envelope = orjson.loads(body)
                assert envelope["id"] == self.headers["Idempotency-Key"]
                self.server.accepted.append(envelope)
                with self.server.out.open("ab") as handle:
                    handle.write(body + b"\n")
                status = 200
            else:
                self.server.refused += 1
                status = 503
        self.send_response(status)
        if status == 503:
            self.send_header("Retry-After", "1")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reports what matters."""


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    server = Receiver(tmp_path / "accepted.jsonl")
    thread = threading.Thread(target=server.serve_forever, name="receiver", daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_webhook_503_for_half_a_minute_backlog_rises_then_drains_in_order(
    redis_process: RedisServer, receiver: Receiver, tmp_path: Path, record_property: RecordProperty
) -> None:
    workload = Workload(
        RedisStore(redis_process.client(), prefix=PREFIX), rate_per_s=40, executions=6, seed=3
    )
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", PREFIX, "--sink", f"webhook:{receiver.url}",
            "--max-attempts", "1000", "--lease-ttl", "2", "--poll-interval", "0.2", "--log-level", "warning",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip

    def gauges() -> tuple[float, float]:
        samples = relay.metrics()
        backlog = sample(samples, "relayd_backlog_entries", prefix=PREFIX, kind="outbox")
        age = sample(samples, "relayd_oldest_due_age_seconds", prefix=PREFIX, kind="outbox")
        return backlog or 0.0, age or 0.0

    relay.start()
    workload.start()
    try:
        wait_until(lambda: len(receiver.accepted) > 50, 30, "deliveries while healthy")
        receiver.healthy = False
        time.sleep(5)
        early = gauges()
        time.sleep(OUTAGE_S - 6)
        late = gauges()
        time.sleep(1)
        receiver.healthy = True
        healed = time.monotonic()
        time.sleep(2)  # the engine keeps committing a little after the receiver healed
        ledger_in = workload.stop()
        recover_s = wait_delivered(receiver.out, ledger_in.committed, since=healed, timeout_s=75)
        wait_until(lambda: gauges()[0] == 0, 10, "the backlog gauge back at 0")
        after = gauges()
    finally:
        workload.stop()
        relay.stop()

    ledger = ledger_from_jsonl("webhook-503", ledger_in.committed, receiver.out, recover_s=recover_s)
    report_ledger(ledger, record_property)
    print(
        f"outbox backlog/oldest_age_s: 5s_in={early} end_of_outage={late} drained={after} "
        f"refused_503={receiver.refused}"
    )
    assert_ledger(ledger)
    assert late[0] > early[0] > 0, "the backlog must rise during the outage"
    assert late[1] > early[1] > 0, "the oldest due entry must age during the outage"
    assert late[1] >= OUTAGE_S / 2
    assert after[1] < early[1]
    assert order_violations(receiver.accepted) == []
