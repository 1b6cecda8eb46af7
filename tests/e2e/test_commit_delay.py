"""``relayd_commit_to_delivery_seconds``: an entry committed through ``store`` and delivered by a
real relay into a Redis stream gives one observation, the delay from its commit time to the
moment Redis took the stream entry (both on the Redis server's clock) within 5 ms."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from faults.harness import RelayProcess, sample
from support.binaries import require_binaries
from support.redis_server import RedisServer
from support.seeding import Entries
from support.waiting import wait_until

from store import Event, Execution, RedisStore, Status

pytestmark = pytest.mark.slow

PREFIX = "cd"


def test_one_committed_entry_gives_one_observation_within_5_ms_of_the_truth(tmp_path: Path) -> None:
    require_binaries("redis-server", "relayd")
    server = RedisServer(tmp_path / "redis")
    server.start()
    client = server.client()
    relay = RelayProcess(
        [
            "--redis-url", server.url, "--prefix", PREFIX, "--sink", f"redis-stream:{server.url}?stream=out",
            "--poll-interval", "0.2", "--log-level", "warning",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    relay.start()
    try:
        wait_until(
            lambda: sample(relay.metrics(), "relayd_active", prefix=PREFIX) == 1, 30, "the relay active"
        )
        # One entry without a commit time (as harel writes them): no observation, no error.
        Entries(client.pipeline(), PREFIX).outbox(1, "t", "harel-written").counters(outbox=1).pipe.execute()
        wait_until(lambda: client.xlen("out") == 1, 30, "the harel-written entry delivered")

        RedisStore(client, prefix=PREFIX).commit(
            Execution(definition_id="d", status=Status.RUNNING), [("t", Event(kind="Ping"))]
        )
        (stored,) = client.hvals(f"{PREFIX}:outbox")
        committed_at = orjson.loads(stored)["ct"]
        wait_until(lambda: client.xlen("out") == 2, 30, "the committed entry delivered")
        labels = {"prefix": PREFIX, "kind": "outbox"}
        count = wait_until(
            lambda: sample(relay.metrics(), "relayd_commit_to_delivery_seconds_count", **labels),
            10,
            "the observation",
        )
        observed_s = sample(relay.metrics(), "relayd_commit_to_delivery_seconds_sum", **labels)
    finally:
        relay.stop()
        entry_ids = [entry_id for entry_id, _ in client.xrange("out")]
        server.kill()

    delivered_at = int(entry_ids[1].split(b"-")[0]) / 1000  # Redis's own clock, in ms
    truth_s = delivered_at - committed_at
    print(f"commit to delivery: observed {observed_s:.4f}s, stream clock says {truth_s:.4f}s")
    assert count == 1
    assert observed_s is not None
    assert abs(observed_s - truth_s) < 0.005
