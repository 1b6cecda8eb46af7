"""``relayd_commit_to_delivery_seconds``: an entry committed through ``store`` and delivered by a
real relay into a Redis stream gives one observation, the delay from its commit time to the
moment Redis took the stream entry (both on the Redis server's clock) within 5 ms (the median
of a few commits, so one that a loaded machine delays does not decide)."""

from __future__ import annotations

from pathlib import Path

import pytest
from faults.harness import RelayProcess, sample
from support.binaries import require_binaries
from support.redis_server import RedisServer
from support.seeding import Entries
from support.waiting import wait_until

from store import Event, Execution, RedisStore, Status, codec

pytestmark = pytest.mark.slow

PREFIX = "cd"
#: Commits measured one after another; the median error is held to 5 ms.
ROUNDS = 5


def test_one_committed_entry_gives_one_observation_within_5_ms_of_the_truth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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

        # The commit time store stamps, as it stamps it: read back from the hash, the entry
        # might already be delivered and deleted by the running relay.
        stamped: list[float] = []
        stamp = codec.stamp_commit_time

        def recording(value: bytes, committed_at: float) -> bytes:
            stamped.append(committed_at)
            return stamp(value, committed_at)

        monkeypatch.setattr(codec, "stamp_commit_time", recording)
        labels = {"prefix": PREFIX, "kind": "outbox"}
        store = RedisStore(client, prefix=PREFIX)
        errors_s, observations = [], []
        for n in range(1, ROUNDS + 1):
            # One commit at a time: each gives one observation, read as the sum's increase.
            before = sample(relay.metrics(), "relayd_commit_to_delivery_seconds_sum", **labels) or 0.0
            store.commit(Execution(definition_id="d", status=Status.RUNNING), [("t", Event(kind="Ping"))])
            committed_at = stamped[-1]
            wait_until(lambda n=n: client.xlen("out") == 1 + n, 30, "the committed entry delivered")
            wait_until(
                lambda n=n: sample(relay.metrics(), "relayd_commit_to_delivery_seconds_count", **labels) == n,
                10,
                "its observation",
            )
            observed_s = sample(relay.metrics(), "relayd_commit_to_delivery_seconds_sum", **labels) - before
            ((last_id, _),) = client.xrevrange("out", count=1)
            truth_s = int(last_id.split(b"-")[0]) / 1000 - committed_at  # Redis's own clock, in ms
            observations.append((observed_s, truth_s))
            errors_s.append(abs(observed_s - truth_s))
            wait_until(lambda: client.hlen(f"{PREFIX}:outbox") == 0, 10, "the entry acked")
    finally:
        relay.stop()
        server.kill()

    print(
        "commit to delivery, observed vs the stream's clock (s):",
        [(round(o, 4), round(t, 4)) for o, t in observations],
    )
    assert sorted(errors_s)[ROUNDS // 2] < 0.005  # the median: one round on a loaded machine may lag
