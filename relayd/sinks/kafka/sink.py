"""The ``kafka`` sink: produce every envelope to a Kafka topic with librdkafka (confluent-kafka).

``kafka:HOST:PORT[,HOST:PORT...]?topic=NAME[&tls=true][&timeout_s=S]`` (optional extra:
``pip install 'relayd[kafka]'``). Each envelope becomes one record:

- value: the ``relayd/1`` JSON; key: the ordering key (outbox target, spawned child, timer
  execution), so one target stays on one partition, in order; no key for an untargeted entry;
- headers ``relayd-id`` (the envelope id: consumers dedupe on it) and ``relayd-kind``, and
  ``traceparent``/``tracestate`` when the event's data carries them (``trace_context``);
- topic: NAME with ``{target}``, ``{kind}`` and ``{prefix}`` filled in;
- with ``--format cloudevents``, the envelope as a CloudEvent in the Kafka binding's
  ``--cloudevents-mode``: ``binary`` (value: the data; headers ``ce_<attribute>`` and
  ``content-type: application/json``) or ``structured`` (value: the whole event;
  ``content-type: application/cloudevents+json``); the key stays the ordering key, which is the
  ``partitionkey`` attribute; a ``traceparent`` the event carries is also a header of its own.

The producer runs with ``acks=all`` and ``enable.idempotence=true`` (no duplicates or
reordering from its own retries). A batch is produced in full without waiting, then awaited
once: an entry is Delivered only when its delivery report says so. A report with an error is
Retry, except a record too large for the producer or the broker (Permanent, with the size);
a topic name Kafka cannot take is Permanent too. Reports not in within ``timeout_s`` leave
their entries Retry (librdkafka gives up on them by then: ``message.timeout.ms``).

``ready()`` is false while librdkafka reports every broker down (or the credentials refused)
and after a batch that delivered nothing, until a metadata request or a delivery succeeds.

Why librdkafka and not aiokafka: it is the field's standard producer, its idempotent mode works
against the broker the tests run (aiokafka's does not), and it does the batching and the
network I/O in its own C threads (``relayd bench --sink kafka:...`` measures the relay against
this same client's plain produce-and-flush).

TLS verifies the broker (``--kafka-ca-file`` replaces the system store); SASL credentials come
from ``--kafka-username-file`` / ``--kafka-password-file``, never from the spec, and appear in
no log line or error. Cloud identity (``relayd.sinks.kafka.config``): ``OAUTHBEARER`` with OIDC
client credentials (librdkafka makes the grant; the client secret from a watched file) and
``AWS_MSK_IAM`` (``relayd.sinks.kafka.msk_iam``: a token callback).

Rotation: librdkafka reads its CA bundle and SASL credentials once, when a producer is made.
When one of those files changed (``relayd.security.material``), the next batch first makes a producer
with the new material, then flushes the old one (nothing queued in it is lost) and closes it;
the batch goes out on the new one. A producer the new material cannot make (a CA bundle
librdkafka cannot load) is logged and the old one carries on.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, Final

import structlog

from relayd.envelope.batch import Batch
from relayd.errors import ConfigError, SinkError
from relayd.extras import import_extra
from relayd.sinks import cloudevents, trace_context
from relayd.sinks.base import DELIVERED, Outcome, Permanent, ReadyByReason, Retry, SinkOptions
from relayd.sinks.kafka.config import CurrentMaterial, KafkaMaterial, msk_region, producer_config
from relayd.sinks.kafka.options import KafkaOptions
from relayd.sinks.kafka.target import kafka_topic_ok, parse_kafka_target
from relayd.sinks.routing import fill_targets, fill_template
from relayd.sinks.spec import SinkSpec

#: How long the report thread blocks in one ``poll`` (seconds): the latency of a shutdown.
POLL_S: Final = 0.2
#: Seconds between two looks for delivery reports while a batch waits for them.
REPORT_GAP_S: Final = 0.001
#: Seconds between metadata probes while the sink is not ready.
PROBE_EVERY_S: Final = 1.0
#: librdkafka errors that mean no broker can be used at all.
_DOWN_ERRORS: Final = ("_ALL_BROKERS_DOWN", "_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "_RESOLVE")
#: Errors of a record too large for the producer's or the broker's limit.
_TOO_LARGE: Final = ("MSG_SIZE_TOO_LARGE", "_MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE")
#: Errors after which the broker no longer takes this producer's id or epoch: only a new
#: producer (a new id) can produce again (seen after message timeouts: tests/faults).
_PRODUCER_LOST: Final = frozenset(
    {"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "UNKNOWN_PRODUCER_ID", "OUT_OF_ORDER_SEQUENCE_NUMBER"}
)

log = structlog.get_logger(__name__)


class _Reports:
    """The delivery reports of one batch, filled in by the report thread."""

    def __init__(self, size: int, loop: asyncio.AbstractEventLoop) -> None:
        self.outcomes: list[Outcome | None] = [None] * size
        self.done = loop.create_future()
        self._loop = loop
        self._waiting = size
        self._lock = threading.Lock()
        #: a report said the producer must be replaced
        self.producer_lost = False

    def report(self, index: int, error: Any, message: Any) -> None:
        """librdkafka's ``on_delivery`` for entry ``index`` (called in the report thread)."""
        if error is not None and (error.fatal() or error.name() in _PRODUCER_LOST):
            self.producer_lost = True
        self.settle(index, DELIVERED if error is None else _classify(error, len(message.value() or b"")))

    def settle(self, index: int, outcome: Outcome) -> None:
        with self._lock:
            self.outcomes[index] = outcome
            self._waiting -= 1
            finished = self._waiting == 0
        if finished:
            self._loop.call_soon_threadsafe(_resolve, self.done)


def _resolve(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _classify(error: Any, size: int) -> Outcome:
    """The outcome of a record ``size`` bytes long that librdkafka refused or failed with ``error``."""
    name = error.name()
    if name in _TOO_LARGE:
        return Permanent(reason=f"kafka: record too large ({size} bytes; {name})")
    return Retry(error=f"kafka delivery failed ({name})")


class KafkaSink(ReadyByReason):
    """Produce envelopes to Kafka; see the module docstring for the contract."""

    name = "kafka"
    options_class = KafkaOptions

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        # without the extra, naming the sink fails at start-up
        (self._library,) = import_extra("kafka", "kafka", "confluent_kafka")
        self._target = parse_kafka_target(spec.target)
        #: the longest one deliver() waits (a producer replaced, then its reports):
        #: ``relayd.observability.inflight``
        self.timeout_s = 2 * self._target.timeout_s + 5
        self._spec, self._options = spec, options
        self._material = CurrentMaterial(options)
        #: what the producer was made with, and new material librdkafka refused (not tried again)
        self._made_with = self._material.value
        self._refused: KafkaMaterial | None = None
        self._config = producer_config(spec, options, self._made_with)
        self._token: Any = None  # AWS_MSK_IAM: the token callback (relayd.sinks.kafka.msk_iam)
        if options.own_options(KafkaOptions).sasl_mechanism == "AWS_MSK_IAM":
            from relayd.sinks.kafka.msk_iam import TokenCallback

            self._token = TokenCallback(msk_region(spec))
        self._producer: Any = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._delivering = threading.Event()
        self._brokers_down = False
        self._fatal = False
        self._delivered_last = True
        self._cloudevents = options.output_format == "cloudevents"
        self._cloudevents_mode = options.cloudevents_mode
        self._cloudevents_source = options.cloudevents_source

    async def start(self) -> None:
        self._producer = self._make_producer(self._config)
        self._start_reports()

    def _make_producer(self, config: dict[str, Any]) -> Any:
        # librdkafka's own log lines go through stdlib logging, so relayd's format and redaction
        # apply (served by the report thread's poll)
        hooks: dict[str, Any] = {"error_cb": self._on_error, "logger": logging.getLogger(__name__)}
        if self._token is not None:
            hooks["oauth_cb"] = self._token
        return self._library.Producer({**config, **hooks})

    def _start_reports(self) -> None:
        self._thread = threading.Thread(target=self._serve_reports, name="relayd-kafka-reports", daemon=True)
        self._thread.start()

    def _on_error(self, error: Any) -> None:
        """librdkafka's ``error_cb`` (report thread): broker-wide trouble, never a secret."""
        if error.fatal():
            self._fatal = True
        if error.name() in _DOWN_ERRORS:
            self._brokers_down = True

    def _serve_reports(self) -> None:
        """Serve delivery reports and error callbacks; probe the brokers while not ready."""
        producer = self._producer
        idle_s = 0.0
        while not self._stopping.is_set():
            if self._delivering.is_set():  # deliver() serves the reports itself
                self._stopping.wait(POLL_S)
                continue
            producer.poll(POLL_S)
            if self.ready():
                idle_s = 0.0
                continue
            idle_s += POLL_S
            if idle_s >= PROBE_EVERY_S:
                idle_s = 0.0
                self._probe()

    def _probe(self) -> None:
        try:
            self._producer.list_topics(timeout=PROBE_EVERY_S)
        except Exception:  # any failure leaves the sink not ready; the next probe tries again
            return
        self._brokers_down = False
        self._delivered_last = True

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        if self._producer is None:
            raise SinkError("sink 'kafka' delivered to before start()")
        if not batch:
            return []
        if self._fatal:
            await self._replace_producer()
        else:
            await self._take_new_material()
        ids, keys, kind = batch.ids(), batch.keys(), batch.kind
        bodies, format_headers = self._render(batch)
        prefix = batch[0].prefix  # one sweeper lane: one prefix per batch
        topics = fill_targets(fill_template(self._target.topic, kind=kind, prefix=prefix), keys)
        # One check per distinct name, not per record: a batch mostly goes to a few topics.
        legal = {topic: kafka_topic_ok(topic) for topic in set(topics)}
        reports = _Reports(len(batch), asyncio.get_running_loop())
        produce = self._producer.produce
        for index, body in enumerate(bodies):
            topic, key = topics[index], keys[index]
            if not legal[topic]:
                reports.settle(index, Permanent(reason="kafka: the topic name for this entry is not legal"))
                continue
            headers: list[tuple[str, str | bytes]] = [("relayd-id", ids[index]), ("relayd-kind", kind)]
            if format_headers:
                headers += format_headers[index]
            try:
                produce(
                    topic,
                    value=body,
                    key=key,
                    headers=headers,
                    on_delivery=functools.partial(reports.report, index),
                )
            except BufferError:
                reports.settle(index, Retry(error="kafka producer queue full"))
            except self._library.KafkaException as exc:  # refused before it was queued
                reports.settle(index, _classify(exc.args[0], len(body)))
        # The whole batch is queued: send it now rather than after linger.ms, as flush() does
        # (relayd bench --sink kafka:...); a zero timeout waits for nothing.
        self._producer.flush(0)
        await self._await_reports(reports)
        outcomes = [
            outcome if outcome is not None else Retry(error="kafka delivery report not in time")
            for outcome in reports.outcomes
        ]
        self._delivered_last = DELIVERED in outcomes
        if reports.producer_lost:
            self._fatal = True
        if self._delivered_last:
            self._brokers_down = False
        return outcomes

    def _render(self, batch: Batch) -> tuple[list[bytes], list[list[tuple[str, bytes]]]]:
        """Each record's value and the headers of its format (CloudEvents, or the trace context)."""
        if self._cloudevents:
            return cloudevents.kafka_records(batch, self._cloudevents_mode, self._cloudevents_source)
        bodies = batch.render()
        traces = trace_context.of_batch(batch)
        return bodies, [[(name, value.encode()) for name, value in trace.items()] for trace in traces]

    async def _await_reports(self, reports: _Reports) -> None:
        """Serve the batch's delivery reports in this thread until all are in (or time is up).

        In the loop's own thread, not the report thread's: callbacks in another thread wait
        for the GIL while the loop reads and acks (relayd bench --sink kafka:...).
        librdkafka gives up on a record after ``message.timeout.ms``; a little more bounds this.
        """
        deadline = time.monotonic() + self._target.timeout_s + 5
        poll = self._producer.poll
        self._delivering.set()
        try:
            while not reports.done.done() and time.monotonic() < deadline:
                if poll(0) == 0:
                    await asyncio.wait([reports.done], timeout=REPORT_GAP_S)
        finally:
            self._delivering.clear()

    async def _replace_producer(self) -> None:
        """An idempotent producer that hit a fatal error cannot produce again: start a new one.

        What the old one still holds is given up (its entries were reported Retry already).
        """
        producer = self._producer
        if producer is not None:
            producer.purge()
        await self.close()
        self._fatal = False
        self._stopping = threading.Event()
        await self.start()

    async def _take_new_material(self) -> None:
        """Between batches: when a credential or CA file changed, move to a producer made with it."""
        material = self._material.value
        if material in (self._made_with, self._refused):
            return
        try:
            config = producer_config(self._spec, self._options, material)
            producer = self._make_producer(config)
        except (ConfigError, self._library.KafkaException) as exc:
            # the message names the setting librdkafka refused (a CA bundle is no secret)
            log.warning("kafka_material_refused", error=str(exc))
            self._refused = material
            return
        await self.close()  # flushes the old producer: what it still holds is delivered first
        self._config, self._made_with, self._refused = config, material, None
        self._stopping = threading.Event()
        self._producer = producer
        self._start_reports()
        log.info("kafka_producer_replaced", reason="new credentials or CA bundle")

    def not_ready_reason(self) -> str | None:
        if self._fatal:
            return "kafka producer failed (a new one is made for the next batch)"
        if self._brokers_down:
            failure = self._token.failure if self._token is not None else None
            return failure or "kafka brokers unreachable"
        if not self._delivered_last:
            return "kafka delivered nothing of the last batch"
        return None

    async def close(self) -> None:
        producer, thread = self._producer, self._thread
        self._producer = self._thread = None
        self._stopping.set()
        if thread is not None:
            await asyncio.to_thread(thread.join)
        if producer is not None:
            await asyncio.to_thread(producer.flush, self._target.timeout_s)
