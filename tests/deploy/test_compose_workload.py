"""The compose example's engine stand-in commits, through ``store``, exactly what relayd drains:
one targeted or untargeted outbox event, one spawn and one future timer per round."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest
import redis

from store import RedisStore

WORKLOAD = Path(__file__).resolve().parents[2] / "deploy" / "compose" / "workload.py"
NOW_S = 1_700_000_000.0


@pytest.fixture(scope="module")
def workload() -> ModuleType:
    """deploy/compose/workload.py imported by path (it is a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("relayd_compose_workload", WORKLOAD)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_each_round_commits_an_emit_a_spawn_and_a_future_timer(
    workload: ModuleType, sync_client: redis.Redis, prefix: str
) -> None:
    store = RedisStore(sync_client, prefix=prefix)
    rng = random.Random(7)

    ids = [workload.commit_round(store, run_id="r1", round_no=n, now_s=NOW_S, rng=rng) for n in range(6)]

    outbox = {int(k): json.loads(v) for k, v in sync_client.hgetall(f"{prefix}:outbox").items()}
    spawns = [json.loads(v) for v in sync_client.hgetall(f"{prefix}:spawns").values()]
    timers = cast("list[tuple[bytes, float]]", sync_client.zrange(f"{prefix}:timers", 0, -1, withscores=True))
    low_s, high_s = workload.TIMER_DELAY_RANGE_S
    assert ids == [f"order-r1-{n}" for n in range(6)]
    assert sorted(outbox) == [1, 2, 3, 4, 5, 6]
    # Round 0 and round 5 broadcast; every other round targets an earlier order of the run.
    targets = [outbox[seq]["t"] for seq in sorted(outbox)]
    assert targets[0] is None
    assert targets[5] is None
    assert all(t in ids[:n] for n, t in enumerate(targets) if n % 5)
    assert {json.loads(entry["e"])["kind"] for entry in outbox.values()} == {"OrderPlaced"}
    assert sorted((s["p"], s["c"], s["r"]) for s in spawns) == sorted(
        (i, f"{i}.payment", "order.payment") for i in ids
    )
    assert sorted(m.decode() for m, _ in timers) == sorted(f"{i}\x00order.awaiting_payment" for i in ids)
    assert all(NOW_S + low_s <= score <= NOW_S + high_s for _, score in timers)
    assert all(sync_client.exists(f"{prefix}:exe:{i}") for i in ids)


def test_main_stops_after_the_configured_rounds(workload: ModuleType, redis_server: Any, prefix: str) -> None:
    """The script's own entry point, against the real server, with its env configuration."""
    env = {"WORKLOAD_REDIS_URL": redis_server.url, "WORKLOAD_PREFIX": prefix, "WORKLOAD_RATE": "1000"}

    code = workload.main({**env, "WORKLOAD_ROUNDS": "3"})

    client = redis_server.client()
    assert code == 0
    assert (
        client.hlen(f"{prefix}:outbox")
        == client.hlen(f"{prefix}:spawns")
        == client.zcard(f"{prefix}:timers")
        == 3
    )
