"""Three ``relayd sweep`` processes over ``--prefix '{shard-0..15}'`` share the prefixes fairly,
take over a SIGKILLed one's prefixes within about one TTL, drain every prefix, and never have
two active on one prefix.

A sampler thread reads the 16 lease keys every 50 ms. "Never two active" is checked against
what the processes actually did: every envelope a process delivered carries its prefix and
``relayed_at``; if the lease samples just before and just after that moment both name another
process, two were active at once. (A holder stops delivering on its own before its key can
expire, so while it delivers, the key is its own.) Run with ``-s`` to see the figures.
"""

from __future__ import annotations

import bisect
import json
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.ports import free_port
from support.redis_server import RedisServer
from support.replicas import Replica, holder_pid, start_replica
from support.seeding import Entries
from support.waiting import seconds_until

pytestmark = pytest.mark.crash

SHARDS = [f"{{shard-{i}}}" for i in range(16)]
LEASE_TTL_S = 1.5
ENTRIES_PER_PREFIX = 400


class LeaseSampler:
    """Reads every shard's lease key in one pipeline every ``interval_s``; keeps (time, pids)."""

    def __init__(self, client, interval_s: float = 0.05) -> None:
        self.client, self.interval_s = client, interval_s
        self.samples: list[tuple[float, tuple[int | None, ...]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), self.now()))
            self._stop.wait(self.interval_s)

    def now(self) -> tuple[int | None, ...]:
        """Every shard's lease holder, read now (not the last sample, which may be older)."""
        pipe = self.client.pipeline(transaction=False)
        for shard in SHARDS:
            pipe.get(f"{shard}:relay:lease")
        return tuple(holder_pid(t) for t in pipe.execute())

    def latest(self) -> tuple[int | None, ...]:
        return self.samples[-1][1] if self.samples else (None,) * len(SHARDS)

    def __enter__(self) -> LeaseSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def foreign_deliveries(self, pid: int, deliveries: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """Deliveries by ``pid`` at moments when the samples on both sides name another holder."""
        times = [at for at, _ in self.samples]
        bad = []
        for shard, relayed_at in deliveries:
            i = bisect.bisect_left(times, relayed_at)
            if 0 < i < len(times):
                index = SHARDS.index(shard)
                before, after = self.samples[i - 1][1][index], self.samples[i][1][index]
                if before == after and before not in (None, pid):
                    bad.append((shard, relayed_at))
        return bad


def _shares(pids: tuple[int | None, ...]) -> Counter[int]:
    return Counter(pid for pid in pids if pid is not None)


def _seed(client, shard: str, count: int) -> set[str]:
    """Commit ``count`` outbox entries as the engine does (docs/internals.md#key-space); their ids."""
    entries = Entries(client.pipeline(transaction=False), shard)
    for seq in range(1, count + 1):
        entries.outbox(seq, f"x{seq % 5}", f"{shard}-e{seq}")
    entries.counters(outbox=count).pipe.execute()
    return {f"{shard}:outbox:{seq}" for seq in range(1, count + 1)}


def _envelopes(replica: Replica) -> list[dict]:
    """What the process's jsonl sink wrote (a SIGKILL may have cut the last line short)."""
    if not replica.jsonl.exists():
        return []
    return [json.loads(line) for line in replica.jsonl.read_text().splitlines() if line.endswith("}")]


def _ids(replica: Replica) -> list[str]:
    return [envelope["id"] for envelope in _envelopes(replica)]


@pytest.fixture
def replicas(own_redis_server: RedisServer, tmp_path: Path) -> Iterator[list[Replica]]:
    started: list[Replica] = []

    def start(name: str) -> Replica:
        replica = start_replica(
            name,
            redis_url=own_redis_server.url,
            prefix="{shard-0..15}",
            workdir=tmp_path,
            metrics_port=free_port(),
            lease_ttl_s=LEASE_TTL_S,
            poll_interval_s=0.2,
            batch=50,
        )
        started.append(replica)
        return replica

    for name in ("r1", "r2", "r3"):
        start(name)
    yield started
    for replica in started:
        replica.stop()


def test_three_processes_share_sixteen_prefixes_and_survive_a_sigkill(own_redis_server, replicas):
    client = own_redis_server.client()
    with LeaseSampler(client) as sampler:
        fair_s = seconds_until(
            lambda: sorted(_shares(sampler.latest()).values()) == [5, 5, 6], 30, "fair shares 6/5/5"
        )
        shares_before = _shares(sampler.latest())
        committed = set().union(*(_seed(client, shard, ENTRIES_PER_PREFIX) for shard in SHARDS))
        seconds_until(lambda: sum(len(_ids(r)) for r in replicas) > 0, 10, "deliveries started")
        victim = max(replicas, key=lambda r: shares_before[r.pid])
        survivors = [r for r in replicas if r is not victim]

        victim.signal(signal.SIGKILL)
        victim.proc.wait(5)
        killed_at = time.monotonic()
        taken_s = seconds_until(
            lambda: (
                sorted(_shares(sampler.latest()).values()) == [8, 8]
                and victim.pid not in _shares(sampler.latest())
            ),
            6 * LEASE_TTL_S,
            "survivors hold all 16",
        )
        drained_s = seconds_until(
            lambda: all(client.hlen(f"{shard}:outbox") == 0 for shard in SHARDS), 60, "every prefix drained"
        )
        drained_after_kill_s = time.monotonic() - killed_at
        for replica in survivors:
            replica.stop()
        released = sampler.now()

    delivered = [i for r in replicas for i in _ids(r)]
    foreign = {
        r.name: sampler.foreign_deliveries(r.pid, [(e["prefix"], e["relayed_at"]) for e in _envelopes(r)])
        for r in replicas
    }
    print(
        f"\nfair 6/5/5 after {fair_s:.2f}s; after SIGKILL of {victim.name} (held {shares_before[victim.pid]})"
        f" survivors held all 16 in {taken_s:.2f}s (TTL {LEASE_TTL_S}s); drained {drained_s:.2f}s later"
        f" ({drained_after_kill_s:.2f}s after the kill); {len(committed)} committed,"
        f" {len(delivered)} delivered, {len(delivered) - len(set(delivered))} duplicates;"
        f" {len(sampler.samples)} lease samples"
    )
    assert set(delivered) >= committed  # nothing lost
    assert len(delivered) - len(set(delivered)) <= 16 * 50  # at most one batch in flight per prefix
    assert foreign == {r.name: [] for r in replicas}  # never two active on one prefix
    assert taken_s < 2 * LEASE_TTL_S + 1.0
    assert all(r.proc.returncode == 0 for r in survivors)
    assert released == (None,) * 16  # clean shutdown gives every lease back
    left = [m.decode() for m in client.zrange("{shard-0}:relay:members", 0, -1)]
    assert all(f"/{victim.pid}/" in m for m in left)  # the survivors left; the dead one just expires
