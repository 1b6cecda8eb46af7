"""Check every watched secret and certificate file on a short interval and on demand.

``MaterialWatch.run`` re-reads each ``relayd.security.material.WatchedFile`` every ``interval_s`` (an
asyncio task beside the relay or the console); ``check_now`` does it at once, for a caller that
just saw an authentication or TLS failure. Each change is one log line (``secret_reloaded``,
``secret_refused``, ``secret_restored``, naming the option and the file, never the value) and
one increment of ``relayd_secret_reloads_total{option,outcome}``; listeners hear about new
material (the log redactor learns the new values). ``problems()`` feeds ``/readyz``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import structlog
from prometheus_client import CollectorRegistry, Counter

from relayd.observability import events
from relayd.security.material import WatchedFile

log = structlog.get_logger(__name__)

#: How often the files are read again, in seconds.
CHECK_INTERVAL_S: Final = 1.0


class MaterialWatch:
    """The watched files of one process, their checks, log lines, metric and problems."""

    def __init__(
        self,
        files: Iterable[WatchedFile[Any]],
        *,
        registry: CollectorRegistry | None = None,
        derived_problems: Sequence[Callable[[], str | None]] = (),
    ) -> None:
        self.files = list(files)
        self._derived = list(derived_problems)
        self._listeners: list[Callable[[], None]] = []
        self._reloads = (
            Counter(
                "relayd_secret_reloads",
                "Secret and certificate file checks that found a change, by option and outcome.",
                ["option", "outcome"],
                registry=registry,
            )
            if registry is not None
            else None
        )

    def add(self, watched: WatchedFile[Any]) -> None:
        """Watch one more file (the console's token beside the Redis files)."""
        self.files.append(watched)

    def on_reload(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after any file's new material was taken."""
        self._listeners.append(listener)

    def add_derived_problem(self, problem: Callable[[], str | None]) -> None:
        """Also report this (material built from the files, e.g. a TLS context that failed)."""
        self._derived.append(problem)

    def check_now(self) -> None:
        """Read every file again at once (after an authentication or TLS failure)."""
        reloaded = False
        for watched in self.files:
            outcome = watched.check()
            if outcome == "unchanged":
                continue
            reloaded |= outcome == "reloaded"
            self._report(watched, outcome)
        if reloaded:
            for listener in self._listeners:
                listener()

    def problems(self) -> list[str]:
        """Why some material is refused (each names the option and the file), for ``/readyz``."""
        found = [watched.problem for watched in self.files]
        found += [problem() for problem in self._derived]
        return [problem for problem in found if problem]

    async def run(self, stop: asyncio.Event, interval_s: float = CHECK_INTERVAL_S) -> None:
        """Check every ``interval_s`` until ``stop`` is set."""
        if not self.files:
            return
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_s)
            self.check_now()

    def _report(self, watched: WatchedFile[Any], outcome: str) -> None:
        if self._reloads is not None:
            self._reloads.labels(watched.option, outcome).inc()
        if outcome == "refused":
            log.warning("secret_refused", option=watched.option, problem=watched.problem)
            events.emit("secret.refused", watched.option, option=watched.option, problem=watched.problem)
        else:
            log.info(f"secret_{outcome}", option=watched.option, file=str(watched.path))
