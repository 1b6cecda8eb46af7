"""The workload writer: its ledger is exactly what landed in Redis; burned seqs never commit."""

from __future__ import annotations

import time

import pytest
import redis
from support.workload import Workload, stored_ids, timer_event_id

from store import RedisStore


@pytest.fixture
def store(sync_client: redis.Redis, prefix: str) -> RedisStore:
    return RedisStore(sync_client, prefix=prefix)


def test_ledger_is_exactly_what_was_committed(
    store: RedisStore, sync_client: redis.Redis, prefix: str
) -> None:
    """Every committed outbox entry, spawn and timer is in Redis under the id the ledger gives."""
    workload = Workload(store, rate_per_s=10_000)

    ledger = workload.run(60)

    assert ledger.commits == 60
    assert set(ledger.committed) == stored_ids(sync_client, prefix)
    assert len(ledger.committed) == len(set(ledger.committed))
    assert all(ledger.of_kind(kind) for kind in ("outbox", "spawn", "timer"))


def test_aborted_transactions_burn_seqs_that_never_commit(
    store: RedisStore, sync_client: redis.Redis, prefix: str
) -> None:
    """With ``abort_every=4`` a quarter of the transactions take seqs and leave gaps."""
    workload = Workload(store, rate_per_s=10_000, abort_every=4)

    ledger = workload.run(40)

    assert (ledger.commits, ledger.aborted) == (30, 10)
    assert ledger.burned
    assert not set(ledger.burned) & stored_ids(sync_client, prefix)
    outbox_top = int(sync_client.get(f"{prefix}:outbox:seq") or 0)
    outbox_ids = set(ledger.of_kind("outbox")) | {b for b in ledger.burned if ":outbox:" in b}
    assert outbox_ids == {f"{prefix}:outbox:{seq}" for seq in range(1, outbox_top + 1)}


def test_timer_ids_follow_the_design_rule() -> None:
    assert timer_event_id("e-1", "root.wait", 1700000000.5) == "timeout:e-1:root.wait:1700000000.5"
    assert timer_event_id("e-1", "root.wait", 1700000000) == "timeout:e-1:root.wait:1700000000.0"


def test_steady_rate_sleeps_between_commits(store: RedisStore) -> None:
    """At 100/s, 20 transactions are spread over about 0.2 s of (fake) time."""
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    workload = Workload(store, rate_per_s=100, monotonic=lambda: now[0], sleep=sleep)

    workload.run(20)

    assert now[0] == pytest.approx(0.2)


def test_thread_commits_until_stopped(store: RedisStore, sync_client: redis.Redis, prefix: str) -> None:
    """``start`` runs in a thread; ``stop`` joins it and returns a ledger matching Redis."""
    workload = Workload(store, rate_per_s=500)

    workload.start()
    deadline = time.monotonic() + 10  # a loaded CI machine may take a while to schedule the thread
    # at most four entries per commit: more than 24 stored means more than five commits
    while len(stored_ids(sync_client, prefix)) <= 24 and time.monotonic() < deadline:
        time.sleep(0.01)
    ledger = workload.stop()

    assert ledger.commits > 5
    assert set(ledger.committed) == stored_ids(sync_client, prefix)


def test_thread_failure_is_raised_by_stop(store: RedisStore) -> None:
    """An error inside the writer thread reaches the test instead of vanishing."""
    workload = Workload(store, rate_per_s=1000)
    workload._pool.clear()  # no execution to pick: the first commit fails

    workload.start(transactions=1)

    with pytest.raises(IndexError):
        workload.wait(5)
