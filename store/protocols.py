"""The seams: what an engine hands the store, and what the store offers an engine.

``JsonModel`` / ``VersionedModel`` describe the pydantic classes an engine may pass in
(ours by default, harel's work as they are); ``ExecutionStore`` and ``AsyncExecutionStore``
are the specification's store interface, which ``RedisStore`` and ``AsyncRedisStore``
implement (plus the relay extensions, which are concrete methods, not part of the seam).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

if TYPE_CHECKING:
    from store.models import Execution, ExecutionPage, OutboxEntry, SpawnEntry, Status


class JsonModel(Protocol):
    """A model that serialises to and parses from JSON (any pydantic v2 model)."""

    def model_dump_json(self) -> str: ...

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray) -> Self: ...


class VersionedModel(JsonModel, Protocol):
    """An execution model: a JSON model with an ``id`` and a ``version`` counter."""

    id: str
    version: int


class TimerOpLike(Protocol):
    """A timer change as any engine spells it (ours or harel's ``TimerOp``)."""

    @property
    def action(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def fire_at(self) -> float: ...


class ConflictFactory(Protocol):
    """Builds the error a lost compare-and-set raises (our ``StoreConflict`` or harel's)."""

    def __call__(self, execution_id: str, *, expected: int, found: int | None) -> Exception: ...


#: ``(child_id, root_path, context)``: one orthogonal-fork child to create.
SpawnIntent = tuple[str, str, Mapping[str, Any]]


@runtime_checkable
class ExecutionStore(Protocol):
    """The synchronous store seam (the specification's operations)."""

    def load(self, execution_id: str) -> Execution | None: ...

    def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage: ...

    def save(self, exe: Execution) -> None: ...

    def commit(  # noqa: PLR0917  # the specification's positional signature
        self,
        exe: Execution,
        emits: Sequence[tuple[str | None, Any]],
        processed_event_id: str | None = None,
        timers: Sequence[TimerOpLike] = (),
        spawns: Sequence[SpawnIntent] = (),
        trace: Mapping[str, Any] | None = None,
        step: object | None = None,
    ) -> list[int]: ...

    def is_processed(self, execution_id: str, event_id: str) -> bool: ...

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]: ...

    def append_trace(self, execution_id: str, entry: Mapping[str, Any]) -> None: ...

    def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry[Any]]: ...

    def ack_outbox(self, seq: int) -> None: ...

    def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]: ...

    def ack_spawn(self, seq: int) -> None: ...

    def due_timers(self, now: float, limit: int | None = None) -> list[tuple[str, str, float]]: ...

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> bool: ...

    def ids_with_prefix(self, prefix: str) -> list[str]: ...

    def purge(self, execution_id: str, expected_version: int) -> bool: ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncExecutionStore(Protocol):
    """The asyncio store seam: the same operations, awaited, plus ``load_for_event``."""

    async def load(self, execution_id: str) -> Execution | None: ...

    async def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]: ...

    async def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage: ...

    async def save(self, exe: Execution) -> None: ...

    async def commit(  # noqa: PLR0917  # the specification's positional signature
        self,
        exe: Execution,
        emits: Sequence[tuple[str | None, Any]],
        processed_event_id: str | None = None,
        timers: Sequence[TimerOpLike] = (),
        spawns: Sequence[SpawnIntent] = (),
        trace: Mapping[str, Any] | None = None,
        step: object | None = None,
    ) -> list[int]: ...

    async def is_processed(self, execution_id: str, event_id: str) -> bool: ...

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]: ...

    async def append_trace(self, execution_id: str, entry: Mapping[str, Any]) -> None: ...

    async def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry[Any]]: ...

    async def ack_outbox(self, seq: int) -> None: ...

    async def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]: ...

    async def ack_spawn(self, seq: int) -> None: ...

    async def due_timers(self, now: float, limit: int | None = None) -> list[tuple[str, str, float]]: ...

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> bool: ...

    async def ids_with_prefix(self, prefix: str) -> list[str]: ...

    async def purge(self, execution_id: str, expected_version: int) -> bool: ...

    async def aclose(self) -> None: ...
