"""The data the store reads and writes, JSON-compatible with harel 0.9 both ways.

Pydantic models for what crosses the Redis boundary as JSON (``Event``, ``Execution`` and
its listing projections); small dataclasses for the relay's value types (``OutboxEntry``,
``SpawnEntry``, ``TimerOp``), which harel builds positionally and reads by attribute.

Every model allows extra fields, so a record written by a newer engine keeps the fields this
package does not know through a load → save round trip.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, Literal

import pydantic
from typing_extensions import TypeVar

_EXTRA = pydantic.ConfigDict(extra="allow")


def _new_id() -> str:
    return uuid.uuid4().hex


class Status(StrEnum):
    """An execution's lifecycle state (harel's values, verbatim)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    DONE = "DONE"
    CANCELLED = "CANCELLED"
    SUSPENDED = "SUSPENDED"
    CANCELLING = "CANCELLING"
    FAILED = "FAILED"


class Event(pydantic.BaseModel):
    """A stimulus for an execution; ``id`` is the dedupe key under at-least-once delivery."""

    model_config = _EXTRA

    id: str = pydantic.Field(default_factory=_new_id)
    kind: str
    created_time: datetime.datetime | None = None
    received_time: datetime.datetime | None = None
    data: dict[str, Any] = pydantic.Field(default_factory=dict)


class ChildState(pydantic.BaseModel):
    """What an orthogonal parent knows of one spawned region (the join counter)."""

    model_config = _EXTRA

    root_path: str
    finished: bool = False
    outcome: str | None = None
    result: dict[str, Any] = pydantic.Field(default_factory=dict)
    submachine: bool = False
    key: str = ""


class Execution(pydantic.BaseModel):
    """One running instance of a definition; ``version`` is the optimistic-concurrency token.

    Times (``created_at``, ``updated_at``, ``finished_at``, ``expires_at``) are epoch seconds.
    """

    model_config = _EXTRA

    id: str = pydantic.Field(default_factory=_new_id)
    definition_id: str
    definition_fqn: str | None = None
    root_path: str = ""
    status: Status = Status.PENDING
    outcome: str | None = None
    error: str | None = None
    active_path: str | None = None
    history: dict[str, Any] = pydantic.Field(default_factory=dict)
    context: dict[str, Any] = pydantic.Field(default_factory=dict)
    processed_events: int = 0
    version: int = 0
    priority: int = pydantic.Field(default=0, ge=0, le=4)
    parent_id: str | None = None
    child_id: str | None = None
    deferred: list[Event] = pydantic.Field(default_factory=list)
    children: dict[str, ChildState] = pydantic.Field(default_factory=dict)
    invoke_seq: dict[str, int] = pydantic.Field(default_factory=dict)
    created_at: float | None = None
    updated_at: float | None = None
    finished_at: float | None = None
    expires_at: float | None = None


class ExecutionSummary(pydantic.BaseModel):
    """The cheap projection of an execution that a listing returns."""

    model_config = _EXTRA

    id: str
    definition_id: str
    status: Status
    outcome: str | None = None
    active_path: str | None = None
    version: int = 0
    parent_id: str | None = None
    finished_at: float | None = None

    @classmethod
    def from_data(cls, data: dict[str, Any], version: int) -> ExecutionSummary:
        """Project a parsed execution JSON object (``version`` given separately, as harel does)."""
        return cls(
            id=data["id"],
            definition_id=data["definition_id"],
            status=data["status"],
            outcome=data.get("outcome"),
            active_path=data.get("active_path"),
            version=version,
            parent_id=data.get("parent_id"),
            finished_at=data.get("finished_at"),
        )


class ExecutionPage(pydantic.BaseModel):
    """One page of a listing; keep paging while ``next_cursor`` is not None (it is opaque)."""

    items: list[ExecutionSummary] = pydantic.Field(default_factory=list)
    next_cursor: str | None = None


EventT = TypeVar("EventT", default=Event)


@dataclass(frozen=True, slots=True)
class OutboxEntry(Generic[EventT]):
    """A deferred event awaiting delivery: ``seq`` (for the ack), its target and the event."""

    seq: int
    target_id: str | None
    event: EventT


@dataclass(frozen=True, slots=True)
class SpawnEntry:
    """A pending child-execution creation committed with its parent's fork."""

    seq: int
    parent_id: str
    child_id: str
    root_path: str
    context: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TimerOp:
    """A durable-timer change applied with a commit: arm (upsert) or disarm ``path``.

    ``fire_at`` is epoch seconds; it is ignored for ``cancel``.
    """

    action: Literal["schedule", "cancel"]
    path: str
    fire_at: float = 0.0
