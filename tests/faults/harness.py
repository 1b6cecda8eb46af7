"""What the fault cases share: relayd and redis-server as real processes, a fast backlog seeder,
a /metrics scraper and a wait helper.

``RelayProcess`` runs ``relayd sweep`` (long-running, /metrics on a free loopback port) with its
output in a log file, and can be SIGKILLed, stopped and started again with the same arguments.
The redis-server is ``support.redis_server.RedisServer`` (it can be stopped or killed and come
back where it was, with AOF when asked). ``seed_backlog`` writes a mixed
backlog straight in the engine's wire shape (docs/internals.md#key-space, ``support.seeding``) with burned
seqs, in pipelined chunks, where committing it transaction by transaction would take most of a
case's time budget.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from support.ports import pick_ports
from support.processes import end_process
from support.seeding import outbox_value, spawn_value
from support.workload import timer_event_id

from store import Keyspace, timer_member

#: pytest's ``record_property`` fixture.
RecordProperty = Callable[[str, object], None]

#: Entries written per pipeline round-trip by ``seed_backlog``.
SEED_CHUNK = 2000


def size_of(path: Path) -> int:
    """Bytes in ``path`` so far (0 before the sink created it)."""
    return path.stat().st_size if path.exists() else 0


def grew(path: Path, beyond: int) -> Callable[[], bool]:
    """A ``wait_until`` check: ``path`` holds more than ``beyond`` bytes."""
    return lambda: size_of(path) > beyond


# -- the backlog -----------------------------------------------------------------------------


@dataclass
class Backlog:
    """Delivery ids of what ``seed_backlog`` wrote, in write order, and the seqs it burned.

    The id shapes are in docs/internals.md#key-space.
    """

    prefix: str
    committed: list[str] = field(default_factory=list)
    burned: int = 0


def seed_backlog(
    client: Any,
    prefix: str,
    *,
    outbox: int,
    spawns: int,
    timers: int,
    targets: int = 20,
    burn_every: int = 50,
    fire_at: float,
    start_seq: int = 0,
    seed: int = 1,
) -> Backlog:
    """Write ``outbox`` events, ``spawns`` intents and ``timers`` due timers under ``prefix``.

    Every ``burn_every``-th seq is skipped (an aborted commit's burned seq) and the counters end
    past it, as an engine leaves them. Outbox events go to ``targets`` executions or untargeted.
    Timers fire at ``fire_at`` plus a few milliseconds each, so they are ordered and distinct.
    """
    rng = random.Random(seed)
    keys = Keyspace(prefix)
    backlog = Backlog(prefix)
    pipe = client.pipeline(transaction=False)
    pending = 0

    def flush(force: bool = False) -> None:
        nonlocal pipe, pending
        if pending >= SEED_CHUNK or (force and pending):
            pipe.execute()
            pipe = client.pipeline(transaction=False)
            pending = 0

    def next_seq(seq: int) -> int:
        """The seq after ``seq``, stepping over (and counting) every ``burn_every``-th one."""
        seq += 1
        if burn_every and seq % burn_every == 0:
            backlog.burned += 1
            seq += 1
        return seq

    seq = start_seq
    for n in range(outbox):
        seq = next_seq(seq)
        target = rng.choice([None, *(f"exe-{t}" for t in range(targets))])
        pipe.hset(
            keys.outbox, str(seq), outbox_value(target, f"ev-{prefix}-{seq}", data={"n": n, "seq": seq})
        )
        backlog.committed.append(f"{prefix}:outbox:{seq}")
        pending += 1
        flush()
    pipe.set(keys.outbox_seq, seq + 1)  # the last seq burned, too
    spawn_seq = start_seq
    for n in range(spawns):
        spawn_seq = next_seq(spawn_seq)
        parent = f"exe-{n % max(targets, 1)}"
        value = spawn_value(parent, f"{parent}.c{spawn_seq}", "root")
        pipe.hset(keys.spawns, str(spawn_seq), value)
        backlog.committed.append(f"{prefix}:spawn:{spawn_seq}")
        pending += 1
        flush()
    pipe.set(keys.spawns_seq, spawn_seq)
    for n in range(timers):
        execution_id, path = f"exe-{n % max(targets, 1)}", f"root.wait-{n}"
        at = round(fire_at + n * 0.001, 3)
        pipe.zadd(keys.timers, {timer_member(execution_id, path): at})
        backlog.committed.append(timer_event_id(execution_id, path, at))
        pending += 1
        flush()
    flush(force=True)
    pipe.execute()
    return backlog


# -- processes -------------------------------------------------------------------------------


class RelayProcess:
    """``relayd sweep`` as a child process, restartable with the same arguments."""

    def __init__(self, args: Sequence[str], log_path: Path) -> None:
        self.metrics_port = pick_ports(1, random.Random())[0]
        self.args = [*args, "--metrics-addr", f"127.0.0.1:{self.metrics_port}"]
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.started_at = self.ended_at = 0.0

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(["relayd", "sweep", *self.args], stdout=log, stderr=log)
        self.starts += 1
        self.started_at = time.monotonic()

    def kill(self) -> None:
        """SIGKILL and reap: no shutdown grace, no lease release, no checkpoint."""
        if self.proc is not None and self.proc.poll() is None:
            end_process(self.proc, signal.SIGKILL)
            self.ended_at = time.monotonic()

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM (the clean shutdown path); returns the exit code."""
        if self.proc is not None and self.proc.poll() is None:
            end_process(self.proc, wait_s=timeout_s)
            self.ended_at = time.monotonic()
        return None if self.proc is None else self.proc.returncode

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample of /metrics, keyed by (name, sorted labels); empty when not answering."""
        return scrape(self.metrics_port)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Parse ``http://127.0.0.1:port/metrics``; empty when the server does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return {}
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def sample(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float | None:
    """One sample's value by name and exact labels."""
    return samples.get((name, tuple(sorted(labels.items()))))
