"""The ``amqp`` sink: publish every envelope to a RabbitMQ (AMQP 0-9-1) exchange, confirmed.

``amqp:amqp[s]://[USER@]HOST[:PORT][/VHOST]?routing_key=KEY[&exchange=NAME]`` (optional extra:
``pip install 'relayd[amqp]'``; the spec grammar and its checks are in
``relayd.sinks.amqp.target``). Built on aiormq, the asyncio AMQP client that aio-pika wraps:
the sink needs exactly ``basic.publish`` on a confirm channel and its confirmation per message,
and aiormq gives that without aio-pika's per-message ``Message`` objects and without a robust
connection that would reconnect and buffer behind the relay's back (the relay's own retry,
backoff and ``/readyz`` handle an outage; see tests/benchmarks/bench_amqp_clients.py).

Each envelope is one persistent message (``delivery_mode`` 2) with ``mandatory`` set, content
type ``application/json``, ``message_id`` = the envelope id (consumers dedupe on it) and
``type`` = its kind, and the ``traceparent``/``tracestate`` headers of the envelope's trace
context (``trace_context``); the body is the ``relayd/1`` JSON. With ``--format cloudevents``,
the AMQP binding's ``--cloudevents-mode`` (``relayd.sinks.cloudevents``): ``binary`` sends the
data as the body and a ``cloudEvents_<attribute>`` header each; ``structured`` the whole event,
content type ``application/cloudevents+json``. ``{target}``, ``{kind}`` and
``{prefix}`` in the routing key route each target on its own key.

A batch is published at once on one confirm channel (the broker sees it in batch order, so a
queue keeps per-target order) and all its confirms are awaited together. Outcomes:

- ``basic.ack`` → Delivered.
- returned (no queue bound for the routing key) → Retry, and the sink is not ready with the
  reason until a batch goes through without a return: a missing binding is the operator's to
  fix, and nothing is dropped meanwhile.
- ``basic.nack``, a closed channel (the exchange does not exist) or connection, no confirm
  within ``CONFIRM_TIMEOUT_S`` → Retry; the channel or connection is opened again on the next
  batch, and the sink is not ready until then.

A confirmed entry behind a failed one of its own target is reported as confirmed: the engine
holds it back and sends it again after that entry (per-key order is the engine's, for every sink).
The password comes from ``--amqp-password-file``; it is never in the spec, a log line or an
error, and the broker's URL is shown without it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from relayd.envelope.batch import Batch
from relayd.extras import import_extra
from relayd.security.material import Fixed, Material
from relayd.security.tls import WatchedCaContext
from relayd.sinks import cloudevents, trace_context
from relayd.sinks.amqp.options import AmqpOptions
from relayd.sinks.amqp.target import AmqpTarget, parse_amqp_target
from relayd.sinks.base import DELIVERED, Outcome, ReadyByReason, Retry, SinkOptions
from relayd.sinks.routing import fill_all
from relayd.sinks.spec import SinkSpec

if TYPE_CHECKING:
    import aiormq
    import aiormq.abc

#: Longest wait for the broker to accept a connection and open a channel, in seconds.
CONNECT_TIMEOUT_S: Final = 10.0
#: Longest wait for every confirm of one batch, in seconds; then the batch is Retry.
CONFIRM_TIMEOUT_S: Final = 30.0
#: AMQP ``delivery_mode`` of a message the broker writes to disk.
PERSISTENT: Final = 2


class AmqpSink(ReadyByReason):
    """Publish envelopes to one exchange with publisher confirms; see the module docstring."""

    name = "amqp"
    options_class = AmqpOptions

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        (self._aiormq,) = import_extra("amqp", "amqp", "aiormq", needs="aiormq")
        self._render = cloudevents.amqp_renderer(
            options.output_format, options.cloudevents_mode, options.cloudevents_source
        )
        own = options.own_options(AmqpOptions)
        self._target: AmqpTarget = parse_amqp_target(
            spec.target, has_password_file=own.password is not None, allow_plaintext=options.allow_plaintext
        )
        # read at each (re)connect: a rotated --amqp-password-file is used by the next connection
        self._password: Material[str | None] = own.password or Fixed(None)
        # the CA bundle as the file holds it now: the next connection verifies with a rotated one
        ca_file = str(own.ca_file) if own.ca_file is not None else None
        self._ca = WatchedCaContext(own.ca, ca_file, option="sink 'amqp': --amqp-ca-file")
        self._connection: aiormq.abc.AbstractConnection | None = None
        self._channel: aiormq.abc.AbstractChannel | None = None
        self._not_ready: str | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect once; a broker that is down now is retried by ``deliver`` (not ready meanwhile)."""
        if self._target.tls:
            self._ca.current()  # a first CA bundle that holds no usable CA stops relayd here
        try:
            await self._open_channel()
        except (OSError, TimeoutError, self._aiormq.exceptions.AMQPError) as exc:
            self._not_ready = f"amqp broker unreachable ({type(exc).__name__})"
            await self._drop_connection()

    async def close(self) -> None:
        await self._drop_connection()

    def not_ready_reason(self) -> str | None:
        """Why ``ready()`` is False (one line, no secret), or None when it is True."""
        if self._not_ready is not None:
            return self._not_ready
        if self._connection is not None and self._connection.is_closed:
            return "amqp connection lost"
        return self._ca.problem

    # -- delivery ------------------------------------------------------------------------------

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        if not batch:
            return []
        bodies, content_type, headers = self._render(batch)
        ids, keys, kind = batch.ids(), batch.keys(), batch.kind
        count = len(bodies)
        routing_keys = fill_all(
            self._target.routing_key,
            targets=keys,
            kind=kind,
            prefixes=[e.prefix for e in batch] if "{prefix}" in self._target.routing_key else [""] * count,
        )
        try:
            channel = await self._open_channel()
        except (OSError, TimeoutError, self._aiormq.exceptions.AMQPError) as exc:
            self._not_ready = f"amqp broker unreachable ({type(exc).__name__})"
            await self._drop_connection()
            return [Retry(error=self._not_ready)] * count
        properties = self._aiormq.spec.Basic.Properties
        exchange = self._target.exchange
        publishes = [
            channel.basic_publish(
                body,
                exchange=exchange,
                routing_key=routing_key,
                properties=properties(
                    content_type=content_type,
                    delivery_mode=PERSISTENT,
                    message_id=entry_id,
                    message_type=kind,
                    # the format's headers (CloudEvents binary mode), and traceparent/tracestate
                    headers={**trace, **headers[index]} if headers is not None else trace or None,
                ),
                mandatory=True,
            )
            for index, (body, routing_key, entry_id, trace) in enumerate(
                zip(bodies, routing_keys, ids, trace_context.of_batch(batch), strict=True)
            )
        ]
        try:
            async with asyncio.timeout(CONFIRM_TIMEOUT_S):
                replies = await asyncio.gather(*publishes, return_exceptions=True)
        except TimeoutError:
            self._not_ready = f"amqp broker sent no confirms within {CONFIRM_TIMEOUT_S:.0f}s"
            await self._drop_connection()
            return [Retry(error=self._not_ready)] * count
        return self._classify(replies)

    def _classify(self, replies: list[Any]) -> list[Outcome]:
        """One outcome per publish reply; sets the readiness reason from what went wrong."""
        errors = self._aiormq.exceptions
        ack = self._aiormq.spec.Basic.Ack
        outcomes: list[Outcome] = []
        returned = 0
        lost: BaseException | None = None
        for reply in replies:
            if isinstance(reply, ack):
                outcomes.append(DELIVERED)
            elif isinstance(reply, errors.PublishError):
                returned += 1
                outcomes.append(_UNROUTABLE)
            elif isinstance(reply, errors.DeliveryError):
                outcomes.append(_NACKED)
            elif isinstance(reply, BaseException):
                lost = lost or reply
                outcomes.append(Retry(error=f"amqp publish failed ({type(reply).__name__})"))
            else:  # no confirm mode would answer None: never on our channel
                outcomes.append(Retry(error="amqp publish not confirmed"))
        if lost is not None:
            self._not_ready = _lost_reason(lost, self._target.exchange, errors)
            self._channel = None  # a closed channel is not reused; the connection may be fine
        elif returned:
            self._not_ready = (
                f"amqp: {returned} unroutable message(s) returned by exchange {self._target.exchange!r} "
                "(no queue bound for their routing key)"
            )
        else:
            self._not_ready = None
        return outcomes

    # -- connection ----------------------------------------------------------------------------

    async def _open_channel(self) -> aiormq.abc.AbstractChannel:
        """The confirm channel, (re)connecting as needed."""
        channel, connection = self._channel, self._connection
        if channel is not None and connection is not None and not (channel.is_closed or connection.is_closed):
            return channel
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            if self._connection is None or self._connection.is_closed:
                await self._drop_connection()
                self._connection = await self._connect()
            self._channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        return self._channel

    async def _connect(self) -> aiormq.abc.AbstractConnection:
        target = self._target
        context = self._ca.current() if target.tls else None
        connection = self._aiormq.Connection(target.connection_url(self._password.value), context=context)
        connection.vhost = target.vhost  # set here, not in the URL: no quoting rules to get wrong
        try:
            await connection.connect()
        except BaseException:
            with contextlib.suppress(Exception):  # the connect error is the one worth raising
                await connection.close()
            raise
        return connection  # type: ignore[no-any-return]

    async def _drop_connection(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None and not connection.is_closed:
            with contextlib.suppress(Exception):  # a broken connection may fail to close: it is gone
                await connection.close()


def _lost_reason(error: BaseException, exchange: str, errors: Any) -> str:
    if isinstance(error, errors.ChannelNotFoundEntity):
        return f"amqp: exchange {exchange!r} not found (declare it, or fix the spec)"
    if isinstance(error, errors.ChannelAccessRefused):
        return f"amqp: access to exchange {exchange!r} refused (check the user's permissions)"
    return f"amqp connection or channel lost ({type(error).__name__})"


_UNROUTABLE: Final = Retry(error="amqp message returned: no queue bound for its routing key")
_NACKED: Final = Retry(error="amqp broker nacked the message")
