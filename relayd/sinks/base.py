"""The sink seam: one small async Protocol and the three outcomes a sink reports.

A sink receives a batch of envelopes and returns exactly one outcome per envelope, in the same
order. relayd acks an entry only after its outcome is ``Delivered``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from relayd.envelope.batch import Batch

_Own = TypeVar("_Own")


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
    """The entry can never be delivered; relayd dead-letters it with ``reason`` (free text).

    ``wholesale``, when set, says what to check if many targets get this same answer at once
    (a 401: the credentials): the sink's breaker then takes it as an outage of the sink, not
    as poison, and dead-letters nothing (``relayd.engine.breaker``).
    """

    reason: str
    wholesale: str = field(default="", compare=False)


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

        ``batch`` is a ``relayd.envelope.batch.Batch``: a ``Sequence[Envelope]`` of one kind with
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
    """The options every sink shares, and the sink's own (``own``) as ``resolve_sink`` set them."""

    #: The body format: ``relayd`` (the ``relayd/1`` envelope) or ``cloudevents`` (CloudEvents 1.0).
    output_format: Literal["relayd", "cloudevents"] = "relayd"
    #: The CloudEvents content mode where the transport has headers (``binary``) or not.
    cloudevents_mode: Literal["binary", "structured"] = "binary"
    #: The CloudEvents ``source``, ``{prefix}`` filled in per prefix.
    cloudevents_source: str = "relayd://{prefix}"
    #: CA bundle for ``rediss://`` destinations (None: the system trust store).
    redis_ca_file: str | None = None
    #: Permit plaintext Redis to non-loopback hosts (README.md#security).
    allow_plaintext: bool = False
    #: The sentinels' own credentials for ``redis+sentinel://`` destinations (``--sentinel-*-file``).
    sentinel_username: str | None = None
    sentinel_password: str | None = field(default=None, repr=False)
    #: Re-read every watched secret and certificate file at once (``MaterialWatch.check_now``):
    #: a sink calls it when an answer suggests its material is stale (a 401, a failed TLS check).
    check_material: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    #: Epoch seconds as the relay counts them (the Redis server's clock while relaying; the
    #: host's when None): what a sink stamps on the wire, a signature's timestamp for one.
    clock: Callable[[], float] | None = field(default=None, repr=False, compare=False)
    #: The sink's own options: an instance of its factory's ``options_class``
    #: (``relayd.sinks.own_options``), set by ``resolve_sink``; read it with ``own_options``.
    own: Any = field(default=None, repr=False)
    #: Where ``resolve_sink`` gets a sink's own options from (``Settings.own_options``); a
    #: factory is handed None here, so it sees the common options and its own, nothing else.
    own_for: Callable[[type], Any] | None = field(default=None, repr=False, compare=False)

    def own_options(self, cls: type[_Own]) -> _Own:
        """The sink's own options of class ``cls``, or ``cls()`` (its defaults) when none were given."""
        return self.own if isinstance(self.own, cls) else cls()


def not_ready_reason(sink: object) -> Callable[[], str | None] | None:
    """The sink's optional ``not_ready_reason`` method (see ``Sink``), or None when it has none."""
    method = getattr(sink, "not_ready_reason", None)
    return method if callable(method) else None
