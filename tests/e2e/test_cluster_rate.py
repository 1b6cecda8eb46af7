"""``--sink-rate-scope cluster``: three relay processes sharing six prefixes deliver at most
``--sink-rate`` entries a second to one sink between them.

The sink is a Redis stream on the same server: its entry ids carry Redis's own millisecond
clock, so the rate is read from what arrived, over a window that starts once every process
holds a share of the prefixes (the buckets' first bursts are behind it by then).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from faults.harness import RelayProcess
from support.binaries import require_binaries
from support.redis_server import RedisServer
from support.seeding import Entries
from support.waiting import wait_until

pytestmark = pytest.mark.slow

PREFIXES = [f"cr{i}" for i in range(6)]
PER_PREFIX = 1000
RATE = 200
WINDOW_S = 4.0


def _holders(client) -> set[int]:
    """The pids holding the prefixes' leases now."""
    values = client.mget([f"{p}:relay:lease" for p in PREFIXES])
    return {int(v.decode().split("/")[1]) for v in values if v is not None}


def test_three_replicas_share_one_rate_in_cluster_scope(tmp_path: Path) -> None:
    """(With ``--sink-rate-scope process`` the same three deliver about three times the rate,
    docs/performance.md; not run here, to keep the suite short.)"""
    scope = "cluster"
    require_binaries("redis-server", "relayd")
    server = RedisServer(tmp_path / "redis")
    server.start()
    client = server.client()
    relays = []
    try:
        pipe = client.pipeline()
        for prefix in PREFIXES:
            entries = Entries(pipe, prefix)
            for seq in range(1, PER_PREFIX + 1):
                entries.outbox(seq, f"t{seq % 10}", f"{prefix}-{seq}")
            entries.counters(outbox=PER_PREFIX)
        pipe.execute()
        prefix_args = [arg for p in PREFIXES for arg in ("--prefix", p)]
        for n in range(3):
            relay = RelayProcess(
                [
                    "--redis-url", server.url, *prefix_args,
                    "--sink", f"redis-stream:{server.url}?stream=out", "--sink-rate", str(RATE),
                    "--sink-rate-scope", scope, "--lease-ttl", "1",
                    "--poll-interval", "0.2", "--log-level", "warning",
                ],
                tmp_path / f"relay-{n}.log",
            )  # fmt: skip
            relay.start()
            relays.append(relay)
        pids = {relay.proc.pid for relay in relays if relay.proc is not None}
        wait_until(lambda: _holders(client) == pids, 60, "every process holding a share")
        (start_s, _) = client.time()
        wait_until(lambda: client.time()[0] >= start_s + WINDOW_S + 1, 30, "the window passed")
        holders = _holders(client)
    finally:
        for relay in relays:
            relay.stop()
    try:
        low, high = f"{start_s * 1000}-0", f"{int((start_s + WINDOW_S) * 1000) - 1}-99999"
        in_window = len(client.xrange("out", low, high))
        total = client.xlen("out")
    finally:
        server.kill()

    rate = in_window / WINDOW_S
    print(f"--sink-rate {RATE} --sink-rate-scope {scope}, 3 replicas: {rate:.1f} entries/s together")
    assert holders == pids  # all three delivered through the window
    assert total < len(PREFIXES) * PER_PREFIX  # the backlog outlasted the window
    assert RATE * 0.9 <= rate <= RATE * 1.1
