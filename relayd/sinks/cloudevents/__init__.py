"""Pure CloudEvents 1.0 output of the sinks (``--format cloudevents``): what each sends per batch.

The event of an envelope (its attributes, data and structured JSON) is
``relayd.sinks.cloudevents.envelope``'s; how each protocol carries it (binary or structured mode)
``relayd.sinks.cloudevents.bindings``'s; the fast path of an outbox read window
``relayd.sinks.cloudevents.window``'s. The package itself is what the sinks call: ``render``
(every envelope's ``Rendered``), ``structured_renderer`` (the sinks without headers),
``http_messages``, ``kafka_records``, ``nats_renderer`` and ``amqp_renderer`` (bodies and headers
of a batch), each taking the window path for a window. It names its modules' public parts too, so
a sink imports the package only. No I/O and no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from relayd.envelope import Envelope
from relayd.envelope.batch import Batch
from relayd.envelope.outbox_window import OutboxWindow
from relayd.sinks.cloudevents.bindings import amqp_properties, http_headers, kafka_headers, nats_headers
from relayd.sinks.cloudevents.envelope import (
    BATCH_CONTENT_TYPE,
    DATA_CONTENT_TYPE,
    DEFAULT_SOURCE,
    OUTBOX_TYPE,
    SEQUENCE_DIGITS,
    SPAWN_TYPE,
    SPEC_VERSION,
    STRUCTURED_CONTENT_TYPE,
    TIMER_TYPE,
    Mode,
    OutputFormat,
    Rendered,
    check_source_template,
    render_one,
    render_window,
    source_of,
)
from relayd.sinks.cloudevents.window import (
    AMQP_BINARY,
    HTTP_BINARY,
    NATS_BINARY,
    header_window,
    kafka_window,
    structured_window,
)

__all__ = [
    "BATCH_CONTENT_TYPE",
    "DATA_CONTENT_TYPE",
    "DEFAULT_SOURCE",
    "OUTBOX_TYPE",
    "SEQUENCE_DIGITS",
    "SPAWN_TYPE",
    "SPEC_VERSION",
    "STRUCTURED_CONTENT_TYPE",
    "TIMER_TYPE",
    "Mode",
    "OutputFormat",
    "Rendered",
    "amqp_properties",
    "amqp_renderer",
    "check_source_template",
    "http_headers",
    "http_messages",
    "kafka_headers",
    "kafka_records",
    "nats_headers",
    "nats_renderer",
    "render",
    "render_one",
    "source_of",
    "structured_array",
    "structured_renderer",
]


def render(envelopes: Sequence[Envelope], *, source_template: str) -> list[Rendered]:
    """Every envelope as a CloudEvent, in order (see the module docstring)."""
    if isinstance(envelopes, OutboxWindow):
        return render_window(envelopes, source_template)
    return [render_one(envelope, source_template=source_template) for envelope in envelopes]


def http_messages(batch: Batch, mode: Mode, source_template: str) -> tuple[list[bytes], list[dict[str, str]]]:
    """Each HTTP request's body and headers by the HTTP binding in ``mode`` (``http_headers``)."""
    if isinstance(batch, OutboxWindow):
        if mode == "binary":
            return header_window(batch, source_template, HTTP_BINARY, _http_binary)
        bodies, whole = structured_window(batch, source_template)
        headers = [{"Content-Type": STRUCTURED_CONTENT_TYPE}] * len(bodies)
        for index in whole:  # an event naming a trace context adds its trace headers
            (event,) = render_window(batch[index : index + 1], source_template)
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
        return kafka_window(batch, mode, source_template, lambda event: kafka_headers(event, mode))
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
            return structured_window(batch, source_template)[0]
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
            return header_window(batch, source_template, NATS_BINARY, _nats_binary)
        events = render(batch, source_template=source_template)
        return [event.data for event in events], [_nats_binary(event) for event in events]

    return render_binary


def _nats_binary(event: Rendered) -> dict[str, str]:
    return nats_headers(event, "binary")


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
            values, headers = header_window(batch, source_template, AMQP_BINARY, _amqp_binary)
            return values, DATA_CONTENT_TYPE, headers
        events = render(batch, source_template=source_template)
        return [event.data for event in events], DATA_CONTENT_TYPE, [_amqp_binary(event) for event in events]

    return render_binary


def _amqp_binary(event: Rendered) -> dict[str, str]:
    return amqp_properties(event, "binary")[1]


def _render_envelopes(batch: Batch) -> list[bytes]:
    return batch.render()  # the batch's own, columnar where it is (Batch.render is abstract)


def structured_array(structured: Sequence[bytes]) -> bytes:
    """The JSON array of structured events: the body of ``application/cloudevents-batch+json``."""
    return b"[" + b",".join(structured) + b"]"
