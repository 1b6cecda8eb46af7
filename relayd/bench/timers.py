"""The ``timers`` suite of ``relayd bench``: timers coming due at a steady rate, relayed by the loop.

``timer_rate`` timers a second come due for ``timer_duration_s``, relayed by the long-running
loop at the configured poll interval; reported: p50/p99 of delivery minus ``fire_at``, whether
p99 stayed within the poll interval (plus 50 ms) and how many were delivered early (none may be).
"""

from __future__ import annotations

import time
from typing import Any

from relayd.bench.harness import Bench
from relayd.bench.meter import Meter
from relayd.bench.seed import live_count, seed


async def timers_suite(bench: Bench) -> dict[str, Any]:
    """The lag figures of one run of due timers."""
    config = bench.config
    rate, duration_s = config.timer_rate, config.timer_duration_s
    count = int(rate * duration_s)
    async with bench.prefix() as prefix:
        # fire_at starts after seeding ends, with room for a slow machine's seeding rate. A
        # seeding overrun would make the first timers overdue before the relay starts and
        # measure catch-up instead of lag: say so.
        first_s = time.time() + 2.0 + count / 20_000
        fire_ats = [first_s + n / rate for n in range(count)]
        bench.log(f"timers: seeding {count} timers due over {duration_s:.0f}s")
        seed(bench.sync, prefix, "timer", count, clock=time.time, fire_ats=fire_ats)
        if time.time() > first_s:
            bench.log(f"timers: seeding overran the head start by {time.time() - first_s:.1f}s")
        sink = bench.sink_for(prefix, sample_every=1)  # every timer: "none early" is a claim on all
        until_s = fire_ats[-1] + config.poll_interval_s + 1.0
        with Meter(bench.sync) as meter:
            await bench.run_until(prefix, sink, until_s)
        figures = meter.figures("relay", "timer", count, sink, left=live_count(bench.sync, prefix, "timer"))
    summary = figures.summary()
    bound_s = config.poll_interval_s + 0.05
    p99 = summary["p99_latency_s"]
    return summary | {
        "rate_per_s": rate,
        "poll_interval_s": config.poll_interval_s,
        "p99_bound_s": bound_s,
        "p99_within_bound": p99 is not None and p99 <= bound_s,
        "early": sum(1 for lag in figures.latencies_s if lag < 0),
    }
