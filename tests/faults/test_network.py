"""The network between relay and Redis cut (connections reset, connects refused) and then
blackholed (connections accepted, no byte forwarded) by ``support.proxy.TcpProxy``.

The engine keeps committing straight to Redis the whole time; the relay only sees Redis
through the proxy. A blackhole outlasts both the lease TTL (the relay must stop delivering on
its own) and the client's socket timeout (its commands time out and it reconnects), and the
bytes held during it are released when it heals, so stale commands (a late lease renewal,
late acks) reach Redis after the fact.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from faults.harness import RecordProperty, RelayProcess, grew, sample, seed_backlog, size_of
from support.ledger import assert_ledger, ledger_from_jsonl, report_ledger, wait_delivered
from support.proxy import Mode, TcpProxy
from support.redis_server import RedisServer
from support.waiting import seconds_until, wait_until
from support.workload import Workload

from store import RedisStore

pytestmark = [pytest.mark.faults, pytest.mark.slow]

BATCH = 100
#: (mode, seconds) of each fault, in order.
FAULTS: tuple[tuple[Mode, float], ...] = (("cut", 4.0), ("blackhole", 12.0), ("cut", 4.0))
LEASE_TTL_S = 2.0


def test_cut_and_blackholed_network_loses_nothing(
    redis_process: RedisServer, tmp_path: Path, record_property: RecordProperty
) -> None:
    client = redis_process.client()
    backlog = seed_backlog(client, "net", outbox=14_000, spawns=3_000, timers=3_000, fire_at=time.time() - 60)
    workload = Workload(RedisStore(redis_process.client(), prefix="wl"), rate_per_s=100, abort_every=10)
    out = tmp_path / "delivered.jsonl"
    faults = []
    with TcpProxy(redis_process.port) as proxy:
        relay = RelayProcess(
            [
                "--redis-url", proxy.url, "--prefix", "net", "--prefix", "wl", "--sink", f"jsonl:{out}",
                "--batch", str(BATCH), "--lease-ttl", str(LEASE_TTL_S), "--poll-interval", "0.2",
                "--log-level", "warning",
            ],
            tmp_path / "relay.log",
        )  # fmt: skip
        relay.start()
        workload.start()
        try:
            for mode, duration_s in FAULTS:
                wait_until(grew(out, size_of(out) + 20_000), 30, "progress")
                proxy.set_mode(mode)
                # past the lease TTL the relay must have stopped delivering on its own
                time.sleep(LEASE_TTL_S + 1.0)
                stalled = out.stat().st_size
                time.sleep(duration_s - LEASE_TTL_S - 1.0)
                assert out.stat().st_size == stalled, f"delivered while the network was {mode}"
                proxy.set_mode("pass")
                healed = time.monotonic()
                resume_s = seconds_until(grew(out, stalled), 30, f"delivery after {mode}")
                faults.append((mode, duration_s, round(resume_s, 2)))
            committed = [*backlog.committed, *workload.stop().committed]
            recover_s = wait_delivered(out, committed, since=healed, timeout_s=60)
            errors = sample(relay.metrics(), "relayd_redis_errors_total", prefix="net")
            assert relay.alive, relay.log_tail()
        finally:
            workload.stop()
            relay.stop()

    ledger = ledger_from_jsonl("network-cut-blackhole", committed, out, recover_s=recover_s)
    report_ledger(ledger, record_property)
    print(f"faults (mode, s, resume_s)={faults} redis_errors_total={errors} proxy_accepted={proxy.accepted}")
    # in flight at each fault: one batch per kind and prefix delivered but not acked
    assert_ledger(ledger, max_duplicates=len(FAULTS) * 2 * 3 * BATCH)
    assert client.hlen("net:outbox") + client.hlen("net:spawns") + client.zcard("net:timers") == 0
    assert errors is not None
    assert errors > 0
    client.close()
