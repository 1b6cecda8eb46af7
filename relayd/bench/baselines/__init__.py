"""Per-sink client baselines: the least a sink's own client must do to deliver the same entries.

A sink scheme ``S`` (``webhook``, ``kafka``, ...) has a baseline when the module
``relayd.bench.baselines.<S with '-' as '_'>`` exists and defines one of two functions.

``publish``: the sink's client library sending the same bodies::

    async def publish(spec: str, bodies: Sequence[bytes], keys: Sequence[str | None]) -> int
    async def publish(spec, bodies, keys, options: SinkOptions) -> int   # when it needs them

``spec`` is the sink spec the relay was benchmarked with (same target, same options, its
placeholders filled in), ``bodies`` the rendered ``relayd/1`` envelopes of an identical backlog
(the bench seeds it and renders it as the relay would, outside the measurement), ``keys`` their
ordering keys, ``options`` the ``SinkOptions`` the relay's sink got (signing secret, concurrency,
CA file), passed only to a function that declares a fourth parameter. It sends every body as the
library's own documentation would, at the sink's concurrency, waits for every confirmation and
returns how many were confirmed.

``drain_backlog``: a relay that drains a backlog its own way (harel's inline relay)::

    async def drain_backlog(redis_url: str, prefix: str, kind: Kind) -> int

drains the backlog the bench seeded under ``prefix`` on ``redis_url`` (identical to the relay's)
and returns how many entries it delivered; the bench counts what it left behind.

The bench meters either exactly as it meters the relay (wall time, process CPU, Redis commands)
and prints the relay's rate as a ratio of it. A scheme without a module is measured against the
incumbent-style drain (``relayd.bench.seed.drain_like_incumbent``), as the stream sink is.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from relayd.envelope import Kind
from relayd.sinks.base import SinkOptions

Publish = Callable[[str, Sequence[bytes], Sequence[str | None], SinkOptions], Awaitable[int]]
DrainBacklog = Callable[[str, str, Kind], Awaitable[int]]


@dataclass(frozen=True, slots=True)
class ClientBaseline:
    """A scheme's baseline: exactly one of ``publish`` and ``drain_backlog`` is set."""

    scheme: str
    publish: Publish | None = None
    drain_backlog: DrainBacklog | None = None


def baseline_for(spec: str) -> ClientBaseline | None:
    """The client baseline of ``spec``'s sink scheme, or None when it has none."""
    scheme = spec.partition(":")[0]
    module_name = f"{__name__}.{scheme.replace('-', '_')}"
    try:
        module: ModuleType = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        return None
    publish = getattr(module, "publish", None)
    if publish is not None:
        return ClientBaseline(scheme, publish=_with_options(publish))
    drain = getattr(module, "drain_backlog", None)
    if drain is None:
        raise TypeError(f"{module_name} defines neither publish() nor drain_backlog()")
    return ClientBaseline(scheme, drain_backlog=drain)


def _with_options(publish: Callable[..., Awaitable[int]]) -> Publish:
    """``publish`` as a four-argument function; a three-argument one is not handed the options."""
    if len(inspect.signature(publish).parameters) >= 4:
        return publish

    def without_options(
        spec: str, bodies: Sequence[bytes], keys: Sequence[str | None], options: SinkOptions
    ) -> Awaitable[int]:
        del options
        result: Awaitable[Any] = publish(spec, bodies, keys)
        return result

    return without_options
