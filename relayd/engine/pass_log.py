"""The info-level log of a prefix's passes: one ``passes`` line per interval, not one per pass.

A relay under steady load runs hundreds of passes a second; a line for each would cost more
than many of the passes themselves and drown everything else. Each pass is logged at debug
(``pass_finished``, by the sweeper); at info, ``PassLog`` sums the passes and writes one line
when ``INTERVAL_S`` has gone by since its last one and something was read or attempted meanwhile
(an idle relay writes none), and one more for the remainder when the loop ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import structlog

from relayd.engine.passes import PassResult

log = structlog.get_logger(__name__)

#: Seconds between two ``passes`` lines of one prefix at most once (monotonic clock).
INTERVAL_S: Final = 10.0


class PassLog:
    """Sums one prefix's passes and logs them at info once per ``INTERVAL_S``."""

    def __init__(
        self, prefix: str, monotonic: Callable[[], float], *, interval_s: float = INTERVAL_S
    ) -> None:
        self.prefix = prefix
        self.monotonic = monotonic
        self.interval_s = interval_s
        self._since_s = monotonic()
        self._reset()

    def _reset(self) -> None:
        self.passes = self.working = self.read = self.held = 0
        self.delivered = self.retried = self.dead_lettered = 0

    def add(self, result: PassResult) -> None:
        """Count one pass; log the interval's line when the interval is over."""
        self.passes += 1
        if result.read or result.attempted:
            self.working += 1
        self.read += result.read
        self.held = result.held
        self.delivered += sum(result.delivered.values())
        self.retried += sum(result.retried.values())
        self.dead_lettered += sum(result.dead_lettered.values())
        if self.monotonic() - self._since_s >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        """Log what was counted since the last line, if anything was read or attempted."""
        now_s = self.monotonic()
        if self.working or self.delivered or self.retried or self.dead_lettered:
            log.info(
                "passes",
                prefix=self.prefix,
                passes=self.passes,
                working_passes=self.working,
                read=self.read,
                delivered=self.delivered,
                retried=self.retried,
                dead_lettered=self.dead_lettered,
                held=self.held,
                seconds=round(now_s - self._since_s, 3),
            )
        self._since_s = now_s
        self._reset()
