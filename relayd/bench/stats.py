"""Pure figures of ``relayd bench``: latencies, percentiles, command deltas, ratios, report rows.

Nothing here touches Redis, a clock or a terminal: the I/O shells (``relayd.bench.meter`` and
the suites) measure, these functions turn measurements into the numbers the table and ``--json``
print.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

#: The event data field (outbox) / spawn context field the seeder stamps with the commit time.
COMMITTED_AT: Final = "committed_at"
#: INFO commandstats entries that are the benchmark's own probes, not the relay's work.
PROBE_COMMANDS: Final = frozenset({"info", "config|get", "config|set", "config", "ping"})


def committed_at(body: Mapping[str, Any]) -> float | None:
    """When the entry behind a ``relayd/1`` envelope body was committed (epoch seconds).

    Outbox and spawn entries carry the seeder's stamp (event data / spawn context); a timer's
    reference point is its ``fire_at``: it cannot be delivered before it is due.
    """
    kind = body.get("kind")
    holder: Any
    if kind == "timer":
        fire_at = body.get("fire_at")
        return float(fire_at) if isinstance(fire_at, int | float) else None
    if kind == "outbox":
        event = body.get("event")
        holder = event.get("data") if isinstance(event, dict) else None
    else:
        holder = body.get("context")
    stamp = holder.get(COMMITTED_AT) if isinstance(holder, dict) else None
    return float(stamp) if isinstance(stamp, int | float) else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) by nearest rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def parse_commandstats(info: Mapping[str, Any]) -> dict[str, int]:
    """``INFO commandstats`` as redis-py parses it → ``{command: calls}``."""
    calls: dict[str, int] = {}
    for name, stats in info.items():
        command = name.removeprefix("cmdstat_")
        if isinstance(stats, Mapping) and "calls" in stats:
            calls[command] = int(stats["calls"])
    return calls


def commands_delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """Calls per command between two snapshots, the benchmark's own probes left out."""
    delta = {cmd: after[cmd] - before.get(cmd, 0) for cmd in after if cmd not in PROBE_COMMANDS}
    return {cmd: n for cmd, n in sorted(delta.items()) if n > 0}


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


@dataclass(frozen=True, slots=True)
class RunFigures:
    """One drain of one backlog by one method (relay or baseline)."""

    method: str  # "relay" or "baseline"
    kind: str
    entries: int  # seeded
    delivered: int  # delivery calls confirmed by the sink (at-least-once: may exceed entries)
    left: int  # entries still in the live structure after the drain
    duration_s: float
    cpu_s: float
    latencies_s: Sequence[float] = field(default_factory=tuple, repr=False)
    commands: Mapping[str, int] | None = None  # None: the server has no INFO (the embedded one)
    redis_cpu_s: float | None = None
    peak_rss_mb: float | None = None

    @property
    def rate_per_s(self) -> float:
        return self.delivered / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def commands_per_entry(self) -> float | None:
        if self.commands is None or not self.delivered:
            return None
        return sum(self.commands.values()) / self.delivered

    def summary(self) -> dict[str, Any]:
        """The JSON-ready figures (latencies reduced to p50/p99/max)."""
        out = {k: v for k, v in asdict(self).items() if k != "latencies_s"}
        out |= {
            "entries_per_s": round(self.rate_per_s, 1),
            **latency_figures(self.latencies_s),
            "commands_per_entry": rounded(self.commands_per_entry, 3),
            "duration_s": round(self.duration_s, 4),
            "cpu_s": round(self.cpu_s, 4),
            "cpu_per_entry_us": round(self.cpu_s / self.delivered * 1e6, 1) if self.delivered else None,
        }
        return out


def rounded(value: float | None, digits: int = 6) -> float | None:
    """``value`` rounded for the report; None stays None (no figure)."""
    return None if value is None else round(value, digits)


def latency_figures(latencies_s: Sequence[float]) -> dict[str, float | None]:
    """p50, p99 and max of commit-to-delivery latencies (None without any)."""
    return {
        "p50_latency_s": rounded(percentile(latencies_s, 50)),
        "p99_latency_s": rounded(percentile(latencies_s, 99)),
        "max_latency_s": rounded(max(latencies_s, default=None)),
    }


def kind_row(relay: RunFigures, baseline: RunFigures | None) -> dict[str, Any]:
    """One kind: the relay's figures, the baseline's, and how many times faster the relay was."""
    row: dict[str, Any] = {"kind": relay.kind, "relay": relay.summary()}
    if baseline is not None:
        row["baseline"] = baseline.summary()
        speedup = ratio(relay.rate_per_s, baseline.rate_per_s)
        row["speedup"] = None if speedup is None else round(speedup, 2)
    return row


def median_run(runs: Sequence[RunFigures]) -> RunFigures:
    """The run with the median rate (of an even count, the slower of the middle two)."""
    ordered = sorted(runs, key=lambda run: run.rate_per_s)
    return ordered[(len(ordered) - 1) // 2]


def sane(runs: Iterable[RunFigures]) -> list[str]:
    """What is wrong with a set of runs: entries left behind or fewer deliveries than entries."""
    problems = []
    for run in runs:
        if run.left:
            problems.append(f"{run.method} {run.kind}: {run.left} entries left undrained")
        if run.delivered < run.entries:
            problems.append(f"{run.method} {run.kind}: delivered {run.delivered} of {run.entries}")
    return problems
