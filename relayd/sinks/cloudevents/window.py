"""Pure CloudEvents of an outbox read window, written from parts: the drain's fast path.

An outbox read window (``OutboxWindow``, the batch a drain hands a sink) gets the same bytes as
its envelopes one at a time would (``relayd.sinks.cloudevents.envelope``,
``relayd.sinks.cloudevents.bindings``) without a ``Rendered`` or a dict per event: what the
window shares is made once, a kind's and a target's parts are cached across windows
(``_Cache``), and the kind comes from the shape the read already checked. An event whose data
names a trace context, or whose entry carries one ``store`` recorded, goes the whole way.
``tests/relayd/sinks/test_cloudevents_window.py`` holds the two paths to the same output
(``relayd bench --format cloudevents``). No I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Final, TypeVar

import msgspec
import orjson

from relayd.envelope.outbox_window import OutboxWindow
from relayd.envelope.stored import EVENT_SHAPE, EventShape
from relayd.sinks.cloudevents.bindings import percent_encoded
from relayd.sinks.cloudevents.envelope import (
    DATA_CONTENT_TYPE,
    OUTBOX_TYPE,
    SEQUENCE_DIGITS,
    SPEC_VERSION,
    STRUCTURED_CONTENT_TYPE,
    Mode,
    Rendered,
    commit_times,
    render_window,
    rfc3339,
    source_of,
)


def _shapes(window: OutboxWindow) -> list[EventShape] | list[EventShape | None]:
    """The window's events' shapes as checked at read; decoded here for a window made by hand
    (None for an event that does not decode)."""
    if window.shapes is not None:
        return window.shapes
    shapes: list[EventShape | None] = []
    for event in window.events:
        try:
            shapes.append(EVENT_SHAPE.decode(event))
        except (msgspec.DecodeError, RecursionError):
            shapes.append(None)
    return shapes


#: Most values a ``_Cache`` dict keeps; a full one starts again empty.
_CACHED: Final = 10_000
_K = TypeVar("_K")
_V = TypeVar("_V")


class _Cache:
    """Parts of the window path that depend on one value only, kept across windows: a stream
    call of 200 entries may name 100 targets, the same in every call (``relayd bench --format
    cloudevents``). A full dict is cleared, so many distinct targets cannot grow it unbounded."""

    #: kind → the ``type`` JSON string; kind → the ``ce_type`` header
    type_json: ClassVar[dict[str, bytes]] = {}
    type_header: ClassVar[dict[str, tuple[str, bytes]]] = {}
    #: target → the ``subject`` member and the ``partitionkey`` member up to the data
    target_json: ClassVar[dict[str | None, tuple[bytes, bytes]]] = {}
    #: target → the ``ce_subject`` and ``ce_partitionkey`` headers (none without a target)
    target_headers: ClassVar[dict[str | None, tuple[tuple[tuple[str, bytes], ...], ...]]] = {}
    #: (header prefix, kind) → the type header's value; (header prefix, target) → its headers
    binary_type: ClassVar[dict[tuple[str, str], str]] = {}
    binary_target: ClassVar[dict[tuple[str, str | None], dict[str, str]]] = {}

    @staticmethod
    def put(cache: dict[_K, _V], key: _K, value: _V) -> _V:
        if len(cache) >= _CACHED:
            cache.clear()
        cache[key] = value
        return value


def _target_json(target: str | None) -> tuple[bytes, bytes]:
    if target is None:
        return b"", b'","data":'
    encoded = orjson.dumps(target)
    return b',"subject":' + encoded, b'","partitionkey":' + encoded + b',"data":'


def _target_headers(target: str | None) -> tuple[tuple[tuple[str, bytes], ...], ...]:
    if target is None:
        return (), ()
    encoded = target.encode()
    return (("ce_subject", encoded),), (("ce_partitionkey", encoded),)


def _time_json(epoch_s: float) -> bytes:
    """The ``time`` member and the members after it up to the ``sequence`` value."""
    return b',"time":%b,"datacontenttype":"application/json","sequence":"' % orjson.dumps(rfc3339(epoch_s))


def _time_header(epoch_s: float) -> tuple[str, bytes]:
    return ("ce_time", rfc3339(epoch_s).encode())


def structured_window(window: OutboxWindow, source_template: str) -> tuple[list[bytes], list[int]]:
    """Each structured event of an outbox read window, written from parts: what the window
    shares (the head and source) and each distinct ``time`` (the relay's, or a commit's:
    ``commit_times``) once, a target's and a type's JSON from ``_Cache``, the
    kind from the shape checked at read (no decode per event). The same JSON as
    ``render_window`` gives, which this calls for an event whose data names a trace context;
    those events' indexes come second (``relayd bench --format cloudevents``)."""
    dumps, put, unset = orjson.dumps, _Cache.put, msgspec.UNSET
    head = b'{"specversion":"1.0","id":' + dumps(f"{window.prefix}:outbox:")[:-1]
    after_id = b'","source":' + dumps(source_of(source_template, window.prefix)) + b',"type":'
    times = commit_times(window, _time_json(window.relayed_at), _time_json)
    types, targets = _Cache.type_json, _Cache.target_json
    rendered: list[bytes] = []
    append = rendered.append
    whole: list[int] = []
    for index, (field, target, event, shape, context, time) in enumerate(
        zip(
            window.fields, window.targets, window.events, _shapes(window), window.contexts, times, strict=True
        )
    ):
        if context or shape is None or ((data := shape.data) is not unset and data.traceparent is not None):
            append(render_window(window[index : index + 1], source_template)[0].structured)
            whole.append(index)
            continue
        kind = shape.kind
        type_json = types.get(kind) or put(types, kind, dumps(kind or OUTBOX_TYPE))
        subject, tail = targets.get(target) or put(targets, target, _target_json(target))
        seq = field.encode()  # canonical decimal: the id's tail, and the sequence unpadded
        append(
            b"".join(
                (head, seq, after_id, type_json, subject, time, seq.zfill(SEQUENCE_DIGITS), tail, event, b"}")
            )
        )
    return rendered, whole


def kafka_window(
    window: OutboxWindow,
    mode: Mode,
    source_template: str,
    whole_way: Callable[[Rendered], list[tuple[str, bytes]]],
) -> tuple[list[bytes], list[list[tuple[str, bytes]]]]:
    """Each Kafka record's value and headers for an outbox read window in ``mode``, from parts
    as ``structured_window`` does: the headers every record shares are made once per window. An
    event whose data names a trace context goes the whole way: ``whole_way`` of its ``Rendered``
    gives its headers (``relayd.sinks.cloudevents.kafka_records``)."""
    if mode == "structured":
        bodies, whole = structured_window(window, source_template)
        # the trace headers are the only ones that differ: an event naming none has none
        headers = [[("content-type", STRUCTURED_CONTENT_TYPE.encode())]] * len(bodies)
        for index in whole:
            headers[index] = whole_way(render_window(window[index : index + 1], source_template)[0])
        return bodies, headers
    put, unset = _Cache.put, msgspec.UNSET
    id_head = f"{window.prefix}:outbox:".encode()
    specversion = ("ce_specversion", SPEC_VERSION.encode())
    source = ("ce_source", source_of(source_template, window.prefix).encode())
    times = commit_times(window, _time_header(window.relayed_at), _time_header)
    content = ("content-type", DATA_CONTENT_TYPE.encode())
    types, targets = _Cache.type_header, _Cache.target_headers
    all_headers: list[list[tuple[str, bytes]]] = []
    values: list[bytes] = []
    for index, (field, target, event, shape, context, time) in enumerate(
        zip(
            window.fields, window.targets, window.events, _shapes(window), window.contexts, times, strict=True
        )
    ):
        if context or shape is None or ((data := shape.data) is not unset and data.traceparent is not None):
            (traced,) = render_window(window[index : index + 1], source_template)
            values.append(traced.data)
            all_headers.append(whole_way(traced))
            continue
        values.append(event)
        kind = shape.kind
        type_header = types.get(kind) or put(types, kind, ("ce_type", (kind or OUTBOX_TYPE).encode()))
        subject, partition = targets.get(target) or put(targets, target, _target_headers(target))
        seq = field.encode()
        all_headers.append(
            [
                specversion,
                ("ce_id", id_head + seq),
                source,
                type_header,
                *subject,
                time,
                content,
                ("ce_sequence", seq.zfill(SEQUENCE_DIGITS)),
                *partition,
            ]
        )
    return values, all_headers


def header_window(
    window: OutboxWindow,
    source_template: str,
    binding: tuple[str, Callable[[str], str], str | None],
    whole_way: Callable[[Rendered], dict[str, str]],
) -> tuple[list[bytes], list[dict[str, str]]]:
    """The data and binary-mode headers of each event of an outbox read window for a binding
    given as (header prefix, how a value is written, the header ``datacontenttype`` goes in):
    what the window shares made once, a kind's and a target's headers from ``_Cache``, and per
    event a copy of the shared ones and three more. An event whose data names a trace context
    goes the whole way, ``whole_way`` of its ``Rendered`` (``relayd.sinks.cloudevents``)."""
    prefix, encode, content_type_header = binding
    put, unset = _Cache.put, msgspec.UNSET
    time_name = f"{prefix}time"
    shared = {
        f"{prefix}specversion": SPEC_VERSION,
        f"{prefix}source": encode(source_of(source_template, window.prefix)),
        time_name: encode(rfc3339(window.relayed_at)),
    }
    # a window without commit times shares the window's time; else each entry gets its own
    times = None if window.committed is None else commit_times(window, "", lambda at: encode(rfc3339(at)))
    if content_type_header is not None:
        shared[content_type_header] = DATA_CONTENT_TYPE
    id_name, type_name, sequence_name = f"{prefix}id", f"{prefix}type", f"{prefix}sequence"
    subject_name, partition_name = f"{prefix}subject", f"{prefix}partitionkey"
    id_head = encode(f"{window.prefix}:outbox:")  # the field is digits: nothing to encode
    types, targets = _Cache.binary_type, _Cache.binary_target
    values: list[bytes] = []
    all_headers: list[dict[str, str]] = []
    for index, (field, target, event, shape, context) in enumerate(
        zip(window.fields, window.targets, window.events, _shapes(window), window.contexts, strict=True)
    ):
        if context or shape is None or ((data := shape.data) is not unset and data.traceparent is not None):
            (whole,) = render_window(window[index : index + 1], source_template)
            values.append(whole.data)
            all_headers.append(whole_way(whole))
            continue
        values.append(event)
        kind = shape.kind
        type_value = types.get((prefix, kind)) or put(types, (prefix, kind), encode(kind or OUTBOX_TYPE))
        by_target = targets.get((prefix, target))
        if by_target is None:
            by_target = (
                {} if target is None else {subject_name: encode(target), partition_name: encode(target)}
            )
            put(targets, (prefix, target), by_target)
        headers = shared.copy()
        headers[id_name] = id_head + field
        headers[type_name] = type_value
        headers[sequence_name] = field.zfill(SEQUENCE_DIGITS)
        if times is not None and (time := times[index]):
            headers[time_name] = time
        headers.update(by_target)
        all_headers.append(headers)
    return values, all_headers


#: The HTTP, NATS and AMQP bindings' binary mode, for ``header_window``.
HTTP_BINARY: Final = ("ce-", percent_encoded, "Content-Type")
NATS_BINARY: Final = ("ce-", percent_encoded, "ce-datacontenttype")
AMQP_BINARY: Final = ("cloudEvents_", str, None)
