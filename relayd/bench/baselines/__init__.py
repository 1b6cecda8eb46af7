"""Per-sink client baselines: the least a sink's own client library must do to deliver the same bodies.

A sink scheme ``S`` (``webhook``, ``kafka``, ...) has a baseline when the module
``relayd.bench.baselines.<S with '-' as '_'>`` exists and defines::

    async def publish(spec: str, bodies: Sequence[bytes], keys: Sequence[str | None]) -> int

``spec`` is the sink spec the relay was benchmarked with (same target, same options),
``bodies`` the rendered ``relayd/1`` envelopes the relay delivered, ``keys`` their ordering keys.
It sends every body with the client library the sink is built on, as that library's own
documentation would (same concurrency as the sink's default), waits for every confirmation,
and returns how many were confirmed. The bench meters it (wall time, CPU) exactly as it meters
the relay and prints the relay's rate as a ratio of it.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Sequence
from types import ModuleType
from typing import cast

Publish = Callable[[str, Sequence[bytes], Sequence[str | None]], Awaitable[int]]


def baseline_for(spec: str) -> Publish | None:
    """The client baseline of ``spec``'s sink scheme, or None when it has none."""
    scheme = spec.partition(":")[0].replace("-", "_")
    try:
        module: ModuleType = importlib.import_module(f"{__name__}.{scheme}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{scheme}":
            raise
        return None
    return cast(Publish, module.publish)
