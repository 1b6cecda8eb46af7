"""``Batch``: what a sink's ``deliver`` receives, one kind of envelope in delivery order.

A batch is a ``Sequence[Envelope]`` (index it, iterate it, ``len`` it, slice it into smaller
batches) that also answers, without building an envelope per entry where it can:

- ``batch.kind``: the one kind of every envelope (``"outbox"``, ``"spawn"`` or ``"timer"``);
- ``batch.ids()``: every envelope's delivery id, in order (the dedupe key);
- ``batch.keys()``: every envelope's ordering key, in order (``None`` for an untargeted outbox
  entry);
- ``batch.render()``: every envelope's ``relayd/1`` JSON bytes, in order.

Each call returns a new list the sink may keep or change. Two implementations: the columnar
``relayd.envelope.outbox_window.OutboxWindow`` (a read window of outbox entries, the drain's fast
path: it renders from its columns and makes an envelope only when indexed) and ``EnvelopeList`` (a
plain list of envelopes: spawns, timers and retries). A sink that reads whole columns through these
methods gets the fast path for free; one that iterates the envelopes still works on both.
``Batch.of`` makes a batch of any envelopes, for tests and hand-written callers.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from relayd.envelope import Envelope, Kind


class Batch(Sequence["Envelope"]):
    """One kind of envelope, in delivery order: the sink batch contract (see the module docstring)."""

    __slots__ = ()

    @property
    @abstractmethod
    def kind(self) -> Kind:
        """The kind of every envelope of the batch."""

    @abstractmethod
    def ids(self) -> list[str]:
        """Every envelope's delivery id, in order."""

    @abstractmethod
    def keys(self) -> list[str | None]:
        """Every envelope's ordering key, in order."""

    @abstractmethod
    def render(self) -> list[bytes]:
        """Every envelope's ``relayd/1`` JSON, in order."""

    @overload
    def __getitem__(self, index: int) -> Envelope: ...
    @overload
    def __getitem__(self, index: slice) -> Batch: ...
    @abstractmethod
    def __getitem__(self, index: int | slice) -> Envelope | Batch: ...

    @staticmethod
    def of(envelopes: Iterable[Envelope], kind: Kind | None = None) -> Batch:
        """``envelopes`` as a batch: a batch as it is, anything else as an ``EnvelopeList`` (which
        keeps a list as it is, not a copy of it).

        Without ``kind`` the envelopes name it; they must be at least one and all of one kind.

        Raises:
            ValueError: no envelope and no ``kind``, or envelopes of more than one kind.
        """
        if isinstance(envelopes, Batch):
            return envelopes
        return EnvelopeList(envelopes if type(envelopes) is list else list(envelopes), kind)


class EnvelopeList(Batch):
    """A batch over a list of envelopes (spawns, timers, retries); the list is kept, not copied."""

    __slots__ = ("_envelopes", "_kind")

    def __init__(self, envelopes: list[Envelope], kind: Kind | None = None) -> None:
        if kind is None:
            kinds = {envelope.kind for envelope in envelopes}
            if len(kinds) != 1:
                raise ValueError(f"a batch holds one kind of envelope, got {sorted(kinds)}")
            (kind,) = kinds
        self._envelopes = envelopes
        self._kind: Kind = kind

    @property
    def kind(self) -> Kind:
        return self._kind

    def __len__(self) -> int:
        return len(self._envelopes)

    def __iter__(self) -> Iterator[Envelope]:
        return iter(self._envelopes)

    @overload
    def __getitem__(self, index: int) -> Envelope: ...
    @overload
    def __getitem__(self, index: slice) -> EnvelopeList: ...
    def __getitem__(self, index: int | slice) -> Envelope | EnvelopeList:
        if isinstance(index, slice):
            return EnvelopeList(self._envelopes[index], self._kind)
        return self._envelopes[index]

    def ids(self) -> list[str]:
        return [envelope.id for envelope in self._envelopes]

    def keys(self) -> list[str | None]:
        return [envelope.ordering_key for envelope in self._envelopes]

    def render(self) -> list[bytes]:
        return [envelope.to_json() for envelope in self._envelopes]

    def __repr__(self) -> str:
        return f"EnvelopeList({self._envelopes!r}, kind={self._kind!r})"
