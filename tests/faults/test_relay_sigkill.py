"""relayd SIGKILLed at random moments, 20 times, while it drains a 50k mixed backlog.

Each kill lands mid-drain (after the sink file grew since the restart) or, one time in four,
at a random moment after the start (start-up, lease wait). The dead relay's lease expires
after ``--lease-ttl``; the next one takes over. Nothing may be lost; duplicates are bounded
by what can be in flight at a kill: per kind, one delivered batch not yet acked.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from faults.harness import RecordProperty, RelayProcess, seed_backlog
from support.ledger import assert_ledger, ledger_from_jsonl, report_ledger, wait_delivered
from support.redis_server import RedisServer

pytestmark = [pytest.mark.faults, pytest.mark.crash, pytest.mark.slow]

KILLS = 20
#: Small batches slow the drain down enough for twenty kills to land inside it.
BATCH = 25
PREFIX = "killed"


def test_sigkill_twenty_times_during_a_50k_backlog_loses_nothing(
    redis_process: RedisServer, tmp_path: Path, record_property: RecordProperty
) -> None:
    client = redis_process.client()
    backlog = seed_backlog(
        client, PREFIX, outbox=35_000, spawns=7_500, timers=7_500, fire_at=time.time() - 60
    )
    out = tmp_path / "delivered.jsonl"
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", PREFIX, "--sink", f"jsonl:{out}",
            "--batch", str(BATCH), "--lease-ttl", "1", "--poll-interval", "0.1", "--log-level", "warning",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    rng = random.Random(20)
    kills_mid_drain = 0

    for n in range(KILLS):
        size_before = out.stat().st_size if out.exists() else 0
        relay.start()
        if n % 4 == 3:
            time.sleep(rng.uniform(0.0, 1.5))  # anywhere: start-up, lease wait or delivery
        else:
            deadline = time.monotonic() + 15
            while (out.stat().st_size if out.exists() else 0) == size_before and time.monotonic() < deadline:
                time.sleep(0.01)
            kills_mid_drain += 1
            time.sleep(rng.uniform(0.0, 0.1))
        assert relay.alive, relay.log_tail()
        relay.kill()
    last_kill = time.monotonic()
    left_at_last_kill = (
        client.hlen(f"{PREFIX}:outbox") + client.hlen(f"{PREFIX}:spawns") + client.zcard(f"{PREFIX}:timers")
    )
    relay.start()
    try:
        recover_s = wait_delivered(out, backlog.committed, since=last_kill, timeout_s=60)
    finally:
        relay.stop()

    ledger = ledger_from_jsonl("relay-sigkill-x20", backlog.committed, out, recover_s=recover_s)
    report_ledger(ledger, record_property)
    print(f"kills={KILLS} mid_drain={kills_mid_drain} left_at_last_kill={left_at_last_kill}")
    assert left_at_last_kill > 0, "the backlog drained before the last kill: slow the relay down"
    # In flight at a kill: per kind, one delivered batch not yet acked, which may be two reads'
    # worth when held entries come due beside a full read (sweeper docstring).
    assert_ledger(ledger, max_duplicates=KILLS * 3 * 2 * BATCH)
    assert (
        client.hlen(f"{PREFIX}:outbox")
        == client.hlen(f"{PREFIX}:spawns")
        == client.zcard(f"{PREFIX}:timers")
        == 0
    )
    client.close()
