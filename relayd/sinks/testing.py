"""A contract suite every sink must pass, for built-in sinks and plugins alike.

Subclass ``SinkContract`` in a test module (pytest collects ``Test*`` classes) and implement
``open_sink`` (a started sink to a working destination) and ``received`` (the envelope ids the
destination holds, in arrival order); each ``test_*`` method is one case of the contract::

    from relayd.sinks.testing import SinkContract

    class TestSqliteSink(SinkContract):
        @pytest.fixture(autouse=True)
        def _where(self, tmp_path):
            self.path = tmp_path / "out.db"

        async def open_sink(self):
            sink = SqliteSink(parse_sink_spec(f"sqlite:{self.path}"), SinkOptions())
            await sink.start()
            return sink

        async def received(self, count):
            return [row[0] for row in sqlite3.connect(self.path).execute("SELECT id FROM envelopes")]

A sink whose destination can be told to refuse entries (a scripted HTTP server, a stub) also
subclasses ``RefusingContract`` and implements ``refuse``: the cases of mixed outcomes,
``Retry-After`` and ``Permanent`` then run too. Outcomes are checked as the engine reads them:
one per entry, in order; per-key order of what the destination received; a confirmed entry may
follow an unconfirmed one of its key (the engine holds it back and sends it again after).

Pytest with pytest-asyncio (``asyncio_mode = "auto"``) runs the async cases; for pytest's
detailed assertion messages, call ``pytest.register_assert_rewrite("relayd.sinks.testing")`` in
your ``conftest.py`` before importing it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Final, Literal

from relayd.envelope import Envelope
from relayd.envelope.batch import Batch
from relayd.sinks.base import Delivered, Outcome, Permanent, Retry, Sink, not_ready_reason

__all__ = ["RefusingContract", "SinkContract", "contract_batch", "outbox_envelope"]

#: How a destination refuses the entries of one ordering key (``RefusingContract.refuse``).
Refusal = Literal["retry", "retry_after", "permanent"]
#: The ``Retry-After`` a refusing destination asks for, in seconds.
RETRY_AFTER_S: Final = 7.0
#: Longest a contract case waits for the sink to start, deliver or close, in seconds.
CASE_TIMEOUT_S: Final = 60.0


def outbox_envelope(prefix: str, seq: int, target: str | None) -> Envelope:
    """An outbox envelope (``relayd/1``) for ``seq`` to ``target``, its event id unique per seq."""
    id_ = f"{prefix}:outbox:{seq}"
    body: dict[str, object] = {
        "v": "relayd/1",
        "kind": "outbox",
        "id": id_,
        "prefix": prefix,
        "attempt": 1,
        "relayed_at": 1_700_000_000.0,
        "seq": seq,
        "target_id": target,
        "event": {"id": f"ev-{seq}", "kind": "Ping", "data": {"n": seq}},
    }
    return Envelope(id=id_, kind="outbox", prefix=prefix, attempt=1, body=body, ordering_key=target)


def contract_batch(prefix: str, *, first_seq: int = 1) -> list[Envelope]:
    """Twelve outbox envelopes: three targets interleaved, four of each, and two without a target."""
    targets = ["ka", "kb", "kc", "ka", None, "kb", "kc", "ka", "kb", None, "kc", "ka"]
    return [outbox_envelope(prefix, first_seq + i, target) for i, target in enumerate(targets)]


class SinkContract:
    """The cases every sink passes; see the module docstring for what a subclass implements."""

    #: A prefix for this suite's envelopes (a subclass may change it, e.g. for a shared broker).
    prefix = "contract"
    #: Whether an entry without an ordering key reaches the destination (a sink may confirm and
    #: drop what its destination has no place for, as the harel sink does an untargeted event).
    untargeted_received = True

    async def open_sink(self) -> Sink:
        """A started sink delivering to a working destination (``close`` is the case's)."""
        raise NotImplementedError

    async def received(self, count: int) -> list[str]:
        """The envelope ids the destination holds, in arrival order; wait for ``count`` if the
        destination is asynchronous (a broker's consumer)."""
        raise NotImplementedError

    async def _deliver(self, sink: Sink, envelopes: Sequence[Envelope]) -> Sequence[Outcome]:
        async with asyncio.timeout(CASE_TIMEOUT_S):
            return await sink.deliver(Batch.of(list(envelopes), "outbox"))

    async def _close(self, sink: Sink) -> None:
        async with asyncio.timeout(CASE_TIMEOUT_S):
            await sink.close()

    async def test_one_outcome_per_entry_in_order_all_delivered(self) -> None:
        sink = await self.open_sink()
        try:
            batch = contract_batch(self.prefix)
            outcomes = await self._deliver(sink, batch)
        finally:
            await self._close(sink)

        assert len(outcomes) == len(batch), outcomes
        assert all(isinstance(outcome, Delivered) for outcome in outcomes), outcomes

    async def test_every_confirmed_entry_is_received_in_order_per_key(self) -> None:
        sink = await self.open_sink()
        try:
            batch = contract_batch(self.prefix)
            await self._deliver(sink, batch)
            received = await self.received(len(batch))
        finally:
            await self._close(sink)

        expected = [e.id for e in batch if self.untargeted_received or e.ordering_key is not None]
        assert sorted(set(received)) == sorted(expected), received
        for key in {e.ordering_key for e in batch if e.ordering_key is not None}:
            sent = [e.id for e in batch if e.ordering_key == key]
            got = [id_ for id_ in received if id_ in sent]
            assert _dedupe(got) == sent, (key, got, sent)

    async def test_a_redelivery_is_delivered_again(self) -> None:
        """At least once: the same entries again are accepted (the consumer dedupes by id)."""
        sink = await self.open_sink()
        try:
            batch = contract_batch(self.prefix)
            await self._deliver(sink, batch)
            again = await self._deliver(sink, batch[:3])
        finally:
            await self._close(sink)

        assert len(again) == 3, again
        assert all(isinstance(outcome, Delivered) for outcome in again), again

    async def test_an_empty_batch_gives_no_outcome(self) -> None:
        sink = await self.open_sink()
        try:
            outcomes = await self._deliver(sink, [])
        finally:
            await self._close(sink)

        assert list(outcomes) == []

    async def test_ready_after_a_delivery_with_no_reason_given(self) -> None:
        sink = await self.open_sink()
        try:
            await self._deliver(sink, contract_batch(self.prefix)[:2])
            ready = sink.ready()
            method = not_ready_reason(sink)
            reason = method() if method is not None else None  # asked while open, as /readyz does
        finally:
            await self._close(sink)

        assert ready is True, reason or "not ready"
        assert reason is None

    async def test_close_returns(self) -> None:
        """``close`` flushes and returns, within the case's bound, after deliveries."""
        sink = await self.open_sink()
        await self._deliver(sink, contract_batch(self.prefix)[:2])

        await self._close(sink)


class RefusingContract(SinkContract):
    """The cases that need a destination refusing some entries (``refuse``)."""

    async def refuse(self, key: str, how: Refusal) -> None:
        """Make the destination refuse every entry of ordering key ``key`` from now on:
        transiently (``retry``), transiently asking for ``RETRY_AFTER_S`` (``retry_after``), or
        for good (``permanent``)."""
        raise NotImplementedError

    async def test_mixed_outcomes_one_per_entry_and_per_key_order_kept(self) -> None:
        """``ka`` transient, ``kb`` for good, ``kc`` fine: each entry's own outcome; nothing of a
        key after a failure of that key is received ahead of it."""
        await self.refuse("ka", "retry")
        await self.refuse("kb", "permanent")
        sink = await self.open_sink()
        try:
            batch = contract_batch(self.prefix)
            outcomes = await self._deliver(sink, batch)
            received = await self.received(sum(isinstance(o, Delivered) for o in outcomes))
        finally:
            await self._close(sink)

        assert len(outcomes) == len(batch)
        by_key = {e.id: (e.ordering_key, o) for e, o in zip(batch, outcomes, strict=True)}
        assert all(isinstance(o, Delivered) for k, o in by_key.values() if k in ("kc", None))
        ka = [o for k, o in by_key.values() if k == "ka"]
        assert isinstance(ka[0], Retry)
        assert not any(isinstance(o, Permanent) for o in ka)
        kb = [o for k, o in by_key.values() if k == "kb"]
        assert isinstance(kb[0], Permanent)
        assert kb[0].reason
        assert _first_of(batch, "ka") not in received
        assert _first_of(batch, "kb") not in received

    async def test_retry_after_is_reported(self) -> None:
        await self.refuse("ka", "retry_after")
        sink = await self.open_sink()
        try:
            batch = [e for e in contract_batch(self.prefix) if e.ordering_key == "ka"][:1]
            [outcome] = await self._deliver(sink, batch)
        finally:
            await self._close(sink)

        assert isinstance(outcome, Retry)
        assert outcome.after_s is not None
        assert outcome.after_s >= RETRY_AFTER_S - 1


def _dedupe(ids: list[str]) -> list[str]:
    """Each id's last copy, in order: what a consumer that dedupes keeps."""
    last = {id_: i for i, id_ in enumerate(ids)}
    return [id_ for i, id_ in enumerate(ids) if last[id_] == i]


def _first_of(batch: Sequence[Envelope], key: str) -> str:
    return next(e.id for e in batch if e.ordering_key == key)
