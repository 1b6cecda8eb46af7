"""What the overview warns about for one prefix: nothing relays it, or its timers run late. Pure.

A relay that holds no lease and timers past due are invisible in counts alone (a backlog of
zero looks healthy while nothing delivers). Each warning is one sentence an operator can act on.
"""

from __future__ import annotations

from typing import Final

from relayd.status.report import StatusReport

#: A due timer this many seconds late counts as overdue (a relay polls every second or so).
OVERDUE_AFTER_S: Final = 60.0


def prefix_warnings(report: StatusReport) -> tuple[str, ...]:
    """The warnings for ``report``'s prefix, most urgent first."""
    warnings: list[str] = []
    if report.active is None:
        warnings.append("no relay holds the lease: nothing is delivering this prefix")
    lag_s = report.oldest_timer_lag_s
    if lag_s is not None and lag_s > OVERDUE_AFTER_S:
        warnings.append(f"timers overdue: {report.due_timers} due, the oldest {lag_s:.0f} s past its time")
    return tuple(warnings)
