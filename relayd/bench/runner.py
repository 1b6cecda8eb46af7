"""``relayd bench``: pick the suites, run each on the harness, assemble the report.

Suites (``--suite``, comma-separated or ``all``), each a module of its own:

- ``drain`` (``relayd.bench.drain``): seeded backlogs drained by the relay, beside a baseline.
- ``scale`` (``relayd.bench.scale``): one pass's cost at a small and a large backlog.
- ``timers`` (``relayd.bench.timers``): timers coming due at a steady rate, their lag.
- ``idle`` (``relayd.bench.idle``): Redis commands per second and CPU of an idle relay.
- ``wake`` (``relayd.bench.wake``): single commits to an idle relay, wake-up on and off.
- ``steady`` (``relayd.bench.steady``): latency and relay CPU under a steady writer, per rate.

The sink spec may name what the bench provides: ``{redis_url}`` (the benchmarked Redis),
``{prefix}`` (the scenario's prefix), ``{tmpdir}`` (a temporary directory, deleted after) and,
for ``webhook:local``, an HTTP server the bench starts on loopback in its own process
(``relayd.bench.http_target``). A redis-server or HTTP server started here is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import redis.utils

from relayd.bench.drain import drain_suite
from relayd.bench.harness import Bench, BenchConfig
from relayd.bench.http_target import LOCAL_PLACEHOLDER, http_target
from relayd.bench.idle import idle_suite
from relayd.bench.scale import scale_suite
from relayd.bench.server import bench_redis
from relayd.bench.steady import steady_suite
from relayd.bench.timers import timers_suite
from relayd.bench.wake import wake_suite

Suite = Callable[[Bench], Awaitable[Any]]
#: Each suite and the report key its figures go under, in the order they run.
SUITE_RUNS: Final[Mapping[str, tuple[str, Suite]]] = {
    "drain": ("kinds", drain_suite),
    "scale": ("scale", scale_suite),
    "timers": ("timers", timers_suite),
    "idle": ("idle", idle_suite),
    "wake": ("wake", wake_suite),
    "steady": ("steady", steady_suite),
}
SUITES: Final = tuple(SUITE_RUNS)


async def _run(
    config: BenchConfig, url: str, flavour: str, log: Callable[[str], None], *, owned: bool, sink: str
) -> dict[str, Any]:
    bench = Bench(config, url, log=log, sink=sink, owned=owned)
    report: dict[str, Any] = {
        "redis": flavour,
        "hiredis": redis.utils.HIREDIS_AVAILABLE,
        "sink": config.sink,
        "backlog": config.backlog,
        "batch": config.batch,
    }
    try:
        for name, (key, suite) in SUITE_RUNS.items():
            if name in config.suites:
                report[key] = await suite(bench)
    finally:
        await bench.close()
    problems = [p for row in report.get("kinds", []) for p in row.pop("problems")]
    report["problems"] = problems + report.get("steady", {}).pop("problems", [])
    return report


def run_bench(config: BenchConfig, *, log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Run the configured suites on the configured (or a throwaway) Redis; return the report."""
    with contextlib.ExitStack() as stack:
        target = stack.enter_context(bench_redis(config.redis_url))
        log(f"benchmarking on {target.flavour} at {target.url}")
        sink = config.sink
        if "{tmpdir}" in sink:
            tmpdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="relayd-bench-"))
            sink = sink.replace("{tmpdir}", tmpdir)
        if sink == f"webhook:{LOCAL_PLACEHOLDER}":
            sink = "webhook:" + stack.enter_context(http_target(config.http_server))
            log(f"started a {config.http_server} server at {sink.partition(':')[2]}")
        owned = config.redis_url is None  # a server the bench started: it may switch notifications on
        return asyncio.run(_run(config, target.url, target.flavour, log, owned=owned, sink=sink))
