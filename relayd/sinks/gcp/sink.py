"""The ``pubsub`` sink: publish every envelope to a Google Cloud Pub/Sub topic.

``pubsub:projects/PROJECT/topics/TOPIC[?timeout_s=S]`` (optional extra: ``pip install
'relayd[gcp]'``, google-cloud-pubsub's asyncio client). Each envelope is one message:

- data: the ``relayd/1`` JSON; attributes ``relayd-id`` (the envelope id: consumers dedupe on
  it), ``relayd-kind`` and the trace context (``traceparent``/``tracestate``);
- ordering key: the relayd ordering key (outbox target, spawned child, timer execution; hashed
  past 1,024 bytes), so a subscription with message ordering gets one target's entries in
  order; none for an untargeted entry;
- topic: TOPIC with ``{target}``, ``{kind}`` and ``{prefix}`` filled in (``relayd.sinks.routing``);
- with ``--format cloudevents``, the Pub/Sub binding's ``--cloudevents-mode``: ``binary`` (data:
  the event's data; a ``ce-<attribute>`` attribute each, ``Content-Type`` for its
  ``datacontenttype``) or ``structured`` (data: the whole event; ``Content-Type:
  application/cloudevents+json``); ``relayd-id`` and ``relayd-kind`` stay.

A batch is published as Publish requests of at most ``MAX_MESSAGES`` messages and
``MAX_REQUEST_BYTES``, one topic's requests one after another (so one key's entries are never
in two requests at once), topics at the same time, and every request awaited before the batch
returns: an entry is Delivered only when its request returned its message id. A request that
fails is Retry for its entries and holds back the later entries of their keys; a topic that
does not exist or a permission refused also makes the sink not ready (with the error code)
until a request succeeds; throttling (``RESOURCE_EXHAUSTED``) is Retry after a delay. A
request the service calls invalid is sent again one message at a time, so only the bad
message is Permanent. A message over ``MAX_MESSAGE_BYTES`` or with an illegal filled-in topic
name is Permanent before anything is sent. The client's own retries are off: the relay's
backoff and attempt counts own the retrying.

Credentials are Google's Application Default Credentials (``GOOGLE_APPLICATION_CREDENTIALS``,
workload identity, the metadata server); with ``PUBSUB_EMULATOR_HOST`` set the client talks to
the emulator there, without credentials, as every Google client does. No credential, key or
token appears in a log line or error: errors name the gRPC status only.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any, ClassVar, Final

from relayd.envelope.batch import Batch
from relayd.errors import ConfigError, SinkError
from relayd.extras import import_extra
from relayd.observability.inflight import progressed
from relayd.sinks import cloudevents, trace_context
from relayd.sinks.base import DELIVERED, Outcome, Permanent, ReadyByReason, Retry, SinkOptions
from relayd.sinks.cloudevents.envelope import STRUCTURED_CONTENT_TYPE, Rendered
from relayd.sinks.gcp.target import PubSubTarget, ordering_key, parse_pubsub_target, topic_ok
from relayd.sinks.per_key import HELD_BACK
from relayd.sinks.request_chunks import chunks
from relayd.sinks.routing import fill_targets, fill_template
from relayd.sinks.spec import SinkSpec

#: Messages and bytes per Publish request (the service takes 1,000 and 10 MB), and per message.
MAX_MESSAGES: Final = 1000
MAX_REQUEST_BYTES: Final = 9_000_000
MAX_MESSAGE_BYTES: Final = 10_000_000
#: Bytes counted per message for its attributes' framing and the ordering key's.
MESSAGE_OVERHEAD: Final = 64
#: Least wait, and the longest, before entries the service throttled are tried again (seconds).
THROTTLED_AFTER_S: Final = 1.0
THROTTLED_CAP_S: Final = 20.0
#: gRPC statuses that mean the sink cannot deliver at all (not one message's fault).
_DOWN: Final = frozenset(
    {
        "NOT_FOUND",
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
        "FAILED_PRECONDITION",
        "UNAVAILABLE",
        "DEADLINE_EXCEEDED",
    }
)
_HELD: Final = Retry(error=HELD_BACK)


class PubSubSink(ReadyByReason):
    """Publish envelopes to Pub/Sub; see the module docstring for the contract."""

    name: ClassVar[str] = "pubsub"

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        self._pubsub, self._exceptions = import_extra(
            "pubsub", "gcp", "google.pubsub_v1", "google.api_core.exceptions", needs="google-cloud-pubsub"
        )
        self._target: PubSubTarget = parse_pubsub_target(spec.target)
        self._cloudevents = options.output_format == "cloudevents"
        self._mode = options.cloudevents_mode
        self._source = options.cloudevents_source
        self._client: Any = None
        self._channel: Any = None
        self._not_ready: str | None = None
        self._throttled_s = 0.0
        self._call_errors: list[str] = []
        #: the longest one request waits (``relayd.observability.inflight``; each request that ends
        #: reports it)
        self.timeout_s = self._target.timeout_s

    async def start(self) -> None:
        pubsub = self._pubsub
        emulator = os.environ.get("PUBSUB_EMULATOR_HOST")
        if emulator:
            import grpc
            from google.pubsub_v1.services.publisher.transports import PublisherGrpcAsyncIOTransport

            self._channel = grpc.aio.insecure_channel(emulator)
            self._client = pubsub.PublisherAsyncClient(
                transport=PublisherGrpcAsyncIOTransport(channel=self._channel)
            )
            return
        from google.auth.exceptions import DefaultCredentialsError

        try:
            self._client = pubsub.PublisherAsyncClient()
        except DefaultCredentialsError:
            raise ConfigError(
                "sink 'pubsub' found no Google credentials (Application Default Credentials:"
                " GOOGLE_APPLICATION_CREDENTIALS, workload identity or the metadata server)"
            ) from None

    async def close(self) -> None:
        client, channel, self._client, self._channel = self._client, self._channel, None, None
        if channel is not None:
            await channel.close()
        elif client is not None:
            await client.transport.close()

    def not_ready_reason(self) -> str | None:
        return self._not_ready

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        if self._client is None:
            raise SinkError("sink 'pubsub' delivered to before start()")
        if not batch:
            return []
        keys, prefix = batch.keys(), batch[0].prefix
        messages = self._messages(batch)
        topics = fill_targets(fill_template(self._target.topic, kind=batch.kind, prefix=prefix), keys)
        legal = {topic: topic_ok(topic) for topic in set(topics)}
        outcomes: list[Outcome] = [_HELD] * len(batch)
        by_topic: dict[str, list[int]] = {}
        refused: set[str] = set()
        for index, message in enumerate(messages):
            key = keys[index]
            size = _size(message)
            if not legal[topics[index]]:
                outcomes[index] = Permanent(reason="pubsub: the topic name for this entry is not legal")
            elif size > MAX_MESSAGE_BYTES:
                outcomes[index] = Permanent(reason=f"pubsub message too large ({size} bytes)")
            elif key is None or key not in refused:
                by_topic.setdefault(topics[index], []).append(index)
                continue
            if key is not None:
                refused.add(key)  # later entries of its key stay held back
        self._call_errors = []
        await asyncio.gather(
            *(
                self._publish_topic(topic, indexes, messages, keys, outcomes)
                for topic, indexes in by_topic.items()
            )
        )
        self._not_ready = self._call_errors[0] if self._call_errors else None
        return outcomes

    def _messages(self, batch: Batch) -> list[Any]:
        """Each envelope as a ``PubsubMessage`` (data, attributes, ordering key)."""
        message_class = self._pubsub.PubsubMessage
        ids, keys, kind = batch.ids(), batch.keys(), batch.kind
        if self._cloudevents:
            events = cloudevents.render(batch, source_template=self._source)
            bodies = [event.data if self._mode == "binary" else event.structured for event in events]
            extra = [_cloudevent_attributes(event, self._mode) for event in events]
        else:
            bodies = batch.render()
            extra = [dict(trace) for trace in trace_context.of_batch(batch)]
        return [
            message_class(
                data=body,
                attributes={"relayd-id": ids[index], "relayd-kind": kind, **extra[index]},
                ordering_key=ordering_key(key) if key is not None else "",
            )
            for index, (body, key) in enumerate(zip(bodies, keys, strict=True))
        ]

    async def _publish_topic(
        self,
        topic: str,
        indexes: list[int],
        messages: list[Any],
        keys: Sequence[str | None],
        outcomes: list[Outcome],
    ) -> None:
        """One topic's requests in order; entries of a key that failed earlier are held back."""
        failed: set[str] = set()
        sizes = {index: _size(messages[index]) for index in indexes}
        for chunk in chunks(indexes, sizes, max_entries=MAX_MESSAGES, max_bytes=MAX_REQUEST_BYTES):
            sending = [i for i in chunk if keys[i] is None or keys[i] not in failed]
            if not sending:
                continue
            results = await self._publish(topic, sending, messages)
            for index, outcome in zip(sending, results, strict=True):
                outcomes[index] = outcome
                key = keys[index]
                if key is not None and outcome is not DELIVERED:
                    failed.add(key)

    async def _publish(self, topic: str, chunk: list[int], messages: list[Any]) -> list[Outcome]:
        """One Publish request for ``chunk``: Delivered each, or the request's failure for all."""
        errors = self._exceptions
        try:
            reply = await self._client.publish(
                topic=self._target.path(topic),
                messages=[messages[i] for i in chunk],
                retry=None,
                timeout=self._target.timeout_s,
            )
        except errors.InvalidArgument:
            return await self._one_by_one(topic, chunk, messages)
        except (errors.GoogleAPIError, OSError, TimeoutError) as exc:
            return self._failed(exc, len(chunk))
        finally:
            progressed()  # this request ended: the call's liveness deadline starts again
        self._throttled_s = 0.0
        if len(reply.message_ids) != len(chunk):
            return [Retry(error="pubsub: reply does not match the request")] * len(chunk)
        return [DELIVERED] * len(chunk)

    async def _one_by_one(self, topic: str, chunk: list[int], messages: list[Any]) -> list[Outcome]:
        """A request the service called invalid, sent again a message at a time: only the bad
        message is Permanent. Once a message of an ordering key is not delivered, the later ones
        of that key are held back, as across requests (a key's order holds)."""
        if len(chunk) == 1:
            return [Permanent(reason="pubsub rejected the message (INVALID_ARGUMENT)")]
        results: list[Outcome] = []
        stopped: set[str] = set()
        for index in chunk:
            key = messages[index].ordering_key
            if key and key in stopped:
                results.append(_HELD)
                continue
            [outcome] = await self._publish(topic, [index], messages)
            results.append(outcome)
            if key and outcome is not DELIVERED:
                stopped.add(key)
        return results

    def _failed(self, exc: BaseException, count: int) -> list[Outcome]:
        """``count`` Retry outcomes for a request that failed with ``exc`` (its status, never its text)."""
        if not isinstance(exc, self._exceptions.GoogleAPICallError):
            # the exception text may name the endpoint: only its type is kept
            self._call_errors.append(f"pubsub unreachable ({type(exc).__name__})")
            return [Retry(error=self._call_errors[-1])] * count
        status = _status(exc)
        if status == "RESOURCE_EXHAUSTED":
            self._throttled_s = min(max(self._throttled_s * 2, THROTTLED_AFTER_S), THROTTLED_CAP_S)
            return [Retry(error=f"pubsub throttled ({status})", after_s=self._throttled_s)] * count
        error = f"pubsub refused the request ({status})"
        if status in _DOWN:
            self._call_errors.append(error)
        return [Retry(error=error)] * count


def _cloudevent_attributes(event: Rendered, mode: str) -> dict[str, str]:
    """The Pub/Sub binding's attributes: binary, ``ce-<name>`` per attribute and ``Content-Type``
    from ``datacontenttype``; structured, the structured content type. Both add the W3C
    ``traceparent``/``tracestate`` as attributes of their own when the event carries them."""
    attributes: dict[str, str] = {
        name: event.attributes[name] for name in ("traceparent", "tracestate") if name in event.attributes
    }
    if mode == "structured":
        attributes["Content-Type"] = STRUCTURED_CONTENT_TYPE
        return attributes
    for name, value in event.attributes.items():
        if name == "datacontenttype":
            attributes["Content-Type"] = value
        else:
            attributes[f"ce-{name}"] = value
    return attributes


def _size(message: Any) -> int:
    """Bytes a message counts against the request limit: data, attributes, ordering key."""
    attributes = sum(len(k) + len(v) for k, v in message.attributes.items())
    return len(message.data) + attributes + len(message.ordering_key) + MESSAGE_OVERHEAD


def _status(exc: Any) -> str:
    """The gRPC status name of a Google API error (``NOT_FOUND``), never its message."""
    code = getattr(exc, "grpc_status_code", None)
    if code is not None:
        return str(code.name)[:40]
    return type(exc).__name__[:40]
