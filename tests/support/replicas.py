"""Real ``relayd sweep`` replicas for the multi-replica tests: start, signal, scrape, sample.

``start_replica`` runs one ``relayd sweep`` process (jsonl sink to its own file, its own
``/metrics`` port). ``Sampler`` polls, every ``interval_s`` from a background thread, the
prefix's lease key (``P:relay:lease``, whose token names the holder's pid) and every replica's
``relayd_active{prefix=P}`` gauge (scraped in parallel; a stopped or dead process is
``None``: unreachable, not "inactive").

The analysis is pure and honest about the sampling race: the key and the gauges are read a few
milliseconds apart, and a replica only notices a change of the lease when its keeper or its loop
runs (after at most one renewal period, ``ttl / 3``, of running time). So a gauge may disagree
with the key for a short while; ``disagreements`` returns each such run (a gauge at 1 while the
key names another holder, ``stale``; or at 0 while the key names it, ``missing``), and a test
asserts that every run ends within one renewal period. A replica that was frozen (SIGSTOP) is
unreachable while frozen, so its runs start when it is observable again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from support.processes import end_process

#: How long one scrape of ``/metrics`` may take before the replica counts as unreachable.
SCRAPE_TIMEOUT_S = 0.25


@dataclass
class Replica:
    """One ``relayd sweep`` process with its own jsonl sink file and metrics port."""

    name: str
    prefix: str
    jsonl: Path
    metrics_port: int
    log: Path
    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def active(self) -> int | None:
        """``relayd_active{prefix=P}`` as scraped now; None when the process does not answer."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
                text = response.read().decode()
        except (OSError, urllib.error.URLError):
            return None
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "relayd_active" and sample.labels.get("prefix") == self.prefix:
                    return int(sample.value)
        return None

    def lines(self) -> int:
        """Complete lines the sink has written so far."""
        try:
            return self.jsonl.read_bytes().count(b"\n")
        except FileNotFoundError:
            return 0

    def signal(self, signum: signal.Signals) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signum)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGCONT (in case it is frozen), SIGTERM, wait; SIGKILL if it will not exit."""
        if self.proc.poll() is not None:
            return
        self.signal(signal.SIGCONT)
        end_process(self.proc, wait_s=timeout_s)


def start_replica(
    name: str,
    *,
    redis_url: str,
    prefix: str,
    workdir: Path,
    metrics_port: int,
    lease_ttl_s: float,
    poll_interval_s: float,
    batch: int,
) -> Replica:
    """Start ``relayd sweep`` (console logs to ``workdir/<name>.log``); returns at once."""
    jsonl = workdir / f"{name}.jsonl"
    log = workdir / f"{name}.log"
    argv = [
        sys.executable, "-m", "relayd", "sweep",
        "--redis-url", redis_url,
        "--prefix", prefix,
        "--sink", f"jsonl:{jsonl}",
        "--metrics-addr", f"127.0.0.1:{metrics_port}",
        "--lease-ttl", str(lease_ttl_s),
        "--poll-interval", str(poll_interval_s),
        "--batch", str(batch),
        "--log-format", "json",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    return Replica(name, prefix, jsonl, metrics_port, log, proc)


def wait_serving(replicas: Iterable[Replica], timeout_s: float = 20.0) -> None:
    """Wait until every replica answers ``/metrics`` (its prefix's gauge exists)."""
    pending = list(replicas)
    deadline = time.monotonic() + timeout_s
    while pending:
        pending = [r for r in pending if r.active() is None]
        for replica in pending:
            if replica.proc.poll() is not None:
                raise RuntimeError(f"{replica.name} exited: {replica.log.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"not serving /metrics: {[r.name for r in pending]}")
        time.sleep(0.05)


def holder_pid(token: bytes | str | None) -> int | None:
    """The pid in a lease token ``hostname/pid/random``; None when no one holds the lease."""
    if token is None:
        return None
    text = token.decode() if isinstance(token, bytes) else token
    return int(text.rsplit("/", 2)[-2])


@dataclass(frozen=True, slots=True)
class Sample:
    """The lease key and every replica's gauge, read at about the same moment."""

    at_s: float  # monotonic, when the key was read (the scrapes follow within milliseconds)
    holder: int | None  # pid named by the lease key
    active: Mapping[str, int | None]  # replica name -> relayd_active, None when unreachable


@dataclass
class Sampler:
    """Samples the lease key and the gauges every ``interval_s`` from a daemon thread."""

    client: Any  # a sync redis client
    lease_key: str
    replicas: Sequence[Replica]
    interval_s: float = 0.05
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        with ThreadPoolExecutor(max_workers=len(self.replicas)) as pool:
            while not self._stop.is_set():
                at_s = time.monotonic()
                holder = holder_pid(self.client.get(self.lease_key))
                gauges = list(pool.map(lambda r: r.active(), self.replicas))
                self.samples.append(
                    Sample(at_s, holder, {r.name: g for r, g in zip(self.replicas, gauges, strict=True)})
                )
                self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - at_s)))

    def wait_for(self, predicate: Any, timeout_s: float) -> Sample:
        """Wait for a new sample satisfying ``predicate(sample)``; return it."""
        seen = len(self.samples)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for sample in self.samples[seen:]:
                if predicate(sample):
                    return sample
            seen = len(self.samples)
            time.sleep(self.interval_s / 2)
        raise TimeoutError("no sample satisfied the condition")


def wait_new_holder(
    client: Any, lease_key: str, *, not_pids: Iterable[int], timeout_s: float, poll_s: float = 0.01
) -> tuple[float, int]:
    """Poll the lease key (every ``poll_s``, finer than the sampler) until a pid outside
    ``not_pids`` holds it; return ``(monotonic time seen, pid)``."""
    excluded = set(not_pids)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pid = holder_pid(client.get(lease_key))
        if pid is not None and pid not in excluded:
            return time.monotonic(), pid
        time.sleep(poll_s)
    raise TimeoutError(f"no new holder of {lease_key} within {timeout_s} s")


# --- pure analysis ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Disagreement:
    """A run of consecutive samples where a replica's gauge contradicted the lease key."""

    replica: str
    kind: str  # "stale": gauge 1, key names another; "missing": gauge 0, key names this replica
    first_at_s: float
    last_at_s: float
    samples: int

    @property
    def duration_s(self) -> float:
        return self.last_at_s - self.first_at_s


def disagreements(samples: Sequence[Sample], pids: Mapping[str, int]) -> list[Disagreement]:
    """Every run of samples in which a reachable replica's gauge contradicts the lease key.

    An unreachable sample (frozen or dead process) ends a run: it says nothing either way.
    """
    runs: list[Disagreement] = []
    for name, pid in pids.items():
        current: tuple[str, float, float, int] | None = None
        for sample in samples:
            gauge = sample.active.get(name)
            kind = None
            if gauge == 1 and sample.holder != pid:
                kind = "stale"
            elif gauge == 0 and sample.holder == pid:
                kind = "missing"
            if current is not None and kind == current[0]:
                current = (current[0], current[1], sample.at_s, current[3] + 1)
                continue
            if current is not None:
                runs.append(Disagreement(name, current[0], current[1], current[2], current[3]))
            current = None if kind is None else (kind, sample.at_s, sample.at_s, 1)
        if current is not None:
            runs.append(Disagreement(name, current[0], current[1], current[2], current[3]))
    return runs


def most_active(samples: Sequence[Sample]) -> int:
    """The most gauges at 1 in any one sample."""
    return max((sum(1 for g in s.active.values() if g == 1) for s in samples), default=0)


def overlapping_samples(samples: Sequence[Sample]) -> int:
    """How many samples had two or more gauges at 1 (each must sit inside a disagreement)."""
    return sum(1 for s in samples if sum(1 for g in s.active.values() if g == 1) > 1)


def holder_changes(samples: Sequence[Sample]) -> list[tuple[float, int | None, int | None]]:
    """``(at_s, previous pid, new pid)`` each time the sampled lease key changed hands."""
    changes: list[tuple[float, int | None, int | None]] = []
    previous: int | None = None
    for index, sample in enumerate(samples):
        if index and sample.holder != previous:
            changes.append((sample.at_s, previous, sample.holder))
        previous = sample.holder
    return changes


def count_lines_since(path: Path, offset_lines: int) -> int:
    """Lines appended to ``path`` beyond its first ``offset_lines``."""
    with contextlib.suppress(FileNotFoundError):
        return max(0, path.read_bytes().count(b"\n") - offset_lines)
    return 0
