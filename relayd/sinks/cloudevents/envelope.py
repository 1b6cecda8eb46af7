"""Pure CloudEvents 1.0 of one envelope: its attributes, its data and its structured JSON.

An envelope becomes one CloudEvent:

    id               the envelope id (the same on every redelivery: dedupe on it)
    source           ``--cloudevents-source`` with ``{prefix}`` filled in (default ``relayd://{prefix}``)
    type             outbox: the event's ``kind`` (``dev.relayd.outbox`` if it has none);
                     spawn: ``dev.relayd.spawn``; timer: ``dev.relayd.timer``
    specversion      ``1.0``
    subject          outbox: the target id (absent when untargeted); spawn: the child id;
                     timer: the execution id
    time             timer: when it was due (``fire_at``); outbox and spawn: the commit time
                     ``store`` stamped on the entry, else (an entry harel or another engine
                     wrote) when relayd relayed it
    datacontenttype  ``application/json``
    sequence         the entry's seq (outbox, spawn), zero-padded to 20 digits: the extension
                     orders its values as strings
    partitionkey     the ordering key (absent when untargeted)
    traceparent      ``data.traceparent`` of an event that carries one, else the context
                     ``store`` recorded at commit (``tracestate`` too;
                     ``relayd.sinks.trace_context``)
    data             outbox and timer: the event as committed; spawn: ``parent_id``,
                     ``child_id``, ``root_path`` and ``context``

``render_one`` gives an envelope's ``Rendered`` (its attributes, for a binding's binary mode,
and its structured JSON, ``application/cloudevents+json``); ``render_window`` the same for each
entry of an outbox read window, from its columns. No I/O and no clock.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, TypeVar
from urllib.parse import quote

import orjson

from relayd.envelope import Envelope
from relayd.envelope.outbox_window import OutboxWindow, commit_time
from relayd.sinks import trace_context

SPEC_VERSION: Final = "1.0"
DATA_CONTENT_TYPE: Final = "application/json"
STRUCTURED_CONTENT_TYPE: Final = "application/cloudevents+json"
BATCH_CONTENT_TYPE: Final = "application/cloudevents-batch+json"
#: The type of an outbox event without a ``kind``, of a spawn and of a timer.
OUTBOX_TYPE: Final = "dev.relayd.outbox"
SPAWN_TYPE: Final = "dev.relayd.spawn"
TIMER_TYPE: Final = "dev.relayd.timer"
DEFAULT_SOURCE: Final = "relayd://{prefix}"
#: Digits of a ``sequence`` value: enough for any 64-bit seq.
SEQUENCE_DIGITS: Final = 20
#: The body fields of a spawn envelope that are its data.
_SPAWN_DATA: Final = ("parent_id", "child_id", "root_path", "context")
#: What a ``--cloudevents-source`` may hold (``check_source_template``).
_SOURCE: Final = re.compile(r"[!-~]+")

_T = TypeVar("_T")

OutputFormat = Literal["relayd", "cloudevents"]
Mode = Literal["binary", "structured"]


@dataclass(frozen=True, slots=True)
class Rendered:
    """One envelope as a CloudEvent: ``attributes`` (name → value, ``specversion`` first), the
    ``data`` JSON bytes and the whole ``structured`` JSON bytes."""

    attributes: dict[str, str]
    data: bytes
    structured: bytes


def check_source_template(template: str) -> str:
    """``template`` when it can give a ``source``: a URI reference (RFC 3986), which the
    attribute requires and a receiver rejects otherwise, so non-empty printable ASCII without
    spaces (a character outside it is written percent-encoded).

    Raises:
        ValueError: naming the rule, never the value.
    """
    if not _SOURCE.fullmatch(template):
        raise ValueError(
            "the CloudEvents source must be a non-empty URI reference: printable ASCII without "
            "spaces (percent-encode anything else)"
        )
    return template


def source_of(template: str, prefix: str) -> str:
    """The ``source`` of ``prefix``'s events: ``{prefix}`` filled in, percent-encoded (a URI)."""
    return template.replace("{prefix}", quote(prefix, safe=""))


def render_one(envelope: Envelope, *, source_template: str) -> Rendered:
    """``envelope`` as a CloudEvent (see the module docstring)."""
    body = envelope.body
    attributes = {
        "specversion": SPEC_VERSION,
        "id": envelope.id,
        "source": source_of(source_template, envelope.prefix),
    }
    data: object
    if envelope.kind == "spawn":
        attributes["type"] = SPAWN_TYPE
        data = {name: body[name] for name in _SPAWN_DATA}
        subject: object = body["child_id"]
        time_s = body["relayed_at"] if envelope.committed_at is None else envelope.committed_at
    elif envelope.kind == "timer":
        attributes["type"] = TIMER_TYPE
        data = body["event"]
        subject = body["execution_id"]
        time_s = body["fire_at"]
    else:
        data = body["event"]
        kind = data.get("kind") if isinstance(data, dict) else None
        attributes["type"] = kind if isinstance(kind, str) and kind else OUTBOX_TYPE
        subject = body.get("target_id")
        time_s = body["relayed_at"] if envelope.committed_at is None else envelope.committed_at
    if isinstance(subject, str):
        attributes["subject"] = subject
    attributes["time"] = rfc3339(time_s)
    attributes["datacontenttype"] = DATA_CONTENT_TYPE
    seq = body.get("seq")
    if isinstance(seq, int):
        attributes["sequence"] = str(seq).zfill(SEQUENCE_DIGITS)
    if envelope.ordering_key is not None:
        attributes["partitionkey"] = envelope.ordering_key
    attributes.update(trace_context.from_body(body, data))
    data_json = orjson.dumps(data)
    structured = orjson.dumps(attributes)[:-1] + b',"data":' + data_json + b"}"
    return Rendered(attributes, data_json, structured)


def render_window(window: OutboxWindow, source_template: str) -> list[Rendered]:
    """Each entry of an outbox read window as a CloudEvent, from its columns: the same events as
    ``render_one`` gives, with each event's stored text as the data, and no envelope built."""
    source, time = source_of(source_template, window.prefix), rfc3339(window.relayed_at)
    loads, dumps, prefix = orjson.loads, orjson.dumps, window.prefix
    rendered: list[Rendered] = []
    times = commit_times(window, time, rfc3339)
    for field, seq, target, event_json, context, time in zip(
        window.fields, window.seqs, window.targets, window.events, window.contexts, times, strict=True
    ):
        event = loads(event_json)
        kind = event.get("kind")
        attributes = {
            "specversion": SPEC_VERSION,
            "id": f"{prefix}:outbox:{field}",
            "source": source,
            "type": kind if isinstance(kind, str) and kind else OUTBOX_TYPE,
        }
        if target is not None:
            attributes["subject"] = target
        attributes["time"] = time
        attributes["datacontenttype"] = DATA_CONTENT_TYPE
        attributes["sequence"] = str(seq).zfill(SEQUENCE_DIGITS)
        if target is not None:
            attributes["partitionkey"] = target
        attributes.update(trace_context.from_event(event) or context)
        structured = dumps(attributes)[:-1] + b',"data":' + event_json + b"}"
        rendered.append(Rendered(attributes, event_json, structured))
    return rendered


def commit_times(window: OutboxWindow, relayed: _T, render: Callable[[float], _T]) -> list[_T]:
    """Each entry's ``time`` as ``render`` writes it: its commit time, else ``relayed`` (the
    window's). A window without commit times costs a list of one shared value; the entries of one
    commit share their time, so each distinct time is checked and rendered once."""
    committed = window.committed
    if committed is None:
        return [relayed] * len(window.fields)
    rendered = {
        stamp: relayed if (at := commit_time(stamp)) is None else render(at) for stamp in set(committed)
    }
    return [rendered[stamp] for stamp in committed]


def rfc3339(epoch_s: object) -> str:
    """An epoch time as the ``time`` attribute writes it: UTC, microseconds, ``Z``."""
    when = dt.datetime.fromtimestamp(float(epoch_s), dt.UTC)  # type: ignore[arg-type]  # a JSON number
    return when.isoformat(timespec="microseconds").replace("+00:00", "Z")
