"""What the engine does when its lease may be gone: send nothing, ack nothing, say so, stand by.

Two checks, one guard, one failure (``FenceGuard``). Locally, before a batch goes to a sink and
before its settlement is written, the lease term's monotonic deadline must lie ahead
(``Lease.holds``); in Redis, every ack, dead-letter move and attempts write checks the lease
token in the same script call (``store.Fence``), so a replica resumed from a pause after a
standby took over is refused even when its local check passed just before the pause; and a
backlog read checks it in its own round-trip, so a replica whose lease key was lost (a failover)
and taken by another sends nothing more though its deadline lies ahead. Either way
the pass stops with ``Fenced``; the prefix loop reports it (``report_fenced``: one log line and
``relayd_fenced_total``), drops its sweeper and goes back to standby. The entries stay in Redis
for the current holder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final, Literal

import structlog

from relayd.envelope import Kind
from relayd.observability.metrics import RelayMetrics
from store import Fence, StoreFenced

log = structlog.get_logger(__name__)

#: Why a send or a write was not made: ``send_expired`` / ``ack_expired``, the local deadline
#: had passed before the sink call or the settlement; ``ack_refused``, Redis refused the script
#: because the lease holds another token (or none); ``read_refused``, a read found the lease
#: holding another token (or none) in its own round-trip and handed over nothing to send.
#: (``relayd.observability.metrics.FENCE_REASONS`` lists them for the metric's label.)
FenceReason = Literal["send_expired", "ack_expired", "ack_refused", "read_refused"]


class Fenced(Exception):
    """A send or a settlement of ``count`` entries of ``kind`` was not made (see ``reason``)."""

    def __init__(self, kind: Kind, count: int, reason: FenceReason) -> None:
        super().__init__(f"{reason}: {count} {kind} entries")
        self.kind, self.count, self.reason = kind, count, reason


#: Each reason's warning line and its ``outcome``: what was kept back, and who said no.
REPORTED_AS: Final[dict[FenceReason, tuple[str, str]]] = {
    "send_expired": ("send_fenced", "lease_expired"),
    "ack_expired": ("ack_fenced", "lease_expired"),
    "ack_refused": ("ack_fenced", "refused"),
    "read_refused": ("send_fenced", "refused"),
}


def report_fenced(metrics: RelayMetrics, prefix: str, fenced: Fenced) -> None:
    """One warning line (``send_fenced`` or ``ack_fenced``) and the counter, per refusal."""
    event, outcome = REPORTED_AS[fenced.reason]
    metrics.fenced.labels(prefix, fenced.kind, fenced.reason).inc(fenced.count)
    log.warning(event, prefix=prefix, kind=fenced.kind, count=fenced.count, outcome=outcome)


def _always() -> bool:
    return True


@dataclass(frozen=True, slots=True)
class FenceGuard:
    """The one guard of every send and every write a sweeper makes under its lease term.

    ``holds``: whether the term's local deadline lies ahead; ``fence``: the token Redis checks in
    the same script call as each write (None without a lease, as in tests).
    """

    holds: Callable[[], bool] = _always
    fence: Fence | None = None

    def before_send(self, kind: Kind, count: int) -> None:
        """Raise ``Fenced`` (``send_expired``) unless ``count`` entries may go to the sink now."""
        if not self.holds():
            raise Fenced(kind, count, "send_expired")

    @contextmanager
    def writing(self, kind: Kind, count: int) -> Iterator[None]:
        """Around a fenced write of ``count`` entries: ``Fenced`` before it when the deadline has
        passed (``ack_expired``), and for Redis's refusal of it (``ack_refused``)."""
        if count and not self.holds():
            raise Fenced(kind, count, "ack_expired")
        try:
            yield
        except StoreFenced as exc:
            raise Fenced(kind, count, "ack_refused") from exc
