"""The model-based test of the pass: random schedules of the engine, operators, the receiver,
replicas and clocks, driving the real engine, every invariant checked after each
(``tests/model/machine.py``, ``tests/model/invariants.py``).

Its budget is a fixed number of schedules (``MODEL_EXAMPLES``, default ``EXAMPLES``), derandomized
so CI runs the same ones each time; ``make model`` runs fresh random ones for as long as asked
(``MODEL_SECONDS``). A failure prints the shrunk schedule and the ``@reproduce_failure`` line that
replays it exactly.
"""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import HealthCheck, settings
from model.machine import Schedules
from support.redis_server import RedisServer

EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "800"))
#: When set, schedules run in rounds of ``EXAMPLES`` fresh random ones until this many seconds passed.
SECONDS = float(os.environ.get("MODEL_SECONDS", "0"))
#: A short run on a real redis-server: the scripts and commands as Redis itself runs them.
REAL_EXAMPLES = 20
STEPS = 40


def _settings(examples: int, *, fixed: bool) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=STEPS,
        deadline=None,
        derandomize=fixed,
        database=None,
        print_blob=True,
        suppress_health_check=list(HealthCheck),
    )


def test_schedules_keep_every_promise() -> None:
    """Random schedules on fakeredis with a virtual clock: every invariant holds after each."""
    until = time.monotonic() + SECONDS
    run = Schedules.TestCase
    while True:
        run.settings = _settings(EXAMPLES, fixed=not SECONDS)
        run().runTest()
        if time.monotonic() >= until:
            break


@pytest.mark.slow
def test_schedules_on_a_real_redis_server(redis_server: RedisServer) -> None:
    """A few schedules on a real redis-server."""

    class OnRealRedis(Schedules):
        redis_port = redis_server.port

    run = OnRealRedis.TestCase
    run.settings = _settings(REAL_EXAMPLES, fixed=True)
    run().runTest()
