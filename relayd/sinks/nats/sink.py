"""The ``nats`` sink: publish every envelope to NATS JetStream and wait for its PubAck.

``nats:nats://HOST:PORT[,nats://HOST:PORT...]?subject=NAME[&timeout_s=S]`` (optional extra:
``pip install 'relayd[nats]'``), on nats-py. Each envelope is one JetStream publish:

- payload: the ``relayd/1`` JSON; header ``Nats-Msg-Id``: the envelope id, so JetStream drops a
  redelivery within the stream's duplicate window (the PubAck says ``duplicate``: Delivered);
  headers ``traceparent``/``tracestate``: the envelope's trace context (``trace_context``);
  with ``--format cloudevents``, the NATS binding's ``--cloudevents-mode``: ``binary`` (payload:
  the data; a ``ce-<attribute>`` header each) or ``structured`` (payload: the whole event;
  ``Content-Type: application/cloudevents+json``), ``relayd.sinks.cloudevents``;
- subject: NAME with ``{target}`` (the ordering key, ``_`` without one), ``{kind}`` and
  ``{prefix}`` filled in: ``events.{target}`` gives every target its own subject.

A batch is published without waiting (``publish_async``: the messages leave in batch order on
one connection), then every PubAck is awaited together, at most ``timeout_s``. An entry is
Delivered only on its PubAck. No stream listening on the subject is Retry and makes the sink
not ready (an operator creates the stream; nothing is dropped); a payload over the server's
``max_payload`` or the stream's message size limit is Permanent; anything else is Retry.

``ready()`` is false while the connection is down (nats-py reconnects by itself, forever) and
after a batch that found no stream, until a batch is confirmed.

TLS (``tls://`` servers, or any with ``--nats-ca-file``) verifies the server; credentials come
from ``--nats-creds-file`` (JWT and seed) or ``--nats-token-file``, never from the spec, and
appear in no log line or error. A rotated ``--nats-token-file`` or ``--nats-ca-file`` is used by
the next (re)connect: nats-py asks for the token and the TLS context each time, and a changed
CA bundle becomes a new context before the next batch (a bundle that does not load keeps the
last one).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any, Final

from relayd.envelope.batch import Batch
from relayd.errors import SinkError
from relayd.extras import import_extra
from relayd.security.tls import WatchedCaContext
from relayd.sinks import cloudevents, trace_context
from relayd.sinks.base import DELIVERED, Outcome, Permanent, ReadyByReason, Retry, SinkOptions
from relayd.sinks.nats.options import NatsOptions
from relayd.sinks.nats.target import nats_subject_ok, parse_nats_target
from relayd.sinks.routing import fill_targets, fill_template
from relayd.sinks.spec import SinkSpec
from relayd.sinks.target_rules import check_plaintext

#: Seconds one connection attempt may take.
CONNECT_TIMEOUT_S: Final = 2
#: Seconds a first connection may take, all servers tried, before the batch is Retry.
FIRST_CONNECT_S: Final = 5.0
#: Seconds between reconnection attempts once connected (nats-py retries forever).
RECONNECT_WAIT_S: Final = 0.5
#: Publishes without a PubAck nats-py lets a connection hold: more than any batch (``--batch``
#: is at most 100,000), so a publish never stalls on it (while the server is away, it would
#: stall forever).
MAX_PENDING: Final = 100_000
#: JetStream's error code for a message over the stream's ``max_msg_size``.
_MESSAGE_TOO_LARGE: Final = 10054
_NO_STREAM: Final = Retry(error="nats: no JetStream stream for the subject")


class NatsSink(ReadyByReason):
    """Publish envelopes to JetStream; see the module docstring for the contract."""

    name = "nats"
    options_class = NatsOptions

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        # without the extra, naming the sink fails at start-up
        self._nats = import_extra("nats", "nats", "nats", "nats.errors", "nats.js.errors")[0]
        self._render = cloudevents.nats_renderer(
            options.output_format, options.cloudevents_mode, options.cloudevents_source
        )
        self._target = parse_nats_target(spec.target)
        own = options.own_options(NatsOptions)
        #: the longest one deliver() waits (a first connection, then the PubAcks):
        #: ``relayd.observability.inflight``
        self.timeout_s = 2 * self._target.timeout_s + FIRST_CONNECT_S
        tls = self._target.tls or own.ca_file is not None
        token = own.token
        credentials = own.creds_file is not None or token is not None
        check_plaintext(
            self._target.hosts,
            "nats",
            tls=tls,
            credentials=credentials,
            allow_plaintext=options.allow_plaintext,
        )
        self._connect_kwargs: dict[str, Any] = {
            "servers": list(self._target.servers),
            "connect_timeout": CONNECT_TIMEOUT_S,
            "reconnect_time_wait": RECONNECT_WAIT_S,
            "max_reconnect_attempts": -1,
            "allow_reconnect": True,
            "error_cb": _quiet,
            "name": "relayd",
        }
        if own.creds_file is not None:
            self._connect_kwargs["user_credentials"] = str(own.creds_file)
        if token is not None:
            # nats-py asks at every (re)connect: a rotated --nats-token-file is used by the next one
            self._connect_kwargs["token"] = lambda: token.value
        self._tls = tls
        ca_file = str(own.ca_file) if own.ca_file is not None else None
        self._ca = WatchedCaContext(own.ca, ca_file, option="sink 'nats': --nats-ca-file")
        self._connection: Any = None
        self._stream: Any = None
        self._no_stream = False
        self._started = False
        #: a publish failed after nats-py registered its future (see ``_cancel_pending``)
        self._orphans = False

    async def start(self) -> None:
        if self._tls:
            # verified TLS, always; the CA file replaces the system store when given
            self._take_new_ca()
        self._started = True
        await self._connect()

    def _take_new_ca(self) -> None:
        """Use the context of the current CA bundle (a new one when the bundle changed)."""
        context = self._ca.current()
        if context is self._connect_kwargs.get("tls"):
            return
        self._connect_kwargs["tls"] = context
        if self._connection is not None:
            # nats-py reads its options' context at every reconnect: the next one verifies with it
            self._connection.options["tls"] = context

    async def _connect(self) -> bool:
        """Connect when not connected; False while no server answers."""
        if self._connection is not None:
            return True
        try:
            # nats-py retries a first connection as often as a reconnection (forever): bound it
            self._connection = await asyncio.wait_for(
                self._nats.connect(**self._connect_kwargs), min(self._target.timeout_s, FIRST_CONNECT_S)
            )
        except (OSError, TimeoutError, self._nats.errors.Error):
            return False
        self._stream = self._connection.jetstream(
            timeout=self._target.timeout_s, publish_async_max_pending=MAX_PENDING
        )
        return True

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        if not self._started:
            raise SinkError("sink 'nats' delivered to before start()")
        if not batch:
            return []
        if self._tls:
            self._take_new_ca()
        if not await self._connect():
            return [Retry(error="nats unreachable")] * len(batch)
        bodies, format_headers = self._render(batch)
        ids, keys, kind = batch.ids(), batch.keys(), batch.kind
        prefix = batch[0].prefix  # one sweeper lane: one prefix per batch
        subjects = fill_targets(fill_template(self._target.subject, kind=kind, prefix=prefix), keys)
        outcomes: list[Outcome] = [Retry(error="nats PubAck not in time")] * len(batch)
        traces = trace_context.of_batch(batch)
        sent = await self._publish_all(bodies, subjects, ids, format_headers, outcomes, traces)
        if sent and self._orphans:
            # a refused publish left nats-py a future of its own: wait on ours alone
            await asyncio.wait([future for _, future in sent], timeout=self._target.timeout_s)
        elif sent:
            # one wait for every PubAck (one event, no callback per future: relayd bench --sink nats:...)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stream.publish_async_completed(), self._target.timeout_s)
        for index, future in sent:
            if future.done():
                outcomes[index] = self._classify(future)
        self._cancel_pending()
        if DELIVERED in outcomes:
            self._no_stream = False
        elif _NO_STREAM in outcomes:
            self._no_stream = True
        return outcomes

    async def _publish_all(  # noqa: PLR0917  # the columns of one batch
        self,
        bodies: list[bytes],
        subjects: list[str],
        ids: list[str],
        format_headers: list[dict[str, str]] | None,
        outcomes: list[Outcome],
        traces: list[dict[str, str]],
    ) -> list[tuple[int, asyncio.Future[Any]]]:
        """Send every message without waiting; set the outcome of those refused at once."""
        sent: list[tuple[int, asyncio.Future[Any]]] = []
        publish = self._stream.publish_async
        # One check per distinct subject, not per message: a batch mostly goes to a few subjects.
        valid = {subject: nats_subject_ok(subject) for subject in set(subjects)}
        for index, body in enumerate(bodies):
            subject = subjects[index]
            if not valid[subject]:
                outcomes[index] = Permanent(reason="nats: the subject for this entry is not valid")
                continue
            if len(body) > self._connection.max_payload:  # refused before nats-py registers it
                outcomes[index] = Permanent(reason=f"nats: message too large ({len(body)} bytes)")
                continue
            headers = {"Nats-Msg-Id": ids[index], **traces[index]}
            if format_headers is not None:
                headers.update(format_headers[index])
            try:
                future = await publish(subject, body, headers=headers)
            except self._nats.errors.MaxPayloadError:
                outcomes[index] = Permanent(reason=f"nats: message too large ({len(body)} bytes)")
                continue
            except (self._nats.errors.Error, OSError) as exc:
                # nats-py registered the PubAck future before the publish failed
                self._orphans = True
                outcomes[index] = Retry(error=f"nats publish failed ({type(exc).__name__})")
                continue
            sent.append((index, future))
        return sent

    def _classify(self, future: asyncio.Future[Any]) -> Outcome:
        error = future.exception()
        if error is None:
            return DELIVERED
        if isinstance(error, self._nats.js.errors.NoStreamResponseError):
            return _NO_STREAM
        if isinstance(error, self._nats.js.errors.APIError) and error.err_code == _MESSAGE_TOO_LARGE:
            return Permanent(reason="nats: message over the stream's max_msg_size")
        return Retry(error=f"nats publish failed ({type(error).__name__})")

    def _cancel_pending(self) -> None:
        """Cancel every PubAck future still pending: ours that timed out, and those nats-py
        registered for a publish that then failed. Only this sink publishes on the context, and
        a cancelled future frees its slot and lets ``publish_async_completed`` fire again; nats-py
        has no public way to reach them."""
        pending = getattr(self._stream, "_publish_async_futures", {})
        for future in list(pending.values()):
            if not future.done():
                future.cancel()
        self._orphans = False

    def not_ready_reason(self) -> str | None:
        connection = self._connection
        if connection is None or not connection.is_connected:
            return "nats server unreachable (reconnecting)"
        if self._no_stream:
            return "nats: no JetStream stream takes the subject"
        return None

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()


async def _quiet(error: Exception) -> None:
    """nats-py's error callback: reconnects are reported by ``ready()``, not by log lines."""
