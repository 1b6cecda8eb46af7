"""The ``scale`` suite of ``relayd bench``: one pass's cost at a small and a large outbox backlog.

Per backlog (``scale_backlogs``): the median and p99 duration of the passes that hit the batch
(``Sweeper.run_pass`` called directly), entries/s, CPU and the peak RSS while draining; and the
ratio of the large backlog's median pass to the small one's (a pass should not grow with the
backlog).
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry

from relayd.bench.harness import Bench
from relayd.bench.meter import peak_rss_mb, reset_peak_rss
from relayd.bench.seed import live_count, seed
from relayd.bench.stats import percentile, rounded
from relayd.engine.clock import SYSTEM_CLOCK
from relayd.engine.options import SweepOptions
from relayd.engine.sweeper import Sweeper
from relayd.envelope import KINDS
from relayd.observability.metrics import RelayMetrics
from store import AsyncRedisStore


async def scale_suite(bench: Bench) -> dict[str, Any]:
    """Per backlog its pass figures, keyed by the backlog; ``pass_cost_ratio`` large/small."""
    config = bench.config
    out: dict[str, Any] = {"batch": config.batch}
    for count in config.scale_backlogs:
        async with bench.prefix() as prefix:
            bench.log(f"scale: seeding {count} outbox entries")
            seed(bench.sync, prefix, "outbox", count, clock=time.time)
            reset_peak_rss()
            rss_before_mb = peak_rss_mb()
            passes_s, delivered, cpu_s, wall_s = await _passes(bench, prefix)
            out[str(count)] = {
                "backlog": count,
                "delivered": delivered,
                "left": live_count(bench.sync, prefix, "outbox"),
                "full_passes": len(passes_s),
                "median_pass_s": rounded(percentile(passes_s, 50)),
                "p99_pass_s": rounded(percentile(passes_s, 99)),
                "entries_per_s": round(delivered / wall_s, 1) if wall_s else None,
                "cpu_s": round(cpu_s, 3),
                "rss_before_mb": round(rss_before_mb, 1),
                "peak_rss_mb": round(peak_rss_mb(), 1),
            }
    small, large = (out[str(n)]["median_pass_s"] for n in config.scale_backlogs)
    out["pass_cost_ratio"] = round(large / small, 2) if small and large else None
    return out


async def _passes(bench: Bench, prefix: str) -> tuple[list[float], int, float, float]:
    """Drain with ``Sweeper.run_pass`` directly; durations of the passes that hit the batch."""
    batch = bench.config.batch
    sink = bench.sink_for(prefix)
    options = SweepOptions(prefixes=(prefix,), batch=batch, once=True)
    sweeper = Sweeper(
        AsyncRedisStore(bench.client, prefix=prefix),
        sinks=dict.fromkeys(KINDS, sink),
        options=options,
        metrics=RelayMetrics(CollectorRegistry()),
        clock=SYSTEM_CLOCK,
    )
    await sink.start()
    full: list[float] = []
    cpu0, wall0 = time.process_time(), time.monotonic()
    try:
        await sweeper.start()
        while True:
            started = time.monotonic()
            result = await sweeper.run_pass()
            if result.attempted >= batch:
                full.append(time.monotonic() - started)
            if result.drained:
                break
    finally:
        await sink.close()
    return full, sink.delivered, time.process_time() - cpu0, time.monotonic() - wall0
