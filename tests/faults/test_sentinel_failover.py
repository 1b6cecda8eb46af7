"""Redis Sentinel: the master is SIGKILLed mid-drain, the sentinels promote the replica, and the
relay, pointed at the sentinels (``redis+sentinel://``), finds the new master and carries on.

The backlog is written to the master and confirmed replicated with ``WAIT 1`` before the relay
starts: every one of those entries must be delivered (lost = 0). Acks (HDEL, ZREM) the dead
master took but had not replicated come back with the promoted replica, so their entries are
delivered twice: duplicates, counted and bounded, never losses. The relay is never restarted.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from faults.harness import RecordProperty, RelayProcess, seed_backlog, size_of
from support.ledger import assert_ledger, ledger_from_jsonl, read_jsonl, report_ledger, wait_delivered
from support.sentinel import SentinelDeployment
from support.waiting import seconds_until

from store import Keyspace

pytestmark = [pytest.mark.faults, pytest.mark.crash, pytest.mark.slow]

PREFIX = "sfo"
BATCH = 100


def test_master_killed_mid_drain_sentinels_promote_the_replica_relay_continues(
    tmp_path: Path, record_property: RecordProperty
) -> None:
    with SentinelDeployment(extra_args=("--notify-keyspace-events", "Khz")) as deployment:
        assert deployment.master is not None
        writer = deployment.master.client()
        backlog = seed_backlog(
            writer, PREFIX, outbox=24_000, spawns=3_000, timers=3_000, fire_at=time.time() - 60
        )
        replicated_to = writer.wait(1, 30_000)
        writer.close()
        assert replicated_to >= 1, "the replica did not confirm the backlog"
        out = tmp_path / "delivered.jsonl"
        relay = RelayProcess(
            [
                "--redis-url", deployment.url(), "--prefix", PREFIX, "--sink", f"jsonl:{out}",
                "--batch", str(BATCH), "--lease-ttl", "2", "--poll-interval", "0.2", "--log-level", "warning",
            ],
            tmp_path / "relay.log",
        )  # fmt: skip
        relay.start()
        try:
            seconds_until(lambda: size_of(out) > 300_000, 60, "progress before the kill")
            at_kill = len(read_jsonl(out).deliveries)
            victim = deployment.kill_master()
            killed = time.monotonic()
            promoted = deployment.wait_promoted()
            promoted_s = time.monotonic() - killed
            size = size_of(out)
            seconds_until(lambda: size_of(out) > size, 60, "a delivery after the promotion")
            first_delivery_s = time.monotonic() - killed
            recover_s = wait_delivered(out, backlog.committed, since=killed, timeout_s=90)
            assert relay.alive, relay.log_tail()
            live = promoted.client()
            keys = Keyspace(PREFIX)
            left = live.hlen(keys.outbox) + live.hlen(keys.spawns) + live.zcard(keys.timers)
            live.close()
        finally:
            relay.stop()

    ledger = ledger_from_jsonl("sentinel-master-failover", backlog.committed, out, recover_s=recover_s)
    report_ledger(ledger, record_property)
    print(
        f"victim={victim.port} promoted={promoted.port} delivered_at_kill={at_kill}/{len(backlog.committed)} "
        f"promoted_after_kill_s={promoted_s:.2f} first_delivery_after_kill_s={first_delivery_s:.2f} "
        f"restarts={relay.starts - 1}"
    )
    assert at_kill < len(backlog.committed), "the drain was over before the kill"
    assert_ledger(ledger, max_duplicates=6 * BATCH)
    assert left == 0
    assert relay.starts == 1
