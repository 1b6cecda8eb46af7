"""A Redis Cluster of 3 masters with a replica each: the master serving the relay's prefix is
SIGKILLed mid-drain, a replica takes over, and the relay carries on to the last entry.

Writes the master acknowledged but had not replicated are lost with it; for the backlog that
cannot be the relay's concern (``wait_replicated`` runs before the kill), but an ack (HDEL) that
was lost brings its entry back, so such entries are delivered twice: duplicates, never losses.
The relay is seeded with the victim itself, the hardest case for the cluster client's rediscovery.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from faults.harness import RecordProperty, RelayProcess, seed_backlog
from support.cluster import RedisCluster
from support.ledger import assert_ledger, ledger_from_jsonl, report_ledger, wait_delivered
from support.waiting import seconds_until, wait_until

from store import Keyspace

pytestmark = [pytest.mark.faults, pytest.mark.cluster, pytest.mark.crash]

PREFIX = "{shard-7}fo"
BATCH = 100


def test_master_killed_mid_drain_cluster_fails_over_relay_continues(
    tmp_path: Path, record_property: RecordProperty
) -> None:
    with RedisCluster(masters=3, replicas=1) as cluster:
        client = cluster.client()
        backlog = seed_backlog(
            client, PREFIX, outbox=14_000, spawns=3_000, timers=3_000, fire_at=time.time() - 60
        )
        cluster.wait_replicated()
        victim_port = cluster.master_of(Keyspace(PREFIX).outbox).port
        out = tmp_path / "delivered.jsonl"
        relay = RelayProcess(
            [
                "--redis-url", f"redis+cluster://127.0.0.1:{victim_port}", "--prefix", PREFIX,
                "--sink", f"jsonl:{out}", "--batch", str(BATCH), "--lease-ttl", "2", "--poll-interval", "0.2",
                "--log-level", "warning",
            ],
            tmp_path / "relay.log",
        )  # fmt: skip
        relay.start()
        try:
            wait_until(lambda: out.exists() and out.stat().st_size > 200_000, 30, "progress before the kill")
            victim = cluster.kill_master_of(Keyspace(PREFIX).outbox)
            killed = time.monotonic()
            promoted = cluster.wait_failover(victim)
            failover_s = time.monotonic() - killed
            size = out.stat().st_size
            resume_s = seconds_until(lambda: out.stat().st_size > size, 60, "delivery after the failover")
            resume_s += failover_s
            recover_s = wait_delivered(out, backlog.committed, since=killed, timeout_s=60)
            assert relay.alive, relay.log_tail()
            live = cluster.client()
            left = live.hlen(Keyspace(PREFIX).outbox) + live.hlen(Keyspace(PREFIX).spawns)
            left += live.zcard(Keyspace(PREFIX).timers)
            live.close()
        finally:
            relay.stop()
            client.close()

    ledger = ledger_from_jsonl("cluster-master-failover", backlog.committed, out, recover_s=recover_s)
    report_ledger(ledger, record_property)
    print(
        f"victim={victim.port} promoted={promoted.port} failover_s={failover_s:.2f} "
        f"resumed_after_kill_s={resume_s:.2f} restarts={relay.starts - 1}"
    )
    assert_ledger(ledger, max_duplicates=6 * BATCH)
    assert left == 0
    assert relay.starts == 1
