"""Pure CloudEvents protocol bindings: how HTTP, Kafka, NATS and AMQP carry a ``Rendered`` event.

Binary mode sends the event's data as the body and each attribute as a header of the binding's
form; structured mode the whole event as the body, marked by its content type. A ``traceparent``
the event carries also goes as the W3C header itself on HTTP and Kafka. No I/O.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

from relayd.sinks.cloudevents.envelope import STRUCTURED_CONTENT_TYPE, Mode, Rendered

#: The W3C trace context headers every binding also sends as themselves.
_TRACE_HEADERS: Final[tuple[str, ...]] = ("traceparent", "tracestate")
#: What an HTTP binary-mode header value keeps unencoded: printable ASCII but space, ``"`` and ``%``.
_HEADER_SAFE: Final = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"%')


def percent_encoded(value: str) -> str:
    """A header value as the HTTP and NATS bindings write it."""
    return quote(value, safe=_HEADER_SAFE)


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
            headers[f"ce-{name}"] = percent_encoded(value)
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
    return {f"ce-{name}": percent_encoded(value) for name, value in event.attributes.items()}


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
