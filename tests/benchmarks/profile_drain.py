"""Profile one relay drain (outbox → the default stream sink) with pyinstrument.

Run: ``python tests/benchmarks/profile_drain.py [BACKLOG] [KIND]``; prints pyinstrument's text tree.
Seeding is outside the profile: only ``run_relay(once=True)`` is sampled.
"""

from __future__ import annotations

import asyncio
import sys
import time

from pyinstrument import Profiler

from relayd.bench.drain import relay_drain
from relayd.bench.harness import Bench, BenchConfig
from relayd.bench.seed import seed
from relayd.bench.server import bench_redis
from relayd.observability.logs import configure_logging


async def main(backlog: int, kind: str) -> None:
    with bench_redis(None) as target:
        bench = Bench(BenchConfig(), target.url)
        async with bench.prefix() as prefix:
            seed(bench.sync, prefix, kind, backlog, clock=time.time)  # type: ignore[arg-type]
        profiler = Profiler(interval=0.0005, async_mode="enabled")
        real_seed = seed

        def no_seed(*args, **kwargs):  # the profiled drain seeds before the profiler starts
            real_seed(*args, **kwargs)
            profiler.start()

        import relayd.bench.drain as bench_module

        bench_module.seed = no_seed  # type: ignore[attr-defined]
        figures = await relay_drain(bench, kind, backlog)  # type: ignore[arg-type]
        profiler.stop()
        await bench.close()
        print(f"{figures.rate_per_s:,.0f} entries/s, cpu {figures.cpu_s:.2f}s", file=sys.stderr)
        print(profiler.output_text(unicode=False, color=False, show_all=False))


if __name__ == "__main__":
    configure_logging(log_format="console", log_level="warning")
    asyncio.run(
        main(
            int(sys.argv[1]) if len(sys.argv) > 1 else 100_000, sys.argv[2] if len(sys.argv) > 2 else "outbox"
        )
    )
