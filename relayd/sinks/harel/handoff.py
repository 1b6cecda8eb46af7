"""The harel sink as a safety net: harel's own relay and workers get the first chance.

Beside a live harel, its worker relays what it commits inline (its transport relay, right
after the commit) and fires due timers whenever it is idle. relayd reading the same outbox races
it; so the sink hands off:

- an outbox or spawn entry is looked at only once it is ``handoff_delay_s`` old (counted from
  when relayd read it, so at least that old); if harel's relay has acked it meanwhile (its field
  is gone from ``P:outbox`` / ``P:spawns``) it is Delivered without being published again (left
  to harel), else relayd publishes it (picked up);
- a timer is looked at only once it is ``timer_grace_s`` past due, and published only while its
  workflow is idle in harel's transport: no event queued (``P:q:{id}``) and none in flight
  (``P:lock:{id}``) for its execution or any ancestor (``parent_id`` up the execution records).
  That is harel's own rule (its worker fires timers only when it has nothing to claim), per
  workflow: an event queued before the timer fired is handled first. A timer harel fired (or a
  transition cancelled) meanwhile is gone from ``P:timers``: Delivered, left to harel. A
  workflow still busy after ``timer_hold_s`` is Retry for that timer.

The counts (``HandoffCounts``) say what relayd picked up because harel did not, per prefix and
kind, and what it found harel had done.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Final

import orjson

from relayd.envelope import Envelope
from relayd.state.keys import RelayKeys
from store import Keyspace

#: Defaults (seconds), from harel 0.9's own relay latency, measured (docs/harel.md#handoff):
#: its inline relay acks what a commit queued well within them.
DEFAULT_HANDOFF_DELAY_S: Final = 3.0
DEFAULT_TIMER_GRACE_S: Final = 3.0
DEFAULT_TIMER_HOLD_S: Final = 30.0
#: How often a held timer's workflow is looked at again.
IDLE_POLL_S: Final = 0.05
#: The longest chain of parents followed up from a timer's execution.
MAX_ANCESTORS: Final = 32
#: Who delivered an entry: ``relayd`` picked it up, or ``harel`` had done it already.
BY_RELAYD: Final = "relayd"
BY_HAREL: Final = "harel"


class HandoffCounts:
    """Entries relayd picked up (harel had not) and entries it found harel had delivered."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, str]] = Counter()  # (prefix, kind, by) -> entries
        #: called with (prefix, kind, by, n) on each count (the metric, the status hash)
        self.listeners: list[Callable[[str, str, str, int], None]] = []

    def add(self, prefix: str, kind: str, by: str, n: int) -> None:
        if n <= 0:
            return
        self.counts[prefix, kind, by] += n
        for listener in self.listeners:
            listener(prefix, kind, by, n)

    def of(self, by: str, kind: str | None = None) -> int:
        return sum(n for (_, k, b), n in self.counts.items() if b == by and kind in (None, k))


def status_key(prefix: str) -> str:
    """The hash ``relayd status`` reads the counts of a prefix from (field ``KIND:BY``)."""
    return RelayKeys(Keyspace(prefix)).harel()


def entry_seq(envelope: Envelope) -> str:
    """The hash field of an outbox or spawn entry: the seq its id ends with."""
    return envelope.id.rpartition(":")[2]


def timer_member(envelope: Envelope) -> str:
    """The ``P:timers`` member of a timer: ``execution_id NUL path``."""
    return f"{envelope.body['execution_id']}\x00{envelope.body['path']}"


async def sleep_until(deadline: float, clock: Callable[[], float]) -> None:
    wait = deadline - clock()
    if wait > 0:
        await asyncio.sleep(wait)


async def wait_for_handoff(envelopes: Sequence[Envelope], delay_s: float, clock: Callable[[], float]) -> None:
    """Until every envelope of the batch was read at least ``delay_s`` ago."""
    read_at = max(_number(envelope.body.get("relayed_at"), clock()) for envelope in envelopes)
    await sleep_until(read_at + delay_s, clock)


async def still_pending(client: Any, envelopes: Sequence[Envelope]) -> list[bool]:
    """Whether each outbox or spawn entry is still in harel's outbox (harel's relay has not acked it)."""
    hashes = {"outbox": "outbox", "spawn": "spawns"}
    async with client.pipeline(transaction=False) as pipe:
        for envelope in envelopes:
            pipe.hexists(f"{envelope.prefix}:{hashes[envelope.kind]}", entry_seq(envelope))
        return [bool(found) for found in await pipe.execute()]


async def timers_armed(client: Any, envelopes: Sequence[Envelope]) -> list[bool]:
    """Whether each timer is still armed at its fire_at (harel has neither fired nor cancelled it)."""
    async with client.pipeline(transaction=False) as pipe:
        for envelope in envelopes:
            pipe.zscore(f"{envelope.prefix}:timers", timer_member(envelope))
        scores = await pipe.execute()
    return [
        score is not None and float(score) == _number(envelope.body["fire_at"], -1.0)
        for envelope, score in zip(envelopes, scores, strict=True)
    ]


async def busy_workflows(
    store_client: Any, transport_client: Any, prefix: str, execution_ids: Sequence[str]
) -> set[str]:
    """Which of ``execution_ids`` have an event queued or in flight for them or an ancestor."""
    chains = {
        execution_id: await _ancestry(store_client, prefix, execution_id) for execution_id in execution_ids
    }
    groups = sorted({group for chain in chains.values() for group in chain})
    async with transport_client.pipeline(transaction=False) as pipe:
        for group in groups:
            pipe.llen(f"{prefix}:q:{group}")
            pipe.exists(f"{prefix}:lock:{group}")
        replies = await pipe.execute()
    busy_groups = {
        group
        for group, queued, locked in zip(groups, replies[::2], replies[1::2], strict=True)
        if queued or locked
    }
    return {execution_id for execution_id, chain in chains.items() if busy_groups.intersection(chain)}


async def _ancestry(client: Any, prefix: str, execution_id: str) -> list[str]:
    """``execution_id`` and its parents up the execution records' ``parent_id``."""
    chain = [execution_id]
    while len(chain) <= MAX_ANCESTORS:
        record = await client.get(f"{prefix}:exe:{chain[-1]}")
        parent = _parent_of(record)
        if parent is None or parent in chain:
            break
        chain.append(parent)
    return chain


def _parent_of(record: bytes | str | None) -> str | None:
    if record is None:
        return None
    try:
        execution = orjson.loads(record)
    except orjson.JSONDecodeError:
        return None
    parent = execution.get("parent_id") if type(execution) is dict else None
    return parent if isinstance(parent, str) else None


def _number(value: object, default: float) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default
