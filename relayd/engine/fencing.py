"""What the engine does when its lease may be gone: send nothing, ack nothing, say so, stand by.

Two guards, one failure. Locally, before a batch goes to a sink and before its settlement is
written, the lease's monotonic deadline must lie ahead (``Lease.held``); in Redis, every ack,
dead-letter move and attempts write checks the lease token in the same script call
(``store.Fence``), so a replica resumed from a pause after a standby took over is refused even
when its local check passed just before the pause. Either way the pass stops with ``Fenced``;
the prefix loop reports it (``report_fenced``: one log line and ``relayd_fenced_total``), drops
its sweeper and goes back to standby. The entries stay in Redis for the current holder.
"""

from __future__ import annotations

from typing import Literal

import structlog

from relayd.envelope import Kind
from relayd.observability.metrics import RelayMetrics

log = structlog.get_logger(__name__)

#: Why a send or a write was not made: ``send_expired`` / ``ack_expired``, the local deadline
#: had passed before the sink call or the settlement; ``ack_refused``, Redis refused the script
#: because the lease holds another token (or none).
#: (``relayd.observability.metrics.FENCE_REASONS`` lists them for the metric's label.)
FenceReason = Literal["send_expired", "ack_expired", "ack_refused"]


class Fenced(Exception):
    """A send or a settlement of ``count`` entries of ``kind`` was not made (see ``reason``)."""

    def __init__(self, kind: Kind, count: int, reason: FenceReason) -> None:
        super().__init__(f"{reason}: {count} {kind} entries")
        self.kind, self.count, self.reason = kind, count, reason


def report_fenced(metrics: RelayMetrics, prefix: str, fenced: Fenced) -> None:
    """One warning line (``send_fenced`` or ``ack_fenced``) and the counter, per refusal."""
    event = "send_fenced" if fenced.reason == "send_expired" else "ack_fenced"
    outcome = "refused" if fenced.reason == "ack_refused" else "lease_expired"
    metrics.fenced.labels(prefix, fenced.kind, fenced.reason).inc(fenced.count)
    log.warning(event, prefix=prefix, kind=fenced.kind, count=fenced.count, outcome=outcome)
