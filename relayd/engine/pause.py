"""Pure: what an operator's pauses hold back in one lane (one kind, one sink) of a prefix.

A pause matches a lane when each selector it names matches: its kind, its sink (the sink's name
or its guard's name, ``outbox+spawn:webhook`` when two sinks share a name). A matching pause
without a target holds the whole lane: nothing of it is read or delivered. A matching pause
with a target holds that ordering key only, through the engine's per-key hold-back: its entries
wait in the lane's line, in order, while the other keys flow. Nothing held is attempted, so no
attempt is charged and nothing is dead-lettered.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from relayd.state.pauses import Pause


@dataclass(frozen=True, slots=True)
class LaneHold:
    """What one lane holds back: all of it, or the ordering keys in ``keys``."""

    whole: bool = False
    keys: frozenset[str] = frozenset()


#: A lane nothing is paused in.
FREE = LaneHold()


def lane_hold(pauses: Iterable[Pause], *, kind: str, sink_names: Collection[str]) -> LaneHold:
    """What ``pauses`` hold back in the lane of ``kind`` delivering to a sink named ``sink_names``."""
    keys: set[str] = set()
    for pause in pauses:
        if pause.kind is not None and pause.kind != kind:
            continue
        if pause.sink is not None and pause.sink not in sink_names:
            continue
        if pause.target is None:
            return LaneHold(whole=True)
        keys.add(pause.target)
    return LaneHold(keys=frozenset(keys)) if keys else FREE
