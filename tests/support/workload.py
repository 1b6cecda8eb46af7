"""A steady engine-like writer for the fault tests: commits emits, spawns and timers through
``store.RedisStore`` and keeps the ledger of what it committed.

Every commit advances one of a small pool of executions (saved up front) and carries a mix
of outbox events (targeted at another execution of the pool, or untargeted), spawn intents
and timers. Timers use a fresh path per commit, so no commit re-arms (and thereby replaces)
an earlier timer: every committed timer must be delivered. ``abort_every=N`` makes every
N-th transaction take its seqs and then lose its version check (a stale execution version),
the way an engine's aborted commit burns seqs: they are recorded as ``burned``, never
committed.

Spawn seqs are not returned by ``commit`` (harel's signature returns the outbox seqs only),
so the writer reads the spawn counter after each commit that spawns. That is exact because
the writer is the only one committing under its prefix; give each writer its own prefix.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from store import Event, Execution, Keyspace, RedisStore, Status, StoreConflict, TimerOp, parse_timer_member


def timer_event_id(execution_id: str, path: str, fire_at: float) -> str:
    """The delivery id of a timer (docs/internals.md#key-space): fire_at rendered by ``str(float)``."""
    return f"timeout:{execution_id}:{path}:{float(fire_at)}"


def stored_ids(client: Any, prefix: str) -> set[str]:
    """Every delivery id present under ``prefix`` right now (outbox, spawns, timers)."""
    keys = Keyspace(prefix)
    ids = {f"{prefix}:outbox:{field.decode()}" for field in client.hkeys(keys.outbox)}
    ids |= {f"{prefix}:spawn:{field.decode()}" for field in client.hkeys(keys.spawns)}
    for member, score in client.zrange(keys.timers, 0, -1, withscores=True):
        execution_id, path = parse_timer_member(member)
        ids.add(timer_event_id(execution_id, path, score))
    return ids


@dataclass
class WorkloadLedger:
    """What a workload committed, in commit order, and what it burned."""

    prefix: str
    committed: list[str] = field(default_factory=list)
    burned: list[str] = field(default_factory=list)
    commits: int = 0
    aborted: int = 0

    def of_kind(self, kind: str) -> list[str]:
        marker = "timeout:" if kind == "timer" else f"{self.prefix}:{kind}:"
        return [entry for entry in self.committed if entry.startswith(marker)]


class Workload:
    """Commits a mixed workload under one prefix, inline (``run``) or from a thread (``start``)."""

    def __init__(
        self,
        store: RedisStore,
        *,
        rate_per_s: float = 200.0,
        abort_every: int = 0,
        executions: int = 8,
        timer_delay_s: tuple[float, float] = (0.0, 0.5),
        seed: int = 7,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.rate_per_s, self.abort_every = rate_per_s, abort_every
        self.timer_delay_s = timer_delay_s
        self._rng = random.Random(seed)
        self._clock, self._monotonic, self._sleep = clock, monotonic, sleep
        self.ledger = WorkloadLedger(prefix=store.keyspace.prefix)
        self._pool = [
            Execution(id=f"wl-{seed}-{n}", definition_id="workload", status=Status.RUNNING)
            for n in range(executions)
        ]
        self._outbox_seq = self._spawn_seq = 0
        self._started = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def _begin(self) -> None:
        if self._started:
            return
        for exe in self._pool:
            self.store.save(exe)
        self._outbox_seq, self._spawn_seq = self._counters()
        self._started = True

    def _counters(self) -> tuple[int, int]:
        keys = self.store.keyspace
        outbox, spawns = self.store.client.mget([keys.outbox_seq, keys.spawns_seq])
        return int(outbox or 0), int(spawns or 0)

    # -- one transaction -----------------------------------------------------------------

    def commit_one(self) -> None:
        """Commit (or, on an abort turn, burn) one transaction and record it."""
        self._begin()
        n = self.ledger.commits + self.ledger.aborted + 1
        exe = self._rng.choice(self._pool)
        emits = [
            (self._rng.choice([None, *(e.id for e in self._pool)]), Event(kind="Ping", data={"n": n, "i": i}))
            for i in range(self._rng.randint(0, 2))
        ]
        spawns = [(f"{exe.id}.child-{n}", "root.fork", {"n": n})] if self._rng.random() < 0.3 else []
        timers = []
        if self._rng.random() < 0.3 or not (emits or spawns):
            fire_at = round(self._clock() + self._rng.uniform(*self.timer_delay_s), 3)
            timers.append(TimerOp(action="schedule", path=f"root.wait-{n}", fire_at=fire_at))
        if not emits and not spawns:
            emits.append((None, Event(kind="Ping", data={"n": n})))  # every commit takes a seq
        if self.abort_every and n % self.abort_every == 0:
            self._abort(exe, emits, spawns)
            return
        outbox_seqs = self.store.commit(exe, emits, f"evt-{n}", timers=timers, spawns=spawns)
        prefix = self.ledger.prefix
        self.ledger.committed += [f"{prefix}:outbox:{seq}" for seq in outbox_seqs]
        self._outbox_seq = max([self._outbox_seq, *outbox_seqs])
        if spawns:
            self._spawn_seq = self._counters()[1]
            first = self._spawn_seq - len(spawns) + 1
            self.ledger.committed += [f"{prefix}:spawn:{seq}" for seq in range(first, self._spawn_seq + 1)]
        self.ledger.committed += [timer_event_id(exe.id, t.path, t.fire_at) for t in timers]
        self.ledger.commits += 1

    def _abort(
        self,
        exe: Execution,
        emits: list[tuple[str | None, Event]],
        spawns: list[tuple[str, str, dict[str, Any]]],
    ) -> None:
        # a copy one version ahead loses the version check after the seqs were allocated
        stale = exe.model_copy(update={"version": exe.version + 1000})
        try:
            self.store.commit(stale, emits, None, spawns=spawns)
        except StoreConflict:
            pass
        else:
            raise AssertionError("a commit with a stale version was accepted")
        outbox, spawn = self._counters()
        prefix = self.ledger.prefix
        self.ledger.burned += [f"{prefix}:outbox:{s}" for s in range(self._outbox_seq + 1, outbox + 1)]
        self.ledger.burned += [f"{prefix}:spawn:{s}" for s in range(self._spawn_seq + 1, spawn + 1)]
        self._outbox_seq, self._spawn_seq = outbox, spawn
        self.ledger.aborted += 1

    # -- pacing --------------------------------------------------------------------------

    def run(self, transactions: int) -> WorkloadLedger:
        """Commit ``transactions`` transactions at the steady rate, in this thread."""
        interval_s = 1.0 / self.rate_per_s
        next_at = self._monotonic()
        for _ in range(transactions):
            if self._stop.is_set():
                break
            self.commit_one()
            next_at += interval_s
            # steady rate: a slow commit is caught up, never followed by a burst
            next_at = max(next_at, self._monotonic() - interval_s)
            delay_s = next_at - self._monotonic()
            if delay_s > 0:
                self._sleep(delay_s)
        return self.ledger

    def start(self, transactions: int = 10**9) -> None:
        """Run in a daemon thread until ``stop()`` or ``transactions`` are done."""

        def target() -> None:
            try:
                self.run(transactions)
            except BaseException as exc:  # handed to the test thread by stop()
                self._error = exc

        self._thread = threading.Thread(target=target, name="workload", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> WorkloadLedger:
        """Stop the thread, re-raise what it failed with, and return the ledger."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise RuntimeError("workload thread did not stop")
        if self._error is not None:
            raise self._error
        return self.ledger

    def wait(self, timeout_s: float) -> WorkloadLedger:
        """Wait for a ``start(transactions)`` run to finish on its own; then like ``stop``."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        return self.stop()
