"""Where the sink's breaker meets batches, the lease and the receiver's answers (cases
1, 7, 10 and the ``Retry-After`` of 11).

Real processes: redis-server, ``relayd sweep`` and a local aiohttp receiver in a thread of the
test, which keeps every request it got (when, which entry ids, its answer). Each case failed on
the code before the fix: a poison entry inside a ``--webhook-batch`` request wedged the sink; a
401 for every target dead-lettered everything; an open breaker probed before the receiver's
``Retry-After``; entries left unsent by a lease that expired mid-batch opened the breaker.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from aiohttp import web
from faults.harness import RelayProcess, sample
from support.http_receiver import serve_in_thread
from support.redis_server import RedisServer
from support.seeding import Entries
from support.waiting import wait_until

from store import Keyspace

pytestmark = [pytest.mark.faults, pytest.mark.slow]

PREFIX = "meet"
STRICT = ["--max-attempts", "3", "--retry-base", "0.2", "--retry-cap", "1", "--breaker-cooldown-cap", "4"]


@dataclass
class Ledger:
    """What the receiver got: each request as (monotonic time, entry ids, status)."""

    answer: Callable[[list[str]], int]
    retry_after: str | None = None
    first_delay_s: float = 0.0  # how long the first request waits for its answer
    requests: list[tuple[float, list[str], int]] = field(default_factory=list)
    first: threading.Event = field(default_factory=threading.Event)

    async def handle(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        envelopes = body["data"] if isinstance(body, dict) and "data" in body else [body]
        ids = [str(envelope["id"]) for envelope in envelopes]
        if not self.first.is_set():
            self.first.set()
            await asyncio.sleep(self.first_delay_s)
        status = self.answer(ids)
        self.requests.append((time.monotonic(), ids, status))
        headers = {"Retry-After": self.retry_after} if self.retry_after and status >= 500 else {}
        return web.Response(status=status, headers=headers)

    def delivered(self) -> set[str]:
        return {id_ for _, ids, status in self.requests if status < 300 for id_ in ids}


def _seed(redis_process: RedisServer, targets: int, per_target: int) -> list[str]:
    """``per_target`` outbox events for each of ``targets`` targets, interleaved; their ids."""
    client = redis_process.client()
    pipe = client.pipeline()
    entries, ids, seq = Entries(pipe, PREFIX), [], 0
    for round_ in range(per_target):
        for target in range(targets):
            seq += 1
            entries.outbox(seq, f"t{target}", f"ev-{target}-{round_}")
            ids.append(f"{PREFIX}:outbox:{seq}")
    pipe.set(Keyspace(PREFIX).outbox_seq, seq)
    pipe.execute()
    return ids


def _relay(redis_process: RedisServer, url: str, tmp_path: Path, *extra: str) -> RelayProcess:
    return RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", PREFIX, "--sink", f"webhook:{url}",
            *STRICT, "--lease-ttl", "2", "--poll-interval", "0.2", "--log-level", "info", *extra,
        ],
        tmp_path / "relay.log",
    )  # fmt: skip


def _dead_letters(relay: RelayProcess) -> float:
    return sum(
        value
        for (name, labels), value in relay.metrics().items()
        if name == "relayd_dead_lettered_total" and dict(labels).get("prefix") == PREFIX
    )


def _opened(relay: RelayProcess) -> float:
    value = sample(relay.metrics(), "relayd_sink_breaker_transitions_total", sink="webhook", state="open")
    return value or 0.0


def _readyz(relay: RelayProcess) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{relay.metrics_port}/readyz", timeout=2) as answer:
            return str(answer.read().decode())
    except urllib.error.HTTPError as error:
        return str(error.read().decode())


def test_case_1_poison_in_batch_is_dead_lettered_and_the_rest_delivered(
    redis_process: RedisServer, tmp_path: Path
) -> None:
    """200 entries over 20 targets, ``--webhook-batch 100``, a receiver answering 500 to any
    request that carries seq 57: the 199 others delivered, seq 57 dead-lettered, breaker shut.
    Before: 2 delivered in 12 s, no dead letter, the breaker opening again and again."""
    ids = _seed(redis_process, 20, 10)
    poison = f"{PREFIX}:outbox:57"
    ledger = Ledger(lambda request_ids: 500 if poison in request_ids else 200)
    with serve_in_thread(ledger.handle) as url:
        relay = _relay(redis_process, url, tmp_path, "--webhook-batch", "100")
        relay.start()
        try:
            wait_until(lambda: ledger.delivered() >= set(ids) - {poison}, 60, "every good entry delivered")
            wait_until(lambda: _dead_letters(relay) == 1, 30, "the poison entry dead-lettered")
            opened = _opened(relay)
            parked = redis_process.client().hkeys(f"{PREFIX}:relay:dead:outbox")
        finally:
            relay.stop()

    assert poison not in ledger.delivered()
    assert parked == [poison.encode()]
    assert opened == 0
    # Per-target order: seq 57's later entries (its target t16) arrived after the others of t16.
    order = [id_ for _, request_ids, status in ledger.requests if status < 300 for id_ in request_ids]
    t16 = [id_ for id_ in order if (int(id_.rsplit(":", 1)[1]) - 1) % 20 == 16]
    assert t16 == sorted(t16, key=lambda id_: int(id_.rsplit(":", 1)[1]))


def test_case_10_401_from_every_target_opens_the_breaker_and_dead_letters_nothing(
    redis_process: RedisServer, tmp_path: Path
) -> None:
    """A secret rotated on one side only: 401 to everything for a while, then 200. Nothing is
    dead-lettered, the breaker opens naming what to check, and everything arrives afterwards.
    Before: every entry parked at attempt 1 as permanent."""
    ids = _seed(redis_process, 10, 9)
    rotated = {"done": False}
    ledger = Ledger(lambda request_ids: 200 if rotated["done"] else 401)
    with serve_in_thread(ledger.handle) as url:
        relay = _relay(redis_process, url, tmp_path)
        relay.start()
        try:
            wait_until(lambda: _opened(relay) >= 1, 30, "the breaker to open")
            # One request per target (10), then a probe of 3 answered 401 too.
            wait_until(lambda: len(ledger.requests) >= 13, 30, "a probe answered 401 as well")
            dead_while_refused = _dead_letters(relay)
            readiness = _readyz(relay)
            rotated["done"] = True
            wait_until(lambda: ledger.delivered() == set(ids), 60, "every entry delivered")
            dead = _dead_letters(relay)
        finally:
            relay.stop()
    log = relay.log_tail(200_000)

    assert dead_while_refused == 0
    assert dead == 0
    assert "sink_breaker_open" in log
    assert "check the credentials" in log
    assert "check the credentials" in readiness


def test_case_11_retry_after_is_honoured_while_the_breaker_is_open(
    redis_process: RedisServer, tmp_path: Path
) -> None:
    """503 with ``Retry-After: 5`` to everything: the breaker opens and its first probe waits
    the 5 s the receiver asked for, not the 2 s cool-down. Before: a probe after 2 s."""
    ids = _seed(redis_process, 10, 2)
    busy = {"until": time.monotonic() + 1e9}
    ledger = Ledger(lambda request_ids: 503 if time.monotonic() < busy["until"] else 200, retry_after="5")
    with serve_in_thread(ledger.handle) as url:
        relay = _relay(redis_process, url, tmp_path)
        relay.start()
        try:
            wait_until(lambda: _opened(relay) >= 1, 30, "the breaker to open")
            opened_at = time.monotonic()
            refused = len(ledger.requests)
            wait_until(lambda: len(ledger.requests) > refused, 30, "the first probe")
            probe_at, _, _ = ledger.requests[refused]
            busy["until"] = 0.0
            wait_until(lambda: ledger.delivered() == set(ids), 60, "every entry delivered")
        finally:
            relay.stop()
    last_refused_at = ledger.requests[refused - 1][0]

    assert probe_at - last_refused_at >= 4.5
    assert probe_at >= opened_at


def test_case_7_lease_expired_mid_batch_is_not_a_sink_failure(
    redis_process: RedisServer, tmp_path: Path
) -> None:
    """A relay frozen (SIGSTOP) past its lease while the first request of a batch is in flight
    (one at a time; the receiver answers that one 503): on resume the rest of the batch is not
    sent. Only the one request failed; what was left unsent is the lease's doing, not the
    sink's: the breaker stays closed and ``/readyz`` does not blame the sink. Before, the
    unsent entries of eight targets counted as failures and opened the breaker."""
    ids = _seed(redis_process, 8, 10)
    answered: list[int] = []

    def answer(request_ids: list[str]) -> int:
        answered.append(len(answered))
        return 503 if len(answered) == 1 else 200

    ledger = Ledger(answer, first_delay_s=0.3)
    with serve_in_thread(ledger.handle) as url:
        relay = _relay(redis_process, url, tmp_path, "--webhook-concurrency", "1")
        relay.start()
        assert relay.proc is not None
        try:
            assert ledger.first.wait(30), "no request came"
            os.kill(relay.proc.pid, signal.SIGSTOP)
            try:
                time.sleep(3.0)  # past the 2 s lease: the point of the case, not a wait for a condition
            finally:
                os.kill(relay.proc.pid, signal.SIGCONT)
            wait_until(lambda: ledger.delivered() == set(ids), 60, "every entry delivered")
            opened = _opened(relay)
            readiness = _readyz(relay)
        finally:
            relay.stop()
    log = relay.log_tail(200_000)

    assert "lease_lost" in log  # the lease did expire mid-batch
    assert "sink webhook" not in readiness
    assert opened == 0
    assert "sink_breaker_open" not in log
