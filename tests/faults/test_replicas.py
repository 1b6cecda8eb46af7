"""Three relay replicas over 16 prefixes (``{shard-0..15}``), killed and restarted at random.

Each replica run writes to its own jsonl file, so every delivery is known by the process that
made it. A sampler reads the 16 lease keys every few milliseconds. "Never two active on one
prefix" is checked against both: no delivery of a prefix by one replica while the samples just
before and just after it (a few ms apart) both name another replica as the lease holder, and
no two replicas deliver the same entry except where a kill left it unacked. Every prefix must
be drained and every committed entry delivered.
"""

from __future__ import annotations

import bisect
import random
import threading
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from faults.harness import RecordProperty, RelayProcess, seed_backlog
from support.ledger import assert_ledger, compute_ledger, read_jsonl, report_ledger
from support.redis_server import RedisServer
from support.waiting import wait_until
from support.workload import Workload

from store import Keyspace, RedisStore

pytestmark = [pytest.mark.faults, pytest.mark.crash, pytest.mark.slow]

PREFIXES = [f"{{shard-{n}}}" for n in range(16)]
REPLICAS = 3
BATCH = 20
#: How long replicas are killed and restarted at random, in seconds.
CHAOS_S = 25.0
#: Most time between two lease samples around a delivery for it to count as a violation, in s.
SAMPLE_GAP_S = 0.05


class LeaseSampler:
    """Reads every prefix's lease key in one pipelined round-trip, over and over."""

    def __init__(self, server: RedisServer) -> None:
        self.client = server.client()
        self.keys = [Keyspace(p).relay("lease") for p in PREFIXES]
        #: per prefix: sample times and the holder pid (None: free) at each
        self.times: dict[str, list[float]] = {p: [] for p in PREFIXES}
        self.holders: dict[str, list[int | None]] = {p: [] for p in PREFIXES}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.client.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            tokens = self.client.mget(self.keys)
            now = time.time()
            for prefix, token in zip(PREFIXES, tokens, strict=True):
                self.times[prefix].append(now)
                # the token names the holder as hostname/pid/random
                text = token.decode() if isinstance(token, bytes) else token
                self.holders[prefix].append(int(text.split("/")[-2]) if text else None)
            time.sleep(0.003)

    def held_by_other(self, prefix: str, at: float, pid: int) -> bool:
        """Whether samples just before and just after ``at`` both name a replica other than ``pid``."""
        times, holders = self.times[prefix], self.holders[prefix]
        i = bisect.bisect_left(times, at)
        if i == 0 or i >= len(times) or times[i] - times[i - 1] > SAMPLE_GAP_S:
            return False
        before, after = holders[i - 1], holders[i]
        return before is not None and before == after and before != pid


def check_runs(
    runs: list[tuple[RelayProcess, Path]], sampler: LeaseSampler
) -> tuple[list[object], list[int]]:
    """Deliveries made while the lease named another replica, and how many prefixes each run served."""
    violations: list[object] = []
    per_run_prefixes = []
    for relay, out in runs:
        pid = relay.proc.pid if relay.proc is not None else -1
        prefixes: set[str] = set()
        for line in out.read_bytes().splitlines() if out.exists() else []:
            try:
                envelope = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a line torn by SIGKILL
            prefixes.add(envelope["prefix"])
            if sampler.held_by_other(envelope["prefix"], envelope["relayed_at"], pid):
                violations.append((pid, envelope["id"]))
        per_run_prefixes.append(len(prefixes))
    return violations, per_run_prefixes


def test_the_lease_check_catches_a_delivery_under_another_holder() -> None:
    """The detector itself: a delivery between two samples naming another pid is a violation."""
    sampler = LeaseSampler.__new__(LeaseSampler)
    sampler.times = {"{shard-0}": [10.00, 10.01, 10.02]}
    sampler.holders = {"{shard-0}": [111, 111, 222]}

    assert sampler.held_by_other("{shard-0}", 10.005, 222)
    assert not sampler.held_by_other("{shard-0}", 10.005, 111)
    assert not sampler.held_by_other("{shard-0}", 10.015, 222)  # a hand-over between samples
    assert not sampler.held_by_other("{shard-0}", 10.5, 333)  # no sample after it


def test_three_replicas_killed_at_random_never_share_a_prefix_and_drain_all(
    redis_process: RedisServer, tmp_path: Path, record_property: RecordProperty
) -> None:
    client = redis_process.client()
    committed: list[str] = []
    for n, prefix in enumerate(PREFIXES):
        committed += seed_backlog(
            client, prefix, outbox=3_500, spawns=750, timers=750, fire_at=time.time() - 60, seed=n
        ).committed
    writers = [
        Workload(RedisStore(redis_process.client(), prefix=p), rate_per_s=20, abort_every=6, seed=n)
        for n, p in enumerate(PREFIXES[:4])
    ]
    rng = random.Random(16)
    runs: list[tuple[RelayProcess, Path]] = []

    def launch(slot: int) -> RelayProcess:
        out = tmp_path / f"run-{len(runs)}.jsonl"
        relay = RelayProcess(
            [
                "--redis-url", redis_process.url, "--prefix", "{shard-0..15}", "--sink", f"jsonl:{out}",
                "--batch", str(BATCH), "--lease-ttl", "1", "--poll-interval", "0.1", "--log-level", "warning",
            ],
            tmp_path / f"run-{len(runs)}.log",
        )  # fmt: skip
        relay.start()
        runs.append((relay, out))
        return relay

    sampler = LeaseSampler(redis_process)
    sampler.start()
    live = [launch(slot) for slot in range(REPLICAS)]
    for writer in writers:
        writer.start()
    kills = 0
    try:
        deadline = time.monotonic() + CHAOS_S
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.5, 2.0))
            slot = rng.randrange(REPLICAS)
            if rng.random() < 0.75:
                live[slot].kill()
                kills += 1
            else:
                live[slot].stop()  # a clean leave now and then: the lease is released at once
            time.sleep(rng.uniform(0.2, 1.5))
            live[slot] = launch(slot)
        for writer in writers:
            committed += writer.stop().committed
        last_fault = time.monotonic()

        def delivered_ids() -> Counter[str]:
            seen: Counter[str] = Counter()
            for _, out in runs:
                seen.update(d.id for d in read_jsonl(out).deliveries)
            return seen

        wait_until(lambda: set(committed) <= delivered_ids().keys(), 60, "every prefix drained")
        recover_s = time.monotonic() - last_fault
    finally:
        sampler.stop()
        for writer in writers:
            writer.stop()
        for relay in live:
            relay.stop()

    seen = delivered_ids()
    ledger = compute_ledger(
        "replicas-3x16-random-kills",
        committed,
        (i for i, n in seen.items() for _ in range(n)),
        recover_s=recover_s,
    )
    report_ledger(ledger, record_property)
    violations, per_run_prefixes = check_runs(runs, sampler)
    samples = sum(len(t) for t in sampler.times.values()) // len(PREFIXES)
    print(
        f"runs={len(runs)} kills={kills} lease_samples={samples} violations={len(violations)} "
        f"prefixes_delivered_per_run={per_run_prefixes} "
        f"lifetimes_s={[round(r.ended_at - r.started_at, 1) for r, _ in runs]}"
    )
    assert violations == [], violations[:5]
    assert_ledger(ledger, max_duplicates=kills * len(PREFIXES) * 3 * BATCH)
    for prefix in PREFIXES:
        keys = Keyspace(prefix)
        assert client.hlen(keys.outbox) + client.hlen(keys.spawns) + client.zcard(keys.timers) == 0, prefix
    client.close()
