"""The ``drain`` suite of ``relayd bench``: the relay draining seeded backlogs, beside a baseline.

Per kind, ``backlog`` entries are seeded through ``store`` and drained with ``run_relay``
(``once=True``) into the sink; then the baseline drains an identical backlog: the sink scheme's
own client baseline when ``relayd.bench.baselines`` has one (its client publishing the same
bodies, or its own relay draining the backlog), else the incumbent-style drain
(``relayd.bench.seed.drain_like_incumbent``) into a fresh sink of the same spec. Reported:
entries/s, commit-to-delivery p50/p99, Redis commands per entry, peak RSS, CPU seconds and CPU
per entry (the relay's, and the server's from INFO cpu) and the ratio.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from prometheus_client import CollectorRegistry

from relayd.bench.baselines import DrainBacklog, Publish
from relayd.bench.harness import Bench
from relayd.bench.meter import Meter
from relayd.bench.seed import drain_like_incumbent, live_count, render_backlog, seed
from relayd.bench.stats import RunFigures, kind_row, median_run, sane
from relayd.engine.loop import run_relay
from relayd.engine.options import SweepOptions
from relayd.envelope import KINDS, Kind
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics


async def drain_suite(bench: Bench) -> list[dict[str, Any]]:
    """One row per kind: the relay's figures, the baseline's, the ratio and any problem."""
    config = bench.config
    rows = []
    for kind in config.kinds:
        # On a shared machine one drain can be far off the next: with ``repeat`` the
        # median drain is reported and every drain's rate is kept beside it.
        # A client baseline is as noisy as the relay: with ``repeat`` it runs as often,
        # alternating with the relay, and its median is the ratio's denominator. The
        # incumbent drain (one round-trip per entry) runs once: it is far slower.
        runs: list[RunFigures] = []
        bases: list[RunFigures] = []
        for _ in range(config.repeat):
            runs.append(await relay_drain(bench, kind, config.backlog))
            if config.baseline and (bench.client_baseline is not None or not bases):
                bases.append(await _baseline_drain(bench, kind, config.backlog))
        relay = median_run(runs)
        baseline = median_run(bases) if bases else None
        row = kind_row(relay, baseline) | {"problems": sane([*runs, *bases])}
        if baseline is not None:
            row["baseline_by"] = baseline_name(bench)
        if len(runs) > 1:
            row["relay_entries_per_s"] = [run.summary()["entries_per_s"] for run in runs]
        if len(bases) > 1:
            row["baseline_entries_per_s"] = [run.summary()["entries_per_s"] for run in bases]
        rows.append(row)
    return rows


async def relay_drain(bench: Bench, kind: Kind, count: int) -> RunFigures:
    """Seed ``count`` entries of ``kind`` and drain them with the relay (``once``)."""
    async with bench.prefix() as prefix:
        bench.log(f"seeding {count} {kind} entries under {prefix!r}")
        seed(bench.sync, prefix, kind, count, clock=time.time)
        sink = bench.sink_for(prefix)
        options = SweepOptions(prefixes=(prefix,), batch=bench.config.batch, once=True)
        bench.log(f"draining {kind} with the relay")
        with Meter(bench.sync) as meter:
            await run_relay(
                options,
                redis=bench.client,
                sinks=dict.fromkeys(KINDS, sink),
                metrics=RelayMetrics(CollectorRegistry()),
                health=Health(),
                stop=asyncio.Event(),
            )
        return meter.figures("relay", kind, count, sink, left=live_count(bench.sync, prefix, kind))


def baseline_name(bench: Bench) -> str:
    """What the baseline is, for the report."""
    found = bench.client_baseline
    if found is None:
        return "incumbent-style drain, one round-trip per entry"
    if found.publish is not None:
        return f"{found.scheme} client publishing the same bodies"
    return f"{found.scheme}'s own relay draining an identical backlog"


async def _baseline_drain(bench: Bench, kind: Kind, count: int) -> RunFigures:
    found = bench.client_baseline
    if found is not None and found.publish is not None:
        return await _publish_baseline(bench, kind, count, found.publish)
    if found is not None and found.drain_backlog is not None:
        return await _drain_backlog_baseline(bench, kind, count, found.drain_backlog)
    return await _incumbent_drain(bench, kind, count)


async def _publish_baseline(bench: Bench, kind: Kind, count: int, publish: Publish) -> RunFigures:
    """The sink's client publishing the bodies of an identical backlog (rendered unmetered)."""
    async with bench.prefix() as prefix:
        seed(bench.sync, prefix, kind, count, clock=time.time)
        bodies, keys = await render_backlog(bench.client, prefix, kind, relayed_at=time.time())
        bench.log(f"publishing {len(bodies)} {kind} bodies with the {baseline_name(bench)}")
        with Meter(bench.sync) as meter:
            confirmed = await publish(bench.spec_for(prefix), bodies, keys, bench.config.sink_options)
        return meter.run_figures("baseline", kind, count, confirmed, left=count - confirmed)


async def _drain_backlog_baseline(bench: Bench, kind: Kind, count: int, drain: DrainBacklog) -> RunFigures:
    """Another relay draining an identical backlog its own way."""
    async with bench.prefix() as prefix:
        seed(bench.sync, prefix, kind, count, clock=time.time)
        bench.log(f"draining {kind} with the {baseline_name(bench)}")
        with Meter(bench.sync) as meter:
            delivered = await drain(bench.url, prefix, kind)
        left = live_count(bench.sync, prefix, kind)
        return meter.run_figures("baseline", kind, count, delivered, left=left)


async def _incumbent_drain(bench: Bench, kind: Kind, count: int) -> RunFigures:
    async with bench.prefix() as prefix:
        seed(bench.sync, prefix, kind, count, clock=time.time)
        sink = bench.sink_for(prefix)
        bench.log(f"draining {kind} the incumbent's way")
        await sink.start()
        try:
            with Meter(bench.sync) as meter:
                await drain_like_incumbent(bench.client, prefix, kind, sink, clock=time.time)
        finally:
            await sink.close()
        return meter.figures("baseline", kind, count, sink, left=live_count(bench.sync, prefix, kind))
