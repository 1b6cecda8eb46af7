"""A stop is bounded and clean whatever Redis does (case 11).

Real processes: redis-server and ``relayd sweep``. ``--shutdown-grace`` is one deadline for the
whole shutdown (the pass, the last checkpoint, the lease release, leaving the member registry,
closing the connection): a Redis that answers nothing (``SIGSTOP``: connections stay open, no
reply comes, as behind a black hole) cannot hold the process past it. Before, only the pass was
bounded and each step after it waited out its socket timeout. SIGTERM while Redis is down exits
0, as the README says; before, it exited 3.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from faults.harness import RelayProcess
from support.ports import free_port
from support.redis_server import RedisServer
from support.seeding import Entries
from support.waiting import wait_until

from store import Keyspace

pytestmark = [pytest.mark.faults, pytest.mark.slow]

PREFIX = "bye"
GRACE_S = 2.0


def test_case_11_sigterm_while_redis_is_down_exits_0(tmp_path: Path) -> None:
    """Nothing listens at the Redis URL: the relay retries; SIGTERM ends it at once with 0."""
    relay = RelayProcess(
        [
            "--redis-url", f"redis://127.0.0.1:{free_port()}/0", "--prefix", PREFIX, "--sink", "null",
            "--shutdown-grace", str(GRACE_S), "--log-level", "info",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    relay.start()
    try:
        wait_until(lambda: "redis" in relay.log_tail().lower() and relay.alive, 30, "a failed connection")
        wait_until(relay.metrics, 30, "the metrics server")
    finally:
        code = relay.stop(timeout_s=GRACE_S + 10)

    assert code == 0, relay.log_tail()


def test_case_11_black_holed_redis_cannot_hold_the_shutdown_past_the_grace(
    redis_process: RedisServer, tmp_path: Path
) -> None:
    """Redis frozen (SIGSTOP) under a relay holding the lease, then SIGTERM: the process is gone
    within the grace and a margin, with 0."""
    client = redis_process.client()
    pipe = client.pipeline()
    entries = Entries(pipe, PREFIX)
    for seq in range(1, 51):
        entries.outbox(seq, f"t{seq % 5}", f"ev-{seq}")
    pipe.set(Keyspace(PREFIX).outbox_seq, 50)
    pipe.execute()
    out = tmp_path / "out.jsonl"
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", PREFIX, "--sink", f"jsonl:{out}",
            "--shutdown-grace", str(GRACE_S), "--lease-ttl", "2", "--poll-interval", "0.2",
            "--log-level", "info",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    relay.start()
    assert redis_process.proc is not None
    assert relay.proc is not None
    try:
        wait_until(lambda: client.hlen(Keyspace(PREFIX).outbox) == 0, 30, "the backlog drained")
        os.kill(redis_process.proc.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            relay.proc.send_signal(signal.SIGTERM)
            try:
                code = relay.proc.wait(GRACE_S + 30)
            finally:
                took_s = time.monotonic() - started
        finally:
            os.kill(redis_process.proc.pid, signal.SIGCONT)
    finally:
        relay.kill()

    print(f"shutdown against a frozen Redis took {took_s:.1f}s (grace {GRACE_S}s)")
    assert code == 0, relay.log_tail()
    assert took_s < GRACE_S + 4.0, relay.log_tail()
