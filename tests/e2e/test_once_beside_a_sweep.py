"""``relayd sweep --once`` beside a running ``relayd sweep`` on one prefix (a CronJob beside the
sidecar): the running one holds the lease, so the one-shot run names it and exits 0 at once
(exit 1 means "entries left", which is not the case: the active replica relays them)."""

from __future__ import annotations

import signal
from pathlib import Path

import orjson
from support.processes import end_process
from support.waiting import wait_until

from relayd.state.keys import RelayKeys
from store import Keyspace
from tests.e2e.conftest import run_relayd, start_relayd

PREFIX = "beside"


def test_once_beside_an_active_sweep_exits_0_naming_the_active_replica(redis_server, tmp_path: Path) -> None:
    client = redis_server.client()
    lease_key = RelayKeys(Keyspace(PREFIX)).lease
    common = ("--redis-url", redis_server.url, "--prefix", PREFIX, "--lease-ttl", "5")
    sidecar = start_relayd(
        "sweep", *common, "--sink", f"jsonl:{tmp_path / 'sidecar.jsonl'}", "--metrics-addr", "127.0.0.1:0"
    )
    try:
        token = wait_until(lambda: client.get(lease_key), 60, "the running sweep to take the lease").decode()

        once = run_relayd(
            "sweep", "--once", *common, "--sink", f"jsonl:{tmp_path / 'once.jsonl'}", timeout_s=60
        )
    finally:
        end_process(sidecar, signal.SIGTERM)
        client.close()

    assert token.split("/")[1] == str(sidecar.pid)
    assert once.returncode == 0, once.stderr[-2000:]
    lines = [orjson.loads(line) for line in once.stderr.splitlines() if line.startswith("{")]
    active = [line for line in lines if line["event"] == "another_replica_active"]
    assert len(active) == 1, once.stderr[-2000:]
    assert active[0]["prefix"] == PREFIX
    assert active[0]["holder"] == token.rsplit("/", 1)[0]
    assert "nothing to do" in active[0]["outcome"]
