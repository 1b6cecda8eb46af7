"""What the sync and async Redis stores share: construction, decoding and error mapping.

No Redis call is made here; the twins in ``redis_store`` and ``async_redis_store`` do the I/O.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from store import codec, plans
from store.backlog import RawTimer
from store.errors import MalformedEntry, StoreConflict, StoreUnavailable
from store.fence import Fence, fenced_call, fenced_refusal
from store.keys import Keyspace
from store.protocols import ConflictFactory, JsonModel, VersionedModel
from store.scripts import CAS_COMMIT, FENCED_HDEL, TIMER_COMPARE_DELETE

if TYPE_CHECKING:
    from store.models import Event, Execution, OutboxEntry, SpawnEntry

# The defaults are named, not imported: the models load on first use (see ``execution_model``).
ExeT = TypeVar("ExeT", bound=VersionedModel, default="Execution")
EvtT = TypeVar("EvtT", bound=JsonModel, default="Event")

#: The ring size of the per-execution trace (steps kept).
DEFAULT_TRACE_MAX = 200


def as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


class StoreCore(Generic[ExeT, EvtT]):
    """Configuration and pure helpers of a Redis store over an injected, duck-typed client."""

    def __init__(
        self,
        client: Any,
        *,
        prefix: str = "stm",
        execution_model: type[ExeT] | None = None,
        event_model: type[EvtT] | None = None,
        conflict_error: ConflictFactory = StoreConflict,
        trace_max: int = DEFAULT_TRACE_MAX,
        clock: Callable[[], float] = time.time,
    ) -> None:
        # redis stays importable lazily: only its exception classes are needed here
        from redis import exceptions

        self.client = client
        self.keyspace = Keyspace(prefix)
        self._execution_model = execution_model
        self._event_model = event_model
        self.conflict_error = conflict_error
        self.trace_max = trace_max
        # A cluster client routes a keyless TIME to a node of its own choosing: no commit time there.
        self.stamps_commit_time = not hasattr(client, "get_nodes")
        self.clock = clock
        self._WatchError = exceptions.WatchError
        self._ResponseError = exceptions.ResponseError
        self._unavailable = (exceptions.ConnectionError, exceptions.TimeoutError)
        self._cas_script = client.register_script(CAS_COMMIT)
        self._timer_delete_script = client.register_script(TIMER_COMPARE_DELETE)
        self._fenced_hdel_script = client.register_script(FENCED_HDEL)
        # the store's own backlog readers (one per kind), behind pending_outbox/spawns(limit)
        self._readers: dict[str, Any] = {}

    @property
    def execution_model(self) -> type[ExeT]:
        """The execution class given, or ``store.models.Execution``, imported on first use.

        The relay reads and acks raw entries and never needs a model: importing them (and
        pydantic) only when an engine loads or lists keeps ``relayd sweep`` quick to start
        (``tests/benchmarks/bench_startup.py``).
        """
        if self._execution_model is None:
            from store.models import Execution

            self._execution_model = Execution  # type: ignore[assignment]  # the TypeVar default
        return self._execution_model  # type: ignore[return-value]  # set just above when None

    @property
    def event_model(self) -> type[EvtT]:
        """The event class given, or ``store.models.Event``, imported on first use."""
        if self._event_model is None:
            from store.models import Event

            self._event_model = Event  # type: ignore[assignment]  # the TypeVar default
        return self._event_model  # type: ignore[return-value]  # set just above when None

    @property
    def prefix(self) -> str:
        return self.keyspace.prefix

    def _forget(self, kind: str, fields: Iterable[str]) -> None:
        """Tell the store's own backlog reader of ``kind``, if it has one, these fields are gone."""
        reader = self._readers.get(kind)
        if reader is not None:
            reader.resolve(fields)

    @contextmanager
    def _io(self, fence: Fence | None = None) -> Iterator[None]:
        """Map an unreachable Redis to ``StoreUnavailable`` and a write refused by ``fence`` to
        ``StoreFenced`` (wrapped once, here)."""
        try:
            yield
        except self._unavailable as exc:
            raise StoreUnavailable(
                f"redis unreachable for prefix {self.prefix!r}: {type(exc).__name__}"
            ) from exc
        except self._ResponseError as exc:
            if (fenced := fenced_refusal(exc, fence)) is not None:
                raise fenced from exc
            raise

    def _hash_key(self, kind: str) -> str:
        return self.keyspace.outbox if kind == "outbox" else self.keyspace.spawns

    @staticmethod
    def _timer_delete_call(
        timers_key: str, args: list[bytes | str | float], fence: Fence | None
    ) -> tuple[list[str], list[bytes | str | float]]:
        """KEYS and ARGV of the timer compare-and-delete script, fenced or not."""
        return fenced_call([timers_key], args, fence)

    def _allocation(self, plan: plans.CommitPlan) -> plans.Allocation:
        """The plan's allocation, reading the server's clock too when values get a commit time."""
        alloc = plan.allocation
        if self.stamps_commit_time and (alloc.outbox or alloc.spawns):
            return dataclasses.replace(alloc, clock=True)
        return alloc

    def _conflict(self, execution_id: str, expected: int, found: int | None) -> Exception:
        return self.conflict_error(execution_id, expected=expected, found=found)

    def _fast_conflict(self, exc: Exception, execution_id: str, old: int) -> Exception | None:
        """The conflict a fast-path error reply stands for; None when it is not our tag."""
        ours, found = plans.conflict_version(str(exc))
        return self._conflict(execution_id, old, found) if ours else None

    def _load_model(self, raw: bytes | str | None) -> ExeT | None:
        return self.execution_model.model_validate_json(raw) if raw is not None else None

    def _outbox(self, pairs: Iterable[tuple[Any, Any]]) -> list[OutboxEntry[EvtT]]:
        out: list[OutboxEntry[EvtT]] = []
        for field, value in pairs:
            if value is None:
                continue
            try:
                out.append(codec.decode_outbox(field, value, self.event_model))
            except MalformedEntry:
                continue  # left in the hash for relayd to dead-letter; an engine cannot use it
        return sorted(out, key=lambda e: e.seq)

    def _spawns(self, pairs: Iterable[tuple[Any, Any]]) -> list[SpawnEntry]:
        out: list[SpawnEntry] = []
        for field, value in pairs:
            if value is None:
                continue
            try:
                out.append(codec.decode_spawn(field, value))
            except MalformedEntry:
                continue  # left in the hash for relayd to dead-letter
        return sorted(out, key=lambda e: e.seq)

    @staticmethod
    def _timers(rows: Iterable[tuple[Any, Any]]) -> list[tuple[str, str, float]]:
        out: list[tuple[str, str, float]] = []
        for member, score in rows:
            try:
                out.append(codec.decode_timer(member, score))
            except MalformedEntry:
                continue  # relayd dead-letters it through due_timer_entries
        return out

    @staticmethod
    def _raw_timers(rows: Iterable[tuple[Any, Any]], limit: int, skip: Iterable[bytes]) -> list[RawTimer]:
        skipped = {as_bytes(m) for m in skip}
        out = [RawTimer(as_bytes(m), float(s)) for m, s in rows if as_bytes(m) not in skipped]
        return out[:limit]

    def _zrange_args(self, now: float, limit: int | None) -> dict[str, Any]:
        if limit is None:
            return {"withscores": True}
        return {"start": 0, "num": limit, "withscores": True}
