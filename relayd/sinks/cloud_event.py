"""Pure CloudEvents 1.0 rendering of envelopes: the attributes, the data, the structured JSON.

An envelope becomes one CloudEvent:

    id               the envelope id (the same on every redelivery: dedupe on it)
    source           ``--cloudevents-source`` with ``{prefix}`` filled in (default ``relayd://{prefix}``)
    type             outbox: the event's ``kind`` (``dev.relayd.outbox`` if it has none);
                     spawn: ``dev.relayd.spawn``; timer: ``dev.relayd.timer``
    specversion      ``1.0``
    subject          outbox: the target id (absent when untargeted); spawn: the child id;
                     timer: the execution id
    time             timer: when it was due (``fire_at``); else when relayd relayed the entry
    datacontenttype  ``application/json``
    sequence         the entry's seq (outbox, spawn), zero-padded to 20 digits: the extension
                     orders its values as strings
    partitionkey     the ordering key (absent when untargeted)
    traceparent      ``data.traceparent`` of an event that carries one (``tracestate`` too;
                     ``relayd.sinks.trace_context``)
    data             outbox and timer: the event as committed; spawn: ``parent_id``,
                     ``child_id``, ``root_path`` and ``context``

``render`` gives each envelope's ``Rendered``: its attributes (for a binding's binary mode,
which sends ``data`` as the body and each attribute as a header) and its structured JSON (for
the structured mode, ``application/cloudevents+json``). The bindings (``http_headers``,
``kafka_headers``, ``nats_headers``, ``amqp_properties``) write a ``Rendered`` for their
protocol, and what the sinks call (``structured_renderer``, ``http_messages``, ``kafka_records``,
``nats_renderer``, ``amqp_renderer``) gives a whole batch's bodies and headers.

An outbox read window (``OutboxWindow``, the drain's batch) takes a faster path to the same
bytes: no ``Rendered`` and no dict per event, but the window's shared parts made once, a kind's
and a target's parts cached across windows (``_Cache``), and the kind read from the shape the
read already checked; an event whose data names a trace context goes the whole way. The window
tests hold the two paths to the same output. No I/O and no clock.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, Literal, TypeVar
from urllib.parse import quote

import msgspec
import orjson

from relayd.batch import Batch
from relayd.envelope import Envelope
from relayd.outbox_window import OutboxWindow
from relayd.sinks import trace_context
from relayd.stored import EVENT_SHAPE, EventShape

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

#: The W3C trace context headers every binding also sends as themselves.
_TRACE_HEADERS: Final[tuple[str, ...]] = ("traceparent", "tracestate")
#: What an HTTP binary-mode header value keeps unencoded: printable ASCII but space, ``"`` and ``%``.
_HEADER_SAFE: Final = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"%')

#: What a ``--cloudevents-source`` may hold (``check_source_template``).
_SOURCE: Final = re.compile(r"[!-~]+")

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


def render(envelopes: Sequence[Envelope], *, source_template: str) -> list[Rendered]:
    """Every envelope as a CloudEvent, in order (see the module docstring)."""
    if isinstance(envelopes, OutboxWindow):
        return _render_window(envelopes, source_template)
    return [render_one(envelope, source_template=source_template) for envelope in envelopes]


def _render_window(window: OutboxWindow, source_template: str) -> list[Rendered]:
    """``render`` of an outbox read window from its columns: the same events as ``render_one``
    gives, with each event's stored text as the data, and no envelope built (``relayd bench
    --format cloudevents``)."""
    source, time = source_of(source_template, window.prefix), _rfc3339(window.relayed_at)
    loads, dumps, prefix = orjson.loads, orjson.dumps, window.prefix
    rendered: list[Rendered] = []
    for field, seq, target, event_json in zip(
        window.fields, window.seqs, window.targets, window.events, strict=True
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
        attributes.update(trace_context.from_event(event))
        structured = dumps(attributes)[:-1] + b',"data":' + event_json + b"}"
        rendered.append(Rendered(attributes, event_json, structured))
    return rendered


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


def _structured_window(window: OutboxWindow, source_template: str) -> tuple[list[bytes], list[int]]:
    """Each structured event of an outbox read window, written from parts: what the window
    shares (the head, source and time) once, a target's and a type's JSON from ``_Cache``, the
    kind from the shape checked at read (no decode per event). The same JSON as
    ``_render_window`` gives, which this calls for an event whose data names a trace context;
    those events' indexes come second (``relayd bench --format cloudevents``)."""
    dumps, put, unset = orjson.dumps, _Cache.put, msgspec.UNSET
    head = b'{"specversion":"1.0","id":' + dumps(f"{window.prefix}:outbox:")[:-1]
    after_id = b'","source":' + dumps(source_of(source_template, window.prefix)) + b',"type":'
    time = b',"time":%b,"datacontenttype":"application/json","sequence":"' % dumps(
        _rfc3339(window.relayed_at)
    )
    types, targets = _Cache.type_json, _Cache.target_json
    rendered: list[bytes] = []
    append = rendered.append
    whole: list[int] = []
    for index, (field, target, event, shape) in enumerate(
        zip(window.fields, window.targets, window.events, _shapes(window), strict=True)
    ):
        if shape is None or ((data := shape.data) is not unset and data.traceparent is not None):
            append(_render_window(window[index : index + 1], source_template)[0].structured)
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


def _kafka_window(
    window: OutboxWindow, mode: Mode, source_template: str
) -> tuple[list[bytes], list[list[tuple[str, bytes]]]]:
    """``kafka_records`` of an outbox read window from parts, as ``_structured_window`` does:
    the headers every record shares are made once per window."""
    if mode == "structured":
        bodies, whole = _structured_window(window, source_template)
        # the trace headers are the only ones that differ: an event naming none has none
        headers = [[("content-type", STRUCTURED_CONTENT_TYPE.encode())]] * len(bodies)
        for index in whole:
            headers[index] = _kafka_one(window, index, mode, source_template)[1]
        return bodies, headers
    put, unset = _Cache.put, msgspec.UNSET
    id_head = f"{window.prefix}:outbox:".encode()
    specversion = ("ce_specversion", SPEC_VERSION.encode())
    source = ("ce_source", source_of(source_template, window.prefix).encode())
    time = ("ce_time", _rfc3339(window.relayed_at).encode())
    content = ("content-type", DATA_CONTENT_TYPE.encode())
    types, targets = _Cache.type_header, _Cache.target_headers
    all_headers: list[list[tuple[str, bytes]]] = []
    values: list[bytes] = []
    for index, (field, target, event, shape) in enumerate(
        zip(window.fields, window.targets, window.events, _shapes(window), strict=True)
    ):
        if shape is None or ((data := shape.data) is not unset and data.traceparent is not None):
            value, one = _kafka_one(window, index, mode, source_template)
            values.append(value)
            all_headers.append(one)
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


def _header_window(
    window: OutboxWindow,
    source_template: str,
    binding: tuple[str, Callable[[str], str], str | None],
    whole_way: Callable[[Rendered], dict[str, str]],
) -> tuple[list[bytes], list[dict[str, str]]]:
    """The data and binary-mode headers of each event of an outbox read window for a binding
    given as (header prefix, how a value is written, the header ``datacontenttype`` goes in):
    what the window shares made once, a kind's and a target's headers from ``_Cache``, and per
    event a copy of the shared ones and three more. An event whose data names a trace context
    goes the whole way, ``whole_way`` of its ``Rendered`` (``nats_renderer``, ``amqp_renderer``)."""
    prefix, encode, content_type_header = binding
    put, unset = _Cache.put, msgspec.UNSET
    shared = {
        f"{prefix}specversion": SPEC_VERSION,
        f"{prefix}source": encode(source_of(source_template, window.prefix)),
        f"{prefix}time": encode(_rfc3339(window.relayed_at)),
    }
    if content_type_header is not None:
        shared[content_type_header] = DATA_CONTENT_TYPE
    id_name, type_name, sequence_name = f"{prefix}id", f"{prefix}type", f"{prefix}sequence"
    subject_name, partition_name = f"{prefix}subject", f"{prefix}partitionkey"
    id_head = encode(f"{window.prefix}:outbox:")  # the field is digits: nothing to encode
    types, targets = _Cache.binary_type, _Cache.binary_target
    values: list[bytes] = []
    all_headers: list[dict[str, str]] = []
    for index, (field, target, event, shape) in enumerate(
        zip(window.fields, window.targets, window.events, _shapes(window), strict=True)
    ):
        if shape is None or ((data := shape.data) is not unset and data.traceparent is not None):
            (whole,) = _render_window(window[index : index + 1], source_template)
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
        headers.update(by_target)
        all_headers.append(headers)
    return values, all_headers


def _percent_encoded(value: str) -> str:
    return quote(value, safe=_HEADER_SAFE)


#: The HTTP, NATS and AMQP bindings' binary mode, for ``_header_window``.
_HTTP_BINARY: Final = ("ce-", _percent_encoded, "Content-Type")
_NATS_BINARY: Final = ("ce-", _percent_encoded, "ce-datacontenttype")
_AMQP_BINARY: Final = ("cloudEvents_", str, None)


def _kafka_one(
    window: OutboxWindow, index: int, mode: Mode, source_template: str
) -> tuple[bytes, list[tuple[str, bytes]]]:
    (event,) = _render_window(window[index : index + 1], source_template)
    return (event.data if mode == "binary" else event.structured), kafka_headers(event, mode)


def render_one(envelope: Envelope, *, source_template: str) -> Rendered:
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
        time_s = body["relayed_at"]
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
        time_s = body["relayed_at"]
    if isinstance(subject, str):
        attributes["subject"] = subject
    attributes["time"] = _rfc3339(time_s)
    attributes["datacontenttype"] = DATA_CONTENT_TYPE
    seq = body.get("seq")
    if isinstance(seq, int):
        attributes["sequence"] = str(seq).zfill(SEQUENCE_DIGITS)
    if envelope.ordering_key is not None:
        attributes["partitionkey"] = envelope.ordering_key
    attributes.update(trace_context.from_event(data))
    data_json = orjson.dumps(data)
    structured = orjson.dumps(attributes)[:-1] + b',"data":' + data_json + b"}"
    return Rendered(attributes, data_json, structured)


def http_headers(event: Rendered, mode: Mode) -> dict[str, str]:
    """The HTTP binding's headers: binary, ``ce-<name>`` per attribute (percent-encoded) and
    ``Content-Type`` from ``datacontenttype``; structured, the structured content type. Both add
    the W3C ``traceparent``/``tracestate`` headers when the event carries them."""
    headers = {name: event.attributes[name] for name in _TRACE_HEADERS if name in event.attributes}
    if mode == "structured":
        headers["Content-Type"] = STRUCTURED_CONTENT_TYPE
        return headers
    for name, value in event.attributes.items():
        if name == "datacontenttype":
            headers["Content-Type"] = value
        else:
            headers[f"ce-{name}"] = quote(value, safe=_HEADER_SAFE)
    return headers


def kafka_headers(event: Rendered, mode: Mode) -> list[tuple[str, bytes]]:
    """The Kafka binding's headers: binary, ``ce_<name>`` per attribute (UTF-8) and
    ``content-type`` from ``datacontenttype``; structured, the structured content type. Both add
    ``traceparent``/``tracestate`` when the event carries them."""
    headers = [(name, event.attributes[name].encode()) for name in _TRACE_HEADERS if name in event.attributes]
    if mode == "structured":
        headers.append(("content-type", STRUCTURED_CONTENT_TYPE.encode()))
        return headers
    for name, value in event.attributes.items():
        if name == "datacontenttype":
            headers.append(("content-type", value.encode()))
        else:
            headers.append((f"ce_{name}", value.encode()))
    return headers


def nats_headers(event: Rendered, mode: Mode) -> dict[str, str]:
    """The NATS binding's headers (servers since 2.2): binary, ``ce-<name>`` per attribute,
    ``datacontenttype`` included, percent-encoded as HTTP's; structured, ``Content-Type:
    application/cloudevents+json``, which is how a receiver tells the structured mode apart."""
    if mode == "structured":
        return {"Content-Type": STRUCTURED_CONTENT_TYPE}
    return {f"ce-{name}": quote(value, safe=_HEADER_SAFE) for name, value in event.attributes.items()}


def _nats_binary(event: Rendered) -> dict[str, str]:
    return nats_headers(event, "binary")


def _amqp_binary(event: Rendered) -> dict[str, str]:
    return amqp_properties(event, "binary")[1]


def amqp_properties(event: Rendered, mode: Mode) -> tuple[str, dict[str, str]]:
    """The AMQP binding's content type and application properties: binary, ``datacontenttype``
    as the content type and ``cloudEvents_<name>`` per other attribute (RabbitMQ keeps them as
    message headers, and hands them to an AMQP 1.0 consumer as application-properties);
    structured, the structured content type and none."""
    if mode == "structured":
        return STRUCTURED_CONTENT_TYPE, {}
    attributes = event.attributes
    properties = {
        f"cloudEvents_{name}": value for name, value in attributes.items() if name != "datacontenttype"
    }
    return attributes["datacontenttype"], properties


def http_messages(batch: Batch, mode: Mode, source_template: str) -> tuple[list[bytes], list[dict[str, str]]]:
    """Each HTTP request's body and headers by the HTTP binding in ``mode`` (``http_headers``)."""
    if isinstance(batch, OutboxWindow):
        if mode == "binary":
            return _header_window(batch, source_template, _HTTP_BINARY, _http_binary)
        bodies, whole = _structured_window(batch, source_template)
        headers = [{"Content-Type": STRUCTURED_CONTENT_TYPE}] * len(bodies)
        for index in whole:  # an event naming a trace context adds its trace headers
            (event,) = _render_window(batch[index : index + 1], source_template)
            headers[index] = http_headers(event, mode)
        return bodies, headers
    events = render(batch, source_template=source_template)
    bodies = [event.data if mode == "binary" else event.structured for event in events]
    return bodies, [http_headers(event, mode) for event in events]


def _http_binary(event: Rendered) -> dict[str, str]:
    return http_headers(event, "binary")


def kafka_records(
    batch: Batch, mode: Mode, source_template: str
) -> tuple[list[bytes], list[list[tuple[str, bytes]]]]:
    """Each Kafka record's value and headers by the Kafka binding in ``mode`` (``kafka_headers``)."""
    if isinstance(batch, OutboxWindow):
        return _kafka_window(batch, mode, source_template)
    events = render(batch, source_template=source_template)
    values = [event.data if mode == "binary" else event.structured for event in events]
    return values, [kafka_headers(event, mode) for event in events]


def structured_renderer(output_format: OutputFormat, source_template: str) -> Callable[[Batch], list[bytes]]:
    """What a sink without headers sends per envelope: ``batch.render()`` for the ``relayd``
    format, each envelope's structured CloudEvent JSON for ``cloudevents``."""
    if output_format == "relayd":
        return _render_envelopes

    def render_structured(batch: Batch) -> list[bytes]:
        if isinstance(batch, OutboxWindow):
            return _structured_window(batch, source_template)[0]
        return [event.structured for event in render(batch, source_template=source_template)]

    return render_structured


def nats_renderer(
    output_format: OutputFormat, mode: Mode, source_template: str
) -> Callable[[Batch], tuple[list[bytes], list[dict[str, str]] | None]]:
    """What the nats sink sends per envelope: the body, and the format's headers (``None``: none,
    the ``relayd`` format)."""
    structured = structured_renderer(output_format, source_template)
    if output_format == "relayd":
        return lambda batch: (structured(batch), None)
    if mode == "structured":
        content_type = {"Content-Type": STRUCTURED_CONTENT_TYPE}
        return lambda batch: (structured(batch), [content_type] * len(batch))

    def render_binary(batch: Batch) -> tuple[list[bytes], list[dict[str, str]] | None]:
        if isinstance(batch, OutboxWindow):
            return _header_window(batch, source_template, _NATS_BINARY, _nats_binary)
        events = render(batch, source_template=source_template)
        return [event.data for event in events], [_nats_binary(event) for event in events]

    return render_binary


def amqp_renderer(
    output_format: OutputFormat, mode: Mode, source_template: str
) -> Callable[[Batch], tuple[list[bytes], str, list[dict[str, str]] | None]]:
    """What the amqp sink sends per envelope: the body, the batch's content type, and each
    message's application properties (``None``: none)."""
    structured = structured_renderer(output_format, source_template)
    if output_format == "relayd":
        return lambda batch: (structured(batch), DATA_CONTENT_TYPE, None)
    if mode == "structured":
        return lambda batch: (structured(batch), STRUCTURED_CONTENT_TYPE, None)

    def render_binary(batch: Batch) -> tuple[list[bytes], str, list[dict[str, str]] | None]:
        if isinstance(batch, OutboxWindow):
            values, headers = _header_window(batch, source_template, _AMQP_BINARY, _amqp_binary)
            return values, DATA_CONTENT_TYPE, headers
        events = render(batch, source_template=source_template)
        return [event.data for event in events], DATA_CONTENT_TYPE, [_amqp_binary(event) for event in events]

    return render_binary


def _render_envelopes(batch: Batch) -> list[bytes]:
    return batch.render()  # the batch's own, columnar where it is (Batch.render is abstract)


def structured_array(structured: Sequence[bytes]) -> bytes:
    """The JSON array of structured events: the body of ``application/cloudevents-batch+json``."""
    return b"[" + b",".join(structured) + b"]"


def _rfc3339(epoch_s: object) -> str:
    when = dt.datetime.fromtimestamp(float(epoch_s), dt.UTC)  # type: ignore[arg-type]  # a JSON number
    return when.isoformat(timespec="microseconds").replace("+00:00", "Z")
