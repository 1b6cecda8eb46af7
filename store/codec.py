"""Pure JSON <-> model conversion for every stored value (exe, outbox, spawn, trace, timer).

The models (and pydantic) are imported by the functions that build them, on first use: the
relay reads and acks raw entries through this package and never loads them
(``tests/benchmarks/bench_startup.py``).

Writes produce exactly the wire shapes of docs/internals.md#key-space (compact JSON through orjson; readers
on both sides parse JSON, so spacing is not part of the contract). Reads of relay entries
raise ``MalformedEntry`` with a reason from ``MALFORMED_REASONS`` so the relay can
dead-letter them with a bounded label.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

import orjson

from store.errors import MalformedEntry
from store.keys import parse_timer_member
from store.protocols import JsonModel
from store.trace_context import TRACE_KEY

if TYPE_CHECKING:
    import pydantic

    from store.models import ExecutionSummary, OutboxEntry, SpawnEntry

M = TypeVar("M", bound=JsonModel)


def dumps(obj: Any) -> bytes:
    """``orjson.dumps``, copied into a bytes object of its own length.

    orjson (3.12 and later) hands back its whole write buffer as the bytes object. One that is
    kept (a cached envelope, a value waiting in a batch) holds all of it: a window's worth kept
    costs page faults and memory far beyond its text (``relayd bench --suite scale`` shows the
    peak RSS). The copy is cheap (home-assistant/core does the same).
    """
    return b"".join((orjson.dumps(obj), b""))


class _Models(NamedTuple):
    outbox_entry: type[OutboxEntry[Any]]
    spawn_entry: type[SpawnEntry]
    summary: type[ExecutionSummary]
    validation_error: type[pydantic.ValidationError]


@functools.cache
def _models() -> _Models:
    """The model classes and pydantic's ValidationError, imported on the first decode and kept.

    An import statement inside the decoders would run the import machinery again for every
    entry decoded; this cached lookup runs it once.
    """
    import pydantic

    from store.models import ExecutionSummary, OutboxEntry, SpawnEntry

    return _Models(OutboxEntry, SpawnEntry, ExecutionSummary, pydantic.ValidationError)


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes | bytearray) else raw


def parse_seq(field: bytes | str) -> int | None:
    """The seq a hash field names, or None unless it is a canonical decimal integer."""
    try:
        text = _text(field)
    except UnicodeDecodeError:
        return None
    if not (text.isascii() and text.isdigit()) or str(int(text)) != text:
        return None
    return int(text)


def _object(raw: bytes | str) -> dict[str, Any]:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise MalformedEntry("bad_json", str(exc)) from None
    if not isinstance(doc, dict):
        raise MalformedEntry("wrong_type", f"expected a JSON object, got {type(doc).__name__}")
    return doc


def stored_version(raw: bytes | str) -> int | None:
    """The ``version`` inside a stored execution JSON, None when absent or unreadable."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    version = doc.get("version") if isinstance(doc, dict) else None
    return version if isinstance(version, int) else None


def encode_outbox_value(
    target_id: str | None, event: JsonModel, trace: Mapping[str, str] | None = None
) -> bytes:
    """``{"t": target_id, "e": event_json_string}``: the event nested as a JSON *string*; with
    ``trace``, the commit's W3C trace context as ``"tc"`` too (``store.trace_context``)."""
    value: dict[str, object] = {"t": target_id, "e": event.model_dump_json()}
    if trace:
        value[TRACE_KEY] = dict(trace)
    return dumps(value)


def encode_spawn_value(
    parent_id: str,
    child_id: str,
    root_path: str,
    context: Mapping[str, Any],
    trace: Mapping[str, str] | None = None,
) -> bytes:
    """``{"p": parent_id, "c": child_id, "r": root_path, "x": context}``, and ``"tc"`` as above."""
    value: dict[str, object] = {"p": parent_id, "c": child_id, "r": root_path, "x": dict(context)}
    if trace:
        value[TRACE_KEY] = dict(trace)
    return dumps(value)


#: The extra key of an outbox or spawn value that holds its commit time: epoch seconds on the
#: Redis server's clock (``TIME`` in the round-trip that allocates the seqs). harel reads the
#: keys it knows and ignores this one, as it ignores ``tc`` (docs/store.md#commit-time).
COMMIT_TIME_KEY: Final = "ct"


def stamp_commit_time(value: bytes, committed_at: float) -> bytes:
    """``value`` (an encoded outbox or spawn object) with ``"ct": committed_at`` as its last key.

    The values are encoded before the seqs are allocated (a bad value fails with no seq spent),
    and the time comes with the allocation: the key is spliced in before the closing brace.
    """
    return b'%s,"%s":%s}' % (value[:-1], COMMIT_TIME_KEY.encode(), repr(float(committed_at)).encode())


def encode_trace_step(step: Mapping[str, Any], index: int) -> bytes:
    """A trace step stamped with its index (an index already on the step wins, as in harel)."""
    return dumps({**step, "index": step.get("index", index)})


def decode_trace_step(raw: bytes | str) -> dict[str, Any]:
    return _object(raw)


def decode_outbox(field: bytes | str, value: bytes | str, event_model: type[M]) -> OutboxEntry[M]:
    """One outbox hash field and value → ``OutboxEntry``.

    Raises:
        MalformedEntry: ``bad_seq``, ``bad_json``, ``wrong_type`` or ``missing_field``.
    """
    seq = parse_seq(field)
    if seq is None:
        raise MalformedEntry("bad_seq", f"outbox field {_text(field)!r} is not a decimal seq")
    models = _models()
    doc = _object(value)
    if "t" not in doc or "e" not in doc:
        raise MalformedEntry("missing_field", "outbox value needs 't' and 'e'")
    target, event_raw = doc["t"], doc["e"]
    if target is not None and not isinstance(target, str):
        raise MalformedEntry("wrong_type", "outbox 't' must be a string or null")
    # The wire nests the event as a JSON string; a JSON object is accepted too (lenient read).
    if isinstance(event_raw, dict):
        event_raw = orjson.dumps(event_raw)
    if not isinstance(event_raw, str | bytes):
        raise MalformedEntry("wrong_type", "outbox 'e' must be the event JSON")
    try:
        event = event_model.model_validate_json(event_raw)
    except models.validation_error as exc:
        reason = "bad_json" if any(e["type"] == "json_invalid" for e in exc.errors()) else "missing_field"
        raise MalformedEntry(reason, f"outbox event: {exc.error_count()} error(s)") from None
    return models.outbox_entry(seq, target, event)


def decode_spawn(field: bytes | str, value: bytes | str) -> SpawnEntry:
    """One spawns hash field and value → ``SpawnEntry``.

    Raises:
        MalformedEntry: ``bad_seq``, ``bad_json``, ``wrong_type`` or ``missing_field``.
    """
    seq = parse_seq(field)
    if seq is None:
        raise MalformedEntry("bad_seq", f"spawn field {_text(field)!r} is not a decimal seq")
    spawn_entry = _models().spawn_entry
    doc = _object(value)
    missing = [k for k in ("p", "c", "r", "x") if k not in doc]
    if missing:
        raise MalformedEntry("missing_field", f"spawn value lacks {','.join(missing)}")
    parent, child, root, context = doc["p"], doc["c"], doc["r"], doc["x"]
    if not all(isinstance(v, str) for v in (parent, child, root)) or not isinstance(context, dict):
        raise MalformedEntry("wrong_type", "spawn p/c/r must be strings and x an object")
    return spawn_entry(seq, parent, child, root, context)


def decode_timer(member: bytes | str, score: float) -> tuple[str, str, float]:
    """A timers zset member and score → ``(execution_id, path, fire_at)``.

    Raises:
        MalformedEntry: ``bad_member`` when it is not UTF-8 or has no ``\\x00``.
    """
    execution_id, path = parse_timer_member(member)
    return execution_id, path, float(score)


def decode_summary(raw: bytes | str) -> ExecutionSummary | None:
    """A listing row from a stored execution; None when the JSON is not an execution."""
    models = _models()
    try:
        doc = orjson.loads(raw)
        return models.summary.from_data(doc, doc.get("version", 0))
    except (orjson.JSONDecodeError, models.validation_error, KeyError, TypeError, AttributeError):
        return None
