"""harel 0.9's transport wire format: the event JSON it queues and one batch's publish plan.

Pure: no Redis, no clock. harel's transport queues each event as its ``Event`` model's JSON
(``model_dump_json``: the fields ``id``, ``kind``, ``created_time``, ``received_time`` and
``data``, in that order, anything else dropped), so an event read from the outbox is written
back in that form, as harel's relay does when it loads and publishes it. The keys the events go
to, and how a group's priority is chosen, are in ``scripts/harel_publish.lua``.

A plan groups a batch's events by transport group (the target execution), each group's events in
batch order: the script queues a group's events with one RPUSH, and a group that fails holds
back only its own events.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import pydantic
import pydantic_core

from relayd.sinks.base import DELIVERED, Outcome, Retry
from relayd.sinks.per_key import HELD_BACK

#: The fields of harel's ``Event``, in the order its JSON has them.
EVENT_FIELDS: Final = frozenset({"id", "kind", "created_time", "received_time", "data"})
#: The first and highest priority tiers of harel's transport (a priority is clamped into them).
LOWEST_PRIORITY: Final = 0
HIGHEST_PRIORITY: Final = 4


class WireEvent(pydantic.BaseModel):
    """harel's ``Event`` as its transport carries it: the slow path of ``event_json``."""

    id: str = pydantic.Field(default_factory=lambda: uuid.uuid4().hex)
    kind: str
    created_time: datetime.datetime | None = None
    received_time: datetime.datetime | None = None
    data: dict[str, object] = pydantic.Field(default_factory=dict)


def event_json(event: object) -> bytes:
    """The JSON harel's transport queues for ``event`` (an outbox event as decoded).

    An event with a string id and kind, no times and an object (or no) ``data`` is written with
    pydantic's own serialiser, which is what ``model_dump_json`` runs for these values (a fifth
    of the cost of building the model); anything else goes through the model.

    Raises:
        pydantic.ValidationError: harel's ``Event`` would refuse it too (a ``ValueError``).
    """
    if type(event) is dict and event.keys() <= EVENT_FIELDS:
        id_, kind, data = event.get("id"), event.get("kind"), event.get("data", {})
        plain = event.get("created_time") is None and event.get("received_time") is None
        if plain and type(id_) is str and type(kind) is str and type(data) is dict:
            return _dumps(id_, kind, data)
    return WireEvent.model_validate(event).model_dump_json().encode()


def timeout_event_json(execution_id: str, path: str, fire_at: float) -> bytes:
    """The JSON of harel's ``timeout_event(execution_id, path, fire_at)``, exactly."""
    data = {"path": path, "fire_at": fire_at}
    return _dumps(f"timeout:{execution_id}:{path}:{fire_at}", "Timeout", data)


def _dumps(id_: str, kind: str, data: dict[str, object]) -> bytes:
    return pydantic_core.to_json(
        {"id": id_, "kind": kind, "created_time": None, "received_time": None, "data": data}
    )


@dataclass(slots=True)
class GroupPublish:
    """One transport group's events of a batch: their batch indexes and JSON, in batch order."""

    group: str
    indexes: list[int] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)


@dataclass(slots=True)
class PublishPlan:
    """What one prefix's script call publishes: the groups, each in first-seen order."""

    prefix: str
    groups: dict[str, GroupPublish] = field(default_factory=dict)
    #: groups with an entry that will not be published: their later entries are held back
    stopped: set[str] = field(default_factory=set)

    def add(self, index: int, group: str, payload: bytes) -> bool:
        """Queue entry ``index`` for ``group``; False when the group is stopped (held back)."""
        if group in self.stopped:
            return False
        publish = self.groups.get(group)
        if publish is None:
            publish = self.groups[group] = GroupPublish(group)
        publish.indexes.append(index)
        publish.payloads.append(payload)
        return True

    def stop(self, group: str) -> None:
        """An entry of ``group`` is not published: hold back its later entries in this batch."""
        self.stopped.add(group)

    def refuse(self, group: str, reason: str, outcomes: list[Outcome]) -> None:
        """Take ``group`` out of the plan: its first entry is Retry for ``reason``, the rest held back."""
        publish = self.groups.pop(group)
        _retry(publish, f"harel transport refused the group ({reason})", outcomes)

    def script_args(self, priorities: Mapping[str, int] | None) -> list[str | bytes | int]:
        """ARGV of ``harel_publish.lua``: priorities read by the script, or the ones given."""
        args: list[str | bytes | int] = [self.prefix, "read" if priorities is None else "given"]
        for publish in self.groups.values():
            priority = 0 if priorities is None else priorities.get(publish.group, 0)
            args += (publish.group, priority, len(publish.payloads), *publish.payloads)
        return args


def apply_replies(plan: PublishPlan, replies: Sequence[object], outcomes: list[Outcome]) -> None:
    """Set each planned entry's outcome from its group's script reply (1, or why it failed)."""
    for publish, reply in zip(plan.groups.values(), replies, strict=True):
        if reply == 1:
            for index in publish.indexes:
                outcomes[index] = DELIVERED
            continue
        reason = reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
        _retry(publish, f"harel transport refused the group ({reason[:200]})", outcomes)


def _retry(publish: GroupPublish, error: str, outcomes: list[Outcome]) -> None:
    first, *rest = publish.indexes
    outcomes[first] = Retry(error=error)
    for index in rest:
        outcomes[index] = Retry(error=HELD_BACK)
