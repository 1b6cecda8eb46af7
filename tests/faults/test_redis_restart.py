"""redis-server with AOF (``appendfsync always``) stopped and restarted mid-drain, same port and dir.

The first outage is a clean stop (SIGTERM), the second a SIGKILL: with every write fsynced
before it is acknowledged, neither loses an entry or an ack. The relay process is never
restarted: it must notice, back off, reconnect and resume on its own.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from faults.harness import RecordProperty, RelayProcess, grew, sample, seed_backlog, size_of
from support.ledger import assert_ledger, ledger_from_jsonl, report_ledger, wait_delivered
from support.redis_server import RedisServer
from support.waiting import seconds_until, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.crash, pytest.mark.slow]

BATCH = 100
#: How long Redis stays away each time, in seconds.
OUTAGE_S = 3.0


def test_aof_redis_stopped_and_killed_mid_drain_relay_resumes(
    tmp_path: Path, record_property: RecordProperty
) -> None:
    server = RedisServer(tmp_path / "redis", args=("--appendonly", "yes", "--appendfsync", "always"))
    server.start()
    client = server.client()
    backlog = seed_backlog(client, "aof", outbox=21_000, spawns=4_500, timers=4_500, fire_at=time.time() - 60)
    out = tmp_path / "delivered.jsonl"
    relay = RelayProcess(
        [
            "--redis-url", server.url, "--prefix", "aof", "--sink", f"jsonl:{out}", "--batch", str(BATCH),
            "--lease-ttl", "2", "--poll-interval", "0.2", "--log-level", "warning",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    relay.start()
    outages = []
    try:
        for end in (server.stop, server.kill):
            wait_until(grew(out, size_of(out) + 50_000), 30, "progress")
            end()
            time.sleep(OUTAGE_S)
            assert relay.alive, relay.log_tail()
            server.start()
            back = time.monotonic()
            left = client.hlen("aof:outbox") + client.hlen("aof:spawns") + client.zcard("aof:timers")
            # resumed: something more is delivered after Redis came back
            resume_s = seconds_until(grew(out, size_of(out)), 30, "delivery after the restart")
            outages.append((end.__name__, left, round(resume_s, 2)))
        recover_s = wait_delivered(out, backlog.committed, since=back, timeout_s=60)
        errors = sample(relay.metrics(), "relayd_redis_errors_total", prefix="aof")
        assert relay.alive, relay.log_tail()
    finally:
        relay.stop()
        server.kill()

    ledger = ledger_from_jsonl("redis-aof-restart", backlog.committed, out, recover_s=recover_s)
    report_ledger(ledger, record_property)
    print(f"outages (how, left, resume_s)={outages} redis_errors_total={errors}")
    assert all(left > 0 for _, left, _ in outages), "the backlog drained before an outage"
    assert_ledger(ledger, max_duplicates=len(outages) * 3 * BATCH)
    assert errors is not None
    assert errors > 0
    assert relay.starts == 1
