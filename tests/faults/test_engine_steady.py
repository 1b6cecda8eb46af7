"""An engine committing at a steady rate while the relay drains, some commits aborted after
taking their seqs: every committed entry delivered, and burned seqs never stall the relay.

The latency of each entry is measured from outside: a sampler thread notes when an id first
appears in the workload's ledger (committed) and when it first appears in the sink's file
(delivered); timers are measured from their ``fire_at`` instead, since they are not due at commit.
"""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path

import orjson
import pytest
from faults.harness import RecordProperty, RelayProcess, seed_backlog
from support.ledger import assert_ledger, ledger_from_jsonl, report_ledger, wait_delivered
from support.redis_server import RedisServer
from support.waiting import wait_until
from support.workload import Workload

from store import RedisStore

pytestmark = pytest.mark.faults

#: How long the engine commits, in seconds, and at what rate (transactions per second).
RUN_S = 20.0
RATE_PER_S = 150.0
#: Every N-th transaction takes its seqs and then aborts.
ABORT_EVERY = 5
#: The bound on commit-to-delivery latency, in seconds: well under the 30 s gap grace, so no
#: entry ever waited for a burned seq to be given up on.
MAX_LATENCY_S = 5.0


class LatencySampler:
    """Notes when ids are committed (ledger grows) and delivered (sink file grows)."""

    def __init__(self, workload: Workload, out: Path) -> None:
        self.workload, self.out = workload, out
        self.committed_at: dict[str, float] = {}
        self.delivered_at: dict[str, float] = {}
        self.timer_lag_s: list[float] = []
        self._offset = 0
        self._partial = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="latency", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            time.sleep(0.01)

    def sample(self) -> None:
        now = time.time()
        committed = self.workload.ledger.committed
        for entry in committed[len(self.committed_at) :]:
            self.committed_at.setdefault(entry, now)
        try:
            with self.out.open("rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except FileNotFoundError:
            return
        self._offset += len(chunk)
        complete, _, self._partial = (self._partial + chunk).rpartition(b"\n")
        for line in complete.splitlines():
            envelope = orjson.loads(line)
            if envelope["id"] in self.delivered_at:
                continue
            self.delivered_at[envelope["id"]] = now
            if envelope["kind"] == "timer":
                self.timer_lag_s.append(envelope["relayed_at"] - envelope["fire_at"])

    def latencies_s(self) -> list[float]:
        """Commit-to-delivery of every delivered outbox and spawn entry."""
        return [
            self.delivered_at[entry] - at
            for entry, at in self.committed_at.items()
            if entry in self.delivered_at and not entry.startswith("timeout:")
        ]


@pytest.mark.slow
def test_steady_engine_with_aborted_commits_is_relayed_completely_and_promptly(
    redis_process: RedisServer, tmp_path: Path, record_property: RecordProperty
) -> None:
    client = redis_process.client()
    workload = Workload(
        RedisStore(client, prefix="steady"), rate_per_s=RATE_PER_S, abort_every=ABORT_EVERY, seed=11
    )
    out = tmp_path / "delivered.jsonl"
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", "steady", "--sink", f"jsonl:{out}",
            "--lease-ttl", "1", "--poll-interval", "0.2", "--log-level", "warning",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    relay.start()
    sampler = LatencySampler(workload, out)
    sampler.start()
    try:
        workload.start()
        time.sleep(RUN_S)
        ledger_in = workload.stop()
        done = time.monotonic()
        recover_s = wait_delivered(out, ledger_in.committed, since=done, timeout_s=30)
        time.sleep(0.1)
    finally:
        sampler.stop()
        relay.stop()
    sampler.sample()

    ledger = ledger_from_jsonl("steady-engine-aborts", ledger_in.committed, out, recover_s=recover_s)
    report_ledger(ledger, record_property)
    latencies = sorted(sampler.latencies_s())
    p50, p99 = statistics.median(latencies), latencies[int(len(latencies) * 0.99)]
    timer_lag = max(sampler.timer_lag_s)
    print(
        f"commits={ledger_in.commits} aborted={ledger_in.aborted} burned_seqs={len(ledger_in.burned)} "
        f"latency_s p50={p50:.3f} p99={p99:.3f} max={latencies[-1]:.3f} timer_lag_max_s={timer_lag:.3f}"
    )
    assert_ledger(ledger, max_duplicates=0)
    assert ledger_in.burned, "the workload must have burned seqs"
    assert not set(ledger_in.burned) & sampler.delivered_at.keys()
    assert latencies[-1] < MAX_LATENCY_S
    assert timer_lag < MAX_LATENCY_S
    client.close()


def test_burned_seqs_in_every_window_do_not_throttle_a_drain(
    redis_process: RedisServer, tmp_path: Path, record_property: RecordProperty
) -> None:
    """A backlog whose every read window holds a burned seq drains at batch pace, not poll pace.

    Each window returns fewer entries than asked; if the relay took that for "idle" it would wait
    up to ``--poll-interval`` between batches, far past the test's bound.
    """
    client = redis_process.client()
    backlog = seed_backlog(
        client, "burned", outbox=10_000, spawns=0, timers=0, burn_every=25, fire_at=time.time()
    )
    out = tmp_path / "delivered.jsonl"
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", "burned", "--sink", f"jsonl:{out}",
            "--batch", "50", "--poll-interval", "1", "--lease-ttl", "1", "--log-level", "warning",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    relay.start()
    try:
        wait_until(out.exists, 30, "the first delivery")
        started = time.monotonic()
        drain_s = wait_delivered(out, backlog.committed, since=started, timeout_s=60)
    finally:
        relay.stop()

    ledger = ledger_from_jsonl("burned-seq-drain", backlog.committed, out, recover_s=drain_s)
    report_ledger(ledger, record_property)
    assert_ledger(ledger, max_duplicates=0)
    assert drain_s is not None
    assert drain_s < 15, f"drain took {drain_s:.1f}s: burned seqs throttle the relay to its poll interval"
    client.close()
