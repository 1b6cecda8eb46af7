"""Several ``relayd sweep`` processes on one real redis-server: one active per prefix, takeover
after SIGKILL within the TTL, a frozen (SIGSTOP/SIGCONT) holder stops delivering, and the union
of the sinks holds every committed entry.

A workload thread keeps committing outbox events, spawn intents and timers through
``store.RedisStore`` the whole time. A sampler reads the lease key and every replica's
``relayd_active`` gauge every 50 ms (``tests/support/replicas.py`` explains how the sampling
race is allowed for). The takeover times, duplicates and disagreement runs are
printed: run with ``-s`` to see them.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.ledger import compute_ledger, read_jsonl, report_ledger
from support.redis_server import RedisServer, free_port
from support.replicas import (
    Replica,
    Sample,
    Sampler,
    count_lines_since,
    disagreements,
    holder_changes,
    holder_pid,
    most_active,
    overlapping_samples,
    start_replica,
    wait_new_holder,
    wait_serving,
)
from support.workload import Workload, stored_ids

from relayd.state.lease import make_token
from store import RedisStore

LEASE_TTL_S = 1.5
POLL_INTERVAL_S = 0.2
BATCH = 50
SAMPLE_INTERVAL_S = 0.05
#: The lease is renewed (and its loss noticed) every third of the TTL (docs/internals.md#delivery-semantics).
RENEW_PERIOD_S = LEASE_TTL_S / 3
#: A standby tries to acquire every renewal period with jitter up to 1.5 times it.
STANDBY_RETRY_MAX_S = RENEW_PERIOD_S * 1.5
#: A gauge may contradict the key for one renewal period, plus the samples that straddle it.
MAX_DISAGREEMENT_S = RENEW_PERIOD_S + 2 * SAMPLE_INTERVAL_S
#: Scheduling slack for a loaded CI machine (process wake-ups, the scrape itself).
SLACK_S = 1.0
KINDS = ("outbox", "spawn", "timer")


class World:
    """One redis-server, one prefix, a workload committing into it, and the replicas."""

    def __init__(self, server: RedisServer, prefix: str, workdir: Path) -> None:
        self.server, self.prefix, self.workdir = server, prefix, workdir
        self.client = server.client()
        self.workload = Workload(RedisStore(self.client, prefix=prefix), rate_per_s=150.0, seed=11)
        self.replicas: list[Replica] = []
        self.lease_key = f"{prefix}:relay:lease"

    def start(self, count: int) -> list[Replica]:
        for _ in range(count):
            name = f"r{len(self.replicas) + 1}"
            self.replicas.append(
                start_replica(
                    name,
                    redis_url=self.server.url,
                    prefix=self.prefix,
                    workdir=self.workdir,
                    metrics_port=free_port(),
                    lease_ttl_s=LEASE_TTL_S,
                    poll_interval_s=POLL_INTERVAL_S,
                    batch=BATCH,
                )
            )
        wait_serving(self.replicas)
        return self.replicas

    def sampler(self) -> Sampler:
        return Sampler(self.client, self.lease_key, self.replicas, interval_s=SAMPLE_INTERVAL_S)

    def by_pid(self, pid: int | None) -> Replica:
        return next(r for r in self.replicas if r.pid == pid)

    def pids(self) -> dict[str, int]:
        return {r.name: r.pid for r in self.replicas}

    def drain_and_check(self, case: str, *, transitions: int, record_property: Callable[..., None]) -> None:
        """Stop the workload, wait until everything is delivered and acked, check the ledger."""
        committed = self.workload.stop().committed
        deadline = time.monotonic() + 20
        delivered: list[str] = []
        left: set[str] = set()
        while time.monotonic() < deadline:
            delivered = [d.id for r in self.replicas for d in read_jsonl(r.jsonl).deliveries]
            left = stored_ids(self.client, self.prefix)
            if not left and set(committed) <= set(delivered):
                break
            time.sleep(0.1)
        ledger = compute_ledger(case, committed, delivered)
        report_ledger(ledger, record_property)
        dead = {kind: self.client.hlen(f"{self.prefix}:relay:dead:{kind}") for kind in KINDS}
        # each hand-over may redeliver what the previous holder delivered but had not acked yet:
        # at most one batch per kind (spawn, outbox, timer lanes)
        bound = (transitions + 1) * len(KINDS) * BATCH

        assert ledger.committed > 200, "the workload should have committed a real backlog"
        assert ledger.lost == 0, ledger.line()
        assert ledger.unexpected == 0, ledger.line()
        assert left == set(), f"left behind in the outbox/spawns/timers: {sorted(left)[:10]}"
        assert dead == dict.fromkeys(KINDS, 0)
        assert ledger.duplicates <= bound, f"{ledger.line()} > bound {bound}"

    def close(self) -> None:
        for replica in self.replicas:
            replica.stop()
        self.workload.stop()
        self.client.close()


@pytest.fixture
def world(own_redis_server: RedisServer, prefix: str, tmp_path: Path) -> Iterator[World]:
    world = World(own_redis_server, prefix, tmp_path)
    yield world
    world.close()


def check_gauges_follow_the_key(samples: list[Sample], pids: dict[str, int]) -> None:
    """At most one active per prefix, allowing a gauge to lag the key by one renewal period."""
    runs = disagreements(samples, pids)
    longest = max((run.duration_s for run in runs), default=0.0)
    print(
        f"samples={len(samples)} most_active_in_one_sample={most_active(samples)} "
        f"overlapping_samples={overlapping_samples(samples)} disagreement_runs={len(runs)} "
        f"longest_disagreement_s={longest:.3f} bound_s={MAX_DISAGREEMENT_S + SLACK_S:.3f}"
    )

    assert len(samples) > 20
    assert all(run.duration_s <= MAX_DISAGREEMENT_S + SLACK_S for run in runs), runs


def holder_sample(world: World) -> Callable[[Sample], bool]:
    """A sample where the key names a live replica and that replica's gauge agrees."""
    pids = world.pids()

    def agreed(sample: Sample) -> bool:
        names = [name for name, pid in pids.items() if pid == sample.holder]
        return bool(names) and sample.active.get(names[0]) == 1

    return agreed


@pytest.mark.crash
@pytest.mark.parametrize("count", [2, 3], ids=["two", "three"])
def test_replicas_keep_one_active_and_hand_over_on_sigterm(
    world: World, count: int, record_property: Callable[..., None]
) -> None:
    """N replicas: one holder all along (no steal), a clean stop hands over at once, nothing lost."""
    world.workload.start()
    world.start(count)
    with world.sampler() as sampler:
        first = sampler.wait_for(holder_sample(world), timeout_s=10)
        time.sleep(4)
        steady = list(sampler.samples)
        holder = world.by_pid(first.holder)
        stopped_at = time.monotonic()
        holder.signal(signal.SIGTERM)
        seen_at, _ = wait_new_holder(world.client, world.lease_key, not_pids=[holder.pid], timeout_s=10)
        handover_s = seen_at - stopped_at
        time.sleep(2)
    samples = sampler.samples
    changes_in_steady = [c for c in holder_changes(steady) if c[0] > first.at_s]
    print(f"replicas={count} sigterm_handover_s={handover_s:.3f}")
    record_property("sigterm_handover_s", round(handover_s, 3))

    assert changes_in_steady == [], "the lease changed hands while its holder was healthy"
    assert holder.proc.wait(10) == 0
    # a clean stop deletes the lease: a standby takes it on its next try, not after the TTL
    assert handover_s <= STANDBY_RETRY_MAX_S + SLACK_S
    check_gauges_follow_the_key(samples, world.pids())
    world.drain_and_check(f"replicas-{count}", transitions=1, record_property=record_property)


@pytest.mark.crash
def test_sigkill_of_the_active_replica_is_taken_over_within_the_ttl(
    world: World, record_property: Callable[..., None]
) -> None:
    """Three replicas; SIGKILL the holder twice: each time a standby takes over within the TTL."""
    world.workload.start()
    world.start(3)
    takeovers: list[float] = []
    gauge_lags: list[float] = []  # from the key naming the new holder to a sample of its gauge at 1
    with world.sampler() as sampler:
        for _ in range(2):
            sample = sampler.wait_for(holder_sample(world), timeout_s=10)
            time.sleep(1)  # let it deliver for a while
            victim = world.by_pid(sample.holder)
            killed_at = time.monotonic()
            victim.signal(signal.SIGKILL)
            victim.proc.wait(5)
            seen_at, _ = wait_new_holder(world.client, world.lease_key, not_pids=[victim.pid], timeout_s=10)
            takeovers.append(seen_at - killed_at)
            agreed = sampler.wait_for(holder_sample(world), timeout_s=10)
            gauge_lags.append(agreed.at_s - seen_at)
        time.sleep(1)
    print(
        "sigkill_takeover_s="
        + ",".join(f"{t:.3f}" for t in takeovers)
        + " new_holder_gauge_lag_s="
        + ",".join(f"{t:.3f}" for t in gauge_lags)
    )
    record_property("sigkill_takeover_s", [round(t, 3) for t in takeovers])

    # the key expires at most one TTL after the kill; the next standby try follows within
    # its jittered retry period
    assert all(t <= LEASE_TTL_S + STANDBY_RETRY_MAX_S + SLACK_S for t in takeovers), takeovers
    # and not before the dead holder's lease could have expired: no standby steals a lease
    assert all(t >= LEASE_TTL_S - RENEW_PERIOD_S - 0.1 for t in takeovers), takeovers
    assert all(lag <= MAX_DISAGREEMENT_S + SLACK_S for lag in gauge_lags), gauge_lags
    check_gauges_follow_the_key(sampler.samples, world.pids())
    world.drain_and_check("sigkill", transitions=2, record_property=record_property)


@pytest.mark.crash
def test_a_frozen_holder_loses_the_lease_and_stops_delivering(
    world: World, record_property: Callable[..., None]
) -> None:
    """SIGSTOP the holder past its TTL, SIGCONT it: it goes inactive and writes no more than
    the batch it had in flight, while the new holder keeps delivering."""
    world.workload.start()
    world.start(2)
    with world.sampler() as sampler:
        sample = sampler.wait_for(holder_sample(world), timeout_s=10)
        time.sleep(1)
        frozen = world.by_pid(sample.holder)
        other = next(r for r in world.replicas if r is not frozen)
        frozen_at = time.monotonic()
        frozen.signal(signal.SIGSTOP)
        seen_at, _ = wait_new_holder(world.client, world.lease_key, not_pids=[frozen.pid], timeout_s=10)
        takeover_s = seen_at - frozen_at
        time.sleep(max(0.0, frozen_at + 2 * LEASE_TTL_S - time.monotonic()))
        frozen_lines, other_lines = frozen.lines(), other.lines()
        resumed_at = time.monotonic()
        frozen.signal(signal.SIGCONT)
        inactive = sampler.wait_for(lambda s: s.active.get(frozen.name) == 0, timeout_s=10)
        time.sleep(3)
    noticed_s = inactive.at_s - resumed_at
    written_after = count_lines_since(frozen.jsonl, frozen_lines)
    other_after = count_lines_since(other.jsonl, other_lines)
    after_resume = [s for s in sampler.samples if s.at_s > inactive.at_s]
    print(
        f"sigstop_takeover_s={takeover_s:.3f} noticed_lost_after_resume_s={noticed_s:.3f} "
        f"frozen_lines_after_resume={written_after} new_holder_lines_after_resume={other_after}"
    )
    record_property("sigstop_takeover_s", round(takeover_s, 3))
    record_property("frozen_lines_after_resume", written_after)

    assert takeover_s <= LEASE_TTL_S + STANDBY_RETRY_MAX_S + SLACK_S
    assert noticed_s <= MAX_DISAGREEMENT_S + SLACK_S
    # a scrape that failed under load reads None: unknown, not active
    assert all(s.active.get(frozen.name) != 1 for s in after_resume)
    assert all(s.holder == other.pid for s in after_resume)
    # at most the one batch (of one kind) it had read before it was frozen
    assert written_after <= BATCH
    assert other_after > 0
    assert frozen.proc.poll() is None, "the resumed replica keeps running as a standby"
    check_gauges_follow_the_key(sampler.samples, world.pids())
    world.drain_and_check("sigstop", transitions=1, record_property=record_property)


# --- the sampling analysis itself (pure; would the checks above notice a violation?) ---------


def sample(at_s: float, holder: int | None, **active: int | None) -> Sample:
    return Sample(at_s, holder, active)


def test_a_gauge_left_at_one_after_the_key_moved_is_one_stale_run_with_its_duration() -> None:
    """r1 keeps reporting active for 0.3 s after the key named r2: one stale run of 0.3 s."""
    samples = [
        sample(0.0, 1, r1=1, r2=0),
        sample(0.1, 2, r1=1, r2=1),
        sample(0.2, 2, r1=1, r2=1),
        sample(0.4, 2, r1=1, r2=1),
        sample(0.5, 2, r1=0, r2=1),
    ]

    runs = disagreements(samples, {"r1": 1, "r2": 2})

    assert [(r.replica, r.kind, r.samples) for r in runs] == [("r1", "stale", 3)]
    assert runs[0].duration_s == pytest.approx(0.3)
    assert (most_active(samples), overlapping_samples(samples)) == (2, 3)
    assert holder_changes(samples) == [(0.1, 1, 2)]


def test_an_unreachable_sample_ends_a_run_and_a_holder_reporting_zero_is_missing() -> None:
    """A frozen replica (None) says nothing; the key's holder at 0 is a "missing" run."""
    samples = [
        sample(0.0, 1, r1=1, r2=0),
        sample(0.1, 2, r1=1, r2=0),
        sample(0.2, 2, r1=None, r2=0),
        sample(0.3, 2, r1=1, r2=1),
        sample(0.4, 2, r1=0, r2=1),
    ]

    runs = disagreements(samples, {"r1": 1, "r2": 2})

    assert sorted((r.replica, r.kind, r.first_at_s, r.last_at_s) for r in runs) == [
        ("r1", "stale", 0.1, 0.1),
        ("r1", "stale", 0.3, 0.3),
        ("r2", "missing", 0.1, 0.2),
    ]


def test_lease_tokens_name_the_holder_pid() -> None:
    """The token is ``hostname/pid/random`` (relayd.state.lease.make_token)."""

    assert (holder_pid(make_token()), holder_pid(b"host/42/ab12"), holder_pid(None)) == (
        os.getpid(),
        42,
        None,
    )
