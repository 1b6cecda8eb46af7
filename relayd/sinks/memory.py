"""A scriptable in-memory sink for tests and plugin authors (dramatiq's StubBroker idea).

It records every envelope it is handed and answers with outcomes from a script: a callable
``envelope -> Outcome`` (default: always ``Delivered``). Like every sink it keeps per-key
order within a batch: after an entry is not delivered, the later entries of its ordering key
come back as ``Retry`` without asking the script. Nothing leaves the process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from relayd.envelope import Envelope
from relayd.envelope.batch import Batch
from relayd.sinks.base import DELIVERED, Delivered, Outcome, ReadyByReason, Retry
from relayd.sinks.per_key import HELD_BACK

Script = Callable[[Envelope], Outcome]


def _deliver_all(envelope: Envelope) -> Outcome:
    del envelope
    return DELIVERED


class MemorySink(ReadyByReason):
    """Records batches; ``delivered`` holds the envelopes whose outcome was ``Delivered``.

    ``script`` decides each outcome; ``raises`` (when set) is raised by the next ``deliver``
    call instead; ``is_ready`` is what ``ready()`` reports.
    """

    def __init__(self, script: Script | None = None, *, name: str = "memory") -> None:
        self.name = name
        self.script: Script = script or _deliver_all
        self.batches: list[list[Envelope]] = []
        self.delivered: list[Envelope] = []
        self.raises: BaseException | None = None
        self.is_ready = True
        self.started = False
        self.closed = False

    async def start(self) -> None:
        self.started = True

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        self.batches.append(list(batch))
        if self.raises is not None:
            exc, self.raises = self.raises, None
            raise exc
        outcomes: list[Outcome] = []
        failed: set[str] = set()
        for envelope in batch:
            key = envelope.ordering_key
            if key is not None and key in failed:
                # Like every sink: never deliver past an undelivered entry of the same key.
                outcomes.append(Retry(error=HELD_BACK))
                continue
            outcome = self.script(envelope)
            if key is not None and not isinstance(outcome, Delivered):
                failed.add(key)
            outcomes.append(outcome)
        self.delivered += [e for e, o in zip(batch, outcomes, strict=True) if isinstance(o, Delivered)]
        return outcomes

    def not_ready_reason(self) -> str | None:
        return None if self.is_ready else "memory sink set not ready"

    async def close(self) -> None:
        self.closed = True

    @property
    def attempted(self) -> list[Envelope]:
        """Every envelope handed over, in order, redeliveries included."""
        return [e for batch in self.batches for e in batch]

    def delivered_ids(self) -> list[str]:
        return [e.id for e in self.delivered]
