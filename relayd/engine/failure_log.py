"""Why deliveries fail, at the default log level, without a failing sink flooding the log.

The first failure of each target in an interval is one warning line (``delivery_failed``) with
``target_id`` (the entry's ordering key: the target of an outbox event, the child of a spawn,
the execution of a timer), the entry ``id`` as ``dlq list`` shows it, the sink's ``error``
(``http 503``, ``webhook connection error (Connection refused)``), the ``attempt`` and
``retry_in_s``. Further failures of that target in the interval, and every failure once
``MAX_LINES_PER_INTERVAL`` targets have had their line, are counted instead, and one
``delivery_failures`` line per interval sums them up by error.

``FailureDigest`` is the pure bookkeeping (times passed in); ``FailureLog`` writes the lines.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

import structlog

#: Seconds per interval: a target gets at most one line each, the rest one summary line.
INTERVAL_S: Final = 60.0
#: Targets that get their own line per interval; the failures of any others are summed only.
MAX_LINES_PER_INTERVAL: Final = 20
#: Distinct targets the summary counts at most (its figure reads "at least" beyond).
MAX_COUNTED_TARGETS: Final = 10_000


@dataclass(frozen=True, slots=True)
class Summary:
    """Failures that had no line of their own in one interval."""

    interval_s: float
    failures: int
    targets: int
    errors: dict[str, int]


@dataclass(slots=True)
class FailureDigest:
    """Which failures get a line, and what the interval's summary says. Pure: no I/O, no clock."""

    interval_s: float = INTERVAL_S
    max_lines: int = MAX_LINES_PER_INTERVAL
    started_s: float | None = None
    _lined: set[tuple[str, str]] = field(default_factory=set)
    _quiet_targets: set[tuple[str, str]] = field(default_factory=set)
    _quiet_errors: Counter[str] = field(default_factory=Counter)

    def note(self, kind: str, target: str, error: str, now_s: float) -> bool:
        """Count one failure; True when it gets its own line."""
        if self.started_s is None:
            self.started_s = now_s
        key = (kind, target)
        if key not in self._lined and len(self._lined) < self.max_lines:
            self._lined.add(key)
            return True
        if len(self._quiet_targets) < MAX_COUNTED_TARGETS:
            self._quiet_targets.add(key)
        self._quiet_errors[error] += 1
        return False

    def roll(self, now_s: float) -> Summary | None:
        """Close the interval once it is over: its summary (None when every failure had a line)."""
        if self.started_s is None or now_s - self.started_s < self.interval_s:
            return None
        summary = None
        if self._quiet_errors:
            summary = Summary(
                interval_s=round(now_s - self.started_s, 1),
                failures=sum(self._quiet_errors.values()),
                targets=len(self._quiet_targets),
                errors=dict(self._quiet_errors.most_common(5)),
            )
        self.started_s = None
        self._lined.clear()
        self._quiet_targets.clear()
        self._quiet_errors.clear()
        return summary


class FailureLog:
    """Writes ``delivery_failed`` and ``delivery_failures`` lines for one prefix."""

    def __init__(self, prefix: str, *, digest: FailureDigest | None = None, logger: Any = None) -> None:
        self.prefix = prefix
        self.digest = digest or FailureDigest()
        self.log = logger or structlog.get_logger(__name__)

    def failed(
        self,
        *,
        kind: str,
        target: str | None,
        id: str,
        error: str,
        attempt: int,
        retry_in_s: float,
        now_s: float,
    ) -> None:
        """One delivery attempt failed and will be retried in ``retry_in_s``."""
        self.flush(now_s)
        shown_target = target if target is not None else "-"
        if self.digest.note(kind, shown_target, error, now_s):
            self.log.warning(
                "delivery_failed",
                prefix=self.prefix,
                kind=kind,
                target_id=shown_target,
                id=id,
                error=error,
                attempt=attempt,
                retry_in_s=round(max(0.0, retry_in_s), 1),
            )

    def flush(self, now_s: float) -> None:
        """Write the summary of an interval that is over (called on every settle, failing or not)."""
        summary = self.digest.roll(now_s)
        if summary is not None:
            self.log.warning(
                "delivery_failures",
                prefix=self.prefix,
                interval_s=summary.interval_s,
                failures=summary.failures,
                targets=summary.targets,
                errors=summary.errors,
            )
