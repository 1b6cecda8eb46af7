"""The sink seam: one small async Protocol and the three outcomes a sink reports.

A sink receives a batch of envelopes and returns exactly one outcome per envelope, in the same
order. relayd acks an entry only after its outcome is ``Delivered``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from relayd.batch import Batch
from relayd.material import Material


@dataclass(frozen=True, slots=True)
class Delivered:
    """The sink has durably accepted the entry; relayd may ack it."""


@dataclass(frozen=True, slots=True)
class Retry:
    """A transient failure: try again later, no sooner than ``after_s`` seconds when given."""

    error: str = ""
    after_s: float | None = None


@dataclass(frozen=True, slots=True)
class Permanent:
    """The entry can never be delivered; relayd dead-letters it with ``reason`` (free text)."""

    reason: str


Outcome = Delivered | Retry | Permanent

#: The one ``Delivered`` instance sinks return (it carries no data).
DELIVERED = Delivered()


def all_delivered(outcomes: Sequence[Outcome], count: int) -> bool:
    """Whether ``outcomes`` confirms every one of ``count`` entries (counted in C, not per entry)."""
    return len(outcomes) == count and outcomes.count(DELIVERED) == count


@runtime_checkable
class Sink(Protocol):
    """Where relayd delivers envelopes.

    Lifecycle: ``start()`` once before the first batch; ``deliver()`` any number of times,
    never concurrently with itself for one sink; ``close()`` once at shutdown.

    Optionally a sink also defines ``not_ready_reason() -> str | None``: one line (no secret)
    saying why ``ready()`` is False, which ``/readyz`` shows (``relayd.sinks.base.not_ready_reason``).
    Every built-in sink keeps its readiness as that one reason (``ReadyByReason``).
    """

    name: str

    async def start(self) -> None:
        """Open connections and files. Raises ``SinkError`` or ``ConfigError`` when it cannot."""

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        """Deliver ``batch`` and return one outcome per envelope, in order.

        ``batch`` is a ``relayd.batch.Batch``: a ``Sequence[Envelope]`` of one kind with
        ``batch.kind``, ``batch.ids()``, ``batch.keys()`` and ``batch.render()``, which read a
        columnar window without making an envelope per entry (docs/sinks.md).
        An exception raised here counts as ``Retry`` for every envelope of the batch.
        """

    def ready(self) -> bool:
        """Whether the sink can take deliveries now (feeds ``/readyz``)."""

    async def close(self) -> None:
        """Flush and release everything; called once."""


class ReadyByReason:
    """Readiness as one reason string (None: ready), with ``ready()`` derived from it.

    One idiom for every built-in sink: a sink tracks why it cannot take deliveries, and
    ``/readyz`` shows that same text, so the flag and the reason never disagree.
    """

    __slots__ = ()

    def not_ready_reason(self) -> str | None:
        """Why the sink cannot take deliveries now (one line, no secret), or None when it can."""
        raise NotImplementedError

    def ready(self) -> bool:
        """Whether ``not_ready_reason()`` is None."""
        return self.not_ready_reason() is None


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """What a sink factory may need beyond its spec text (from Settings; secrets as bytes)."""

    #: HMAC-SHA256 key for webhook signatures, the first line of ``--webhook-secret-file``.
    webhook_secret: bytes | None = field(default=None, repr=False)
    #: Every current signing key of ``--webhook-secret-file`` (re-read when the file changes);
    #: the webhook signs with each of them and prefers this over ``webhook_secret``.
    webhook_secrets: Material[tuple[bytes, ...]] | None = field(default=None, repr=False)
    #: How webhook requests are signed: ``standard`` (Standard Webhooks) or ``relayd`` (``X-Relayd-*``).
    webhook_signature: Literal["standard", "relayd"] = "standard"
    webhook_timeout_s: float = 10.0
    #: The body format: ``relayd`` (the ``relayd/1`` envelope) or ``cloudevents`` (CloudEvents 1.0).
    output_format: Literal["relayd", "cloudevents"] = "relayd"
    #: The CloudEvents content mode where the transport has headers (``binary``) or not.
    cloudevents_mode: Literal["binary", "structured"] = "binary"
    #: The CloudEvents ``source``, ``{prefix}`` filled in per prefix.
    cloudevents_source: str = "relayd://{prefix}"
    webhook_concurrency: int = 16
    #: Most envelopes in one webhook request (1: one request per envelope).
    webhook_batch: int = 1
    #: CA bundle for ``rediss://`` destinations (None: the system trust store).
    redis_ca_file: str | None = None
    #: Permit plaintext Redis to non-loopback hosts (README.md#security).
    allow_plaintext: bool = False
    #: The sentinels' own credentials for ``redis+sentinel://`` destinations (``--sentinel-*-file``).
    sentinel_username: str | None = None
    sentinel_password: str | None = field(default=None, repr=False)
    #: Seconds to open a webhook connection, and between reads of an answer (None: only the total).
    webhook_connect_timeout_s: float | None = None
    webhook_read_timeout_s: float | None = None
    #: Extra request headers from ``--webhook-headers-file`` (values may be credentials: no repr).
    webhook_headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    #: The same headers, re-read when ``--webhook-headers-file`` changes (preferred when set).
    webhook_headers_material: Material[tuple[tuple[str, str], ...]] | None = field(default=None, repr=False)
    #: Send webhook bodies gzip-compressed (``Content-Encoding: gzip``).
    webhook_gzip: bool = False
    #: CA bundle for ``https://`` webhooks (None: the system trust store).
    webhook_ca_file: str | None = None
    #: The same bundle, re-read when ``--webhook-ca-file`` changes (preferred when set).
    webhook_ca_material: Material[bytes] | None = None
    #: SASL credentials for the ``kafka`` sink, read from ``--kafka-username-file`` and
    #: ``--kafka-password-file``; the mechanism from ``--kafka-sasl-mechanism``.
    kafka_username: str | None = field(default=None, repr=False)
    kafka_password: str | None = field(default=None, repr=False)
    kafka_sasl_mechanism: str = "SCRAM-SHA-512"
    #: CA bundle for the ``kafka`` sink's TLS (None: the system trust store).
    kafka_ca_file: str | None = None
    #: The same credentials and CA bundle, re-read when their files change (preferred when set):
    #: the kafka sink replaces its producer between batches when one of them changed.
    kafka_username_material: Material[str] | None = field(default=None, repr=False)
    kafka_password_material: Material[str] | None = field(default=None, repr=False)
    kafka_ca_material: Material[bytes] | None = None
    #: A NATS credentials file (JWT and seed) for the ``nats`` sink, from ``--nats-creds-file``.
    nats_creds_file: str | None = None
    #: A NATS token, read from ``--nats-token-file``.
    nats_token: str | None = field(default=None, repr=False)
    #: The same token, re-read when ``--nats-token-file`` changes (preferred when set).
    nats_token_material: Material[str] | None = field(default=None, repr=False)
    #: CA bundle for the ``nats`` sink's TLS (None: the system trust store).
    nats_ca_file: str | None = None
    #: The same bundle, re-read when ``--nats-ca-file`` changes (preferred when set).
    nats_ca_material: Material[bytes] | None = None
    #: The AMQP user's password, read from ``--amqp-password-file`` (never from the spec).
    amqp_password: str | None = field(default=None, repr=False)
    #: The same password, re-read when ``--amqp-password-file`` changes (preferred when set).
    amqp_password_material: Material[str] | None = field(default=None, repr=False)
    #: CA bundle for ``amqps://`` brokers (None: the system trust store).
    amqp_ca_file: str | None = None
    #: Re-read every watched secret and certificate file at once (``MaterialWatch.check_now``):
    #: a sink calls it when an answer suggests its material is stale (a 401, a failed TLS check).
    check_material: Callable[[], None] | None = field(default=None, repr=False, compare=False)


def not_ready_reason(sink: object) -> Callable[[], str | None] | None:
    """The sink's optional ``not_ready_reason`` method (see ``Sink``), or None when it has none."""
    method = getattr(sink, "not_ready_reason", None)
    return method if callable(method) else None
