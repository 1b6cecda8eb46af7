"""moto stopped and restarted while ``relayd sweep`` drains into SQS: nothing the relay acked is lost.

moto keeps nothing across a restart, so what it held unread when it stopped is gone with it;
the ledger therefore counts three things: what the relay *reported* delivered (its acks,
``relayd_delivered_total``: an entry is acked once, when SQS confirmed it), what *arrived*
(every message a consumer received, before the stop and after the restart) and what is *left*
in Redis. Nothing is lost when every committed entry is either acked or still in Redis, the
backlog ends empty, and every message the restarted moto confirmed did arrive. The engine
keeps committing throughout (``Workload``), so the outage is mid-drain by construction.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import orjson
import pytest
from faults.harness import RecordProperty, RelayProcess, seed_backlog
from support.health import readyz
from support.moto import AWS_ENV, MotoServer, receive_all
from support.redis_server import RedisServer
from support.waiting import seconds_until
from support.workload import Workload, stored_ids

from store import RedisStore

pytestmark = [pytest.mark.faults, pytest.mark.slow]

PREFIX = "aws"


class Consumer:
    """Receives from the queue in a thread until stopped; keeps every envelope id per moto life."""

    def __init__(self, moto: MotoServer, url: str) -> None:
        self.moto, self.url = moto, url
        self.arrived: list[list[str]] = [[]]
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="consumer", daemon=True)

    def _run(self) -> None:
        sqs = self.moto.client("sqs")
        while not self._stop.is_set():
            if self.paused.is_set():
                time.sleep(0.05)
                continue
            try:
                got = receive_all(sqs, self.url, empty_polls=1, max_polls=5)
            except Exception:  # moto down or the queue not created yet: try again
                time.sleep(0.1)
                continue
            self.arrived[-1] += [str(orjson.loads(m.body)["id"]) for m in got]
            time.sleep(0.05)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def delivered_total(relay: RelayProcess) -> float:
    samples = relay.metrics()
    return sum(value for (name, _), value in samples.items() if name == "relayd_delivered_total")


def test_moto_stopped_and_restarted_mid_drain_loses_nothing(
    redis_process: RedisServer, moto_server: MotoServer, tmp_path: Path, record_property: RecordProperty
) -> None:
    queue = f"outage{uuid.uuid4().hex[:8]}"
    url = moto_server.create("sqs", queue)
    client = redis_process.client()
    seeded = seed_backlog(client, PREFIX, outbox=150, spawns=20, timers=30, fire_at=time.time() - 60)
    workload = Workload(RedisStore(client, prefix=PREFIX), rate_per_s=15, executions=4, seed=9)
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", PREFIX, "--sink", moto_server.spec("sqs", url),
            "--batch", "50", "--max-attempts", "1000", "--retry-cap", "1", "--poll-interval", "0.2",
            "--log-level", "warning",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    consumer = Consumer(moto_server, url)
    workload.start()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in AWS_ENV.items():
            patch.setenv(name, value)  # the relay process finds them through the standard chain
        relay.start()
    consumer.start()
    try:
        seconds_until(lambda: len(consumer.arrived[0]) > 20, 60, "first messages received")
        consumer.paused.set()
        time.sleep(0.1)  # let a receive in progress finish before moto goes
        moto_server.stop()
        seconds_until(lambda: readyz(relay.metrics_port)[0] == 503, 30, "/readyz 503 while moto is down")
        status, reason = readyz(relay.metrics_port)
        seconds_until(
            lambda: client.hlen(f"{PREFIX}:outbox") >= 10, 30, "outbox entries held during the outage"
        )
        acked_before = delivered_total(relay)
        moto_server.start()
        moto_server.create("sqs", queue)  # moto came back empty: the same queue again
        consumer.arrived.append([])
        consumer.paused.clear()
        ledger_in = workload.stop()
        committed = [*seeded.committed, *ledger_in.committed]
        seconds_until(lambda: not stored_ids(client, PREFIX), 120, "the backlog drained after the restart")
        acked = delivered_total(relay)
        seconds_until(
            lambda: len(set(consumer.arrived[1])) >= acked - acked_before, 60, "the consumer caught up"
        )
    finally:
        workload.stop()
        consumer.stop()
        relay.stop()
        if moto_server.proc is None:
            moto_server.start()

    left = len(stored_ids(client, PREFIX))
    before, after = set(consumer.arrived[0]), set(consumer.arrived[1])
    arrived = before | after
    line = (
        f"ledger case=moto-restart committed={len(committed)} relay_acked={acked:.0f} "
        f"arrived={len(arrived)} (before stop {len(before)}, after restart {len(after)}) "
        f"left_in_redis={left} "
        f"dropped_with_moto={len(set(committed) - arrived)} readyz={status} {reason.strip()!r}"
    )
    print(line)
    record_property("ledger", line)
    assert acked + left == len(committed)  # every entry acked exactly once or still held
    assert left == 0
    assert arrived <= set(committed)
    assert len(after) >= acked - acked_before  # whatever the restarted moto confirmed arrived
    assert status == 503
    assert "sqs endpoint unreachable" in reason
    assert str(moto_server.port) not in reason
