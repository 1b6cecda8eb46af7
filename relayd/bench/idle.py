"""The ``idle`` suite of ``relayd bench``: what a long-running relay on an empty prefix costs.

Redis commands per second (INFO commandstats, the bench's own probes left out) and the share of
a core the relay's process uses, over ``idle_duration_s`` after a few seconds of start-up.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from relayd.bench.harness import Bench
from relayd.bench.meter import Meter


async def idle_suite(bench: Bench) -> dict[str, Any]:
    """Commands per second (and per command) and the CPU share of an idle relay."""
    config = bench.config
    duration_s = config.idle_duration_s
    async with bench.prefix() as prefix:
        sink = bench.sink_for(prefix)
        # the first seconds include start-up (lease, cursors); measure the steady state after
        settle_s = min(3.0, duration_s / 3)
        start_s = time.time()
        run = asyncio.create_task(bench.run_until(prefix, sink, start_s + settle_s + duration_s))
        await asyncio.sleep(settle_s)
        with Meter(bench.sync) as meter:
            await asyncio.sleep(duration_s)
        await run
    commands = sum((meter.commands or {}).values()) if meter.commands is not None else None
    return {
        "duration_s": duration_s,
        "poll_interval_s": config.poll_interval_s,
        "commands": meter.commands,
        "commands_per_s": round(commands / duration_s, 2) if commands is not None else None,
        "cpu_share": round(meter.cpu_s / duration_s, 5),
    }
