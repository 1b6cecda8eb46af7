"""Fair shares: quotas, the stable rendezvous assignment, and what a replica takes or gives back."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import contextvars
import time
from collections import Counter
from pathlib import Path
from typing import ClassVar

import pytest
from prometheus_client import CollectorRegistry
from support.relays import start_relay
from support.waiting import until

from relayd.engine import loop
from relayd.engine.options import SweepOptions
from relayd.engine.shares import PrefixView, assign, decide_shares, fair_quotas, preference
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.memory import MemorySink
from relayd.state.lease import Lease, lease_member
from relayd.state.members import Membership, read_members
from store.keys import Keyspace

from .conftest import Seeder

SHARDS = [f"{{shard-{i}}}" for i in range(16)]


@pytest.mark.parametrize(
    ("n_prefixes", "members", "held", "expected"),
    [
        (16, ["a"], {}, {"a": 16}),
        (16, ["c", "a", "b"], {}, {"a": 6, "b": 5, "c": 5}),
        (16, ["a", "b"], {}, {"a": 8, "b": 8}),
        (16, ["a", "b", "c", "d"], {}, {"a": 4, "b": 4, "c": 4, "d": 4}),
        (3, ["a", "b", "c", "d", "e"], {}, {"a": 1, "b": 1, "c": 1, "d": 0, "e": 0}),
        (1, ["a", "b"], {}, {"a": 1, "b": 0}),
        (1, ["a", "b"], {"b": 1}, {"a": 0, "b": 1}),
        (16, ["a", "b", "c"], {"c": 6, "b": 5, "a": 5}, {"a": 5, "b": 5, "c": 6}),
        (16, ["a", "b", "c"], {"b": 8, "c": 8}, {"a": 5, "b": 6, "c": 5}),
        (0, ["a", "b"], {}, {"a": 0, "b": 0}),
        (5, [], {}, {}),
    ],
    ids=[
        "alone-takes-all",
        "16-over-3-extras-in-token-order",
        "16-over-2",
        "16-over-4",
        "fewer-prefixes-than-members",
        "one-prefix-first-token",
        "one-prefix-stays-with-its-holder",
        "settled-group-keeps-its-extra",
        "newcomer-the-biggest-holder-keeps-the-extra",
        "nothing-to-share",
        "no-members",
    ],
)
def test_fair_quotas(n_prefixes, members, held, expected):
    quotas = fair_quotas(n_prefixes, members, held)

    assert expected == quotas
    assert sum(quotas.values()) == (n_prefixes if members else 0)


def test_preference_is_stable_and_differs_per_member():
    scores = [preference("{shard-3}", m) for m in ("a", "b", "c")]

    assert scores == [preference("{shard-3}", m) for m in ("a", "b", "c")]
    assert len(set(scores)) == 3


def test_assign_gives_every_prefix_within_the_quotas():
    quotas = fair_quotas(16, ["a", "b", "c"])

    owner = assign(SHARDS, quotas, {})

    assert set(owner) == set(SHARDS)
    assert Counter(owner.values()) == Counter(quotas)


def test_assign_keeps_current_holders_up_to_their_quota():
    holders = dict.fromkeys(SHARDS, "a")  # "a" was alone and took everything
    quotas = fair_quotas(16, ["a", "b"], Counter(holders.values()))

    owner = assign(SHARDS, quotas, holders)

    kept = [p for p in SHARDS if owner[p] == "a"]
    assert len(kept) == 8
    # The eight "a" keeps are its most preferred: the others go, the least preferred first.
    ranked = sorted(SHARDS, key=lambda p: preference(p, "a"), reverse=True)
    assert set(kept) == set(ranked[:8])


def test_assign_moves_only_the_departed_members_prefixes():
    """Rendezvous stability: when "c" dies, "a" and "b" keep what they had and split the rest."""
    before = assign(SHARDS, fair_quotas(16, ["a", "b", "c"]), {})
    holders = {p: (m if m != "c" else None) for p, m in before.items()}

    after = assign(SHARDS, fair_quotas(16, ["a", "b"], Counter(h for h in holders.values() if h)), holders)

    moved = {p for p in SHARDS if before[p] != after[p]}
    assert moved == {p for p in SHARDS if before[p] == "c"}
    assert Counter(after.values()) == Counter({"a": 8, "b": 8})


def test_a_joining_member_takes_only_the_excess():
    two = assign(SHARDS, fair_quotas(16, ["a", "b"]), {})
    quotas = fair_quotas(16, ["a", "b", "n"], Counter(two.values()))

    three = assign(SHARDS, quotas, two)

    moved = {p for p in SHARDS if two[p] != three[p]}
    assert len(moved) == 5
    assert all(three[p] == "n" for p in moved)


def _views(holders, members):
    return [PrefixView(p, frozenset(members), holders.get(p)) for p in SHARDS]


def test_a_lone_replica_wants_every_prefix():
    decision = decide_shares(_views({}, {"a"}), "a")

    assert (decision.quota, decision.members) == (16, 1)
    assert decision.acquire == frozenset(SHARDS)
    assert decision.release == frozenset()


def test_a_replica_counts_itself_before_its_first_beat_shows_up():
    decision = decide_shares(_views({}, {"a"}), "b")

    assert (decision.quota, decision.members) == (8, 2)


def test_the_full_holder_releases_its_excess_and_the_newcomer_acquires_it():
    holders = dict.fromkeys(SHARDS, "a")
    views = _views(holders, {"a", "b"})

    old, new = decide_shares(views, "a"), decide_shares(views, "b")

    assert (old.quota, len(old.release), old.acquire) == (8, 8, frozenset())
    assert (new.quota, new.release) == (8, frozenset())
    assert new.acquire == old.release  # both read the same registry: they agree on what moves


def test_settled_group_changes_nothing():
    owner = assign(SHARDS, fair_quotas(16, ["a", "b", "c"]), {})
    views = _views(owner, {"a", "b", "c"})

    decisions = {m: decide_shares(views, m) for m in "abc"}

    assert all(d.acquire == d.release == frozenset() for d in decisions.values())
    assert sorted(d.quota for d in decisions.values()) == [5, 5, 6]


def test_leases_of_a_non_member_are_assigned_and_tried_for():
    """A dead replica's leases (its registration already expired) go to the survivors."""
    holders = {p: ("ghost" if i % 2 else "a") for i, p in enumerate(SHARDS)}

    decision = decide_shares(_views(holders, {"a"}), "a")

    assert decision.quota == 16
    assert decision.acquire == frozenset(p for p, h in holders.items() if h == "ghost")


def test_fewer_prefixes_than_members_leaves_some_idle():
    views = [PrefixView("solo", frozenset({"a", "b", "c"}), "b")]

    decisions = {m: decide_shares(views, m) for m in "abc"}

    assert {m: d.quota for m, d in decisions.items()} == {"a": 0, "b": 1, "c": 0}
    assert all(not d.acquire and not d.release for d in decisions.values())


def test_shares_is_pure():
    source = Path(__file__).resolve().parents[3] / "relayd" / "engine" / "shares.py"
    tree = ast.parse(source.read_text())
    imported = {
        (node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    } | {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }

    assert not imported & {"redis", "structlog", "time", "asyncio", "random"}


# --- in-process replicas over fakeredis and the real server ----------------------------------

#: Short enough for quick tests, long enough that 64 relays in one event loop on fakeredis
#: (Lua is slow there) renew and beat in time on a loaded 2-core machine.
TTL_S = 1.0
TOKEN = contextvars.ContextVar("token", default="")


class Replica:
    """One in-process relay over many prefixes; ``die`` stops it without releasing anything."""

    dead: ClassVar[set[str]] = set()
    started: ClassVar[list[Replica]] = []

    def __init__(self, client, prefixes, token):
        self.client, self.prefixes, self.token = client, prefixes, token
        self.sink = MemorySink()
        self.registry = CollectorRegistry()
        self.metrics = RelayMetrics(self.registry)
        self.stop = asyncio.Event()
        self.options = SweepOptions(
            prefixes=tuple(prefixes), poll_interval_s=0.5, lease_ttl_s=TTL_S, shutdown_grace_s=2.0
        )
        self.task = None

    def run(self):
        TOKEN.set(self.token)  # the task copies this context: run_relay's make_token reads it
        self.task = start_relay(
            self.options, self.client, self.sink, metrics=self.metrics, health=Health(), stop=self.stop
        )
        Replica.started.append(self)
        return self

    def active(self, prefix):
        return self.registry.get_sample_value("relayd_active", {"prefix": prefix})

    def actives(self):
        """Prefixes whose relayd_active is 1 (one gauge collected, not the whole registry)."""
        [metric] = self.metrics.active.collect()
        return {s.labels["prefix"] for s in metric.samples if s.value == 1}

    def transitions(self, event):
        return sum(
            self.registry.get_sample_value("relayd_lease_transitions_total", {"prefix": p, "event": event})
            for p in self.prefixes
        )

    async def finish(self):
        self.stop.set()
        await asyncio.wait_for(self.task, 10)

    async def die(self):
        """Stop renewing, beating and delivering, and leave the leases and registrations behind."""
        Replica.dead.add(self.token)
        await self.finish()


@pytest.fixture
async def tokens(monkeypatch):
    """Known tokens per replica, and dead replicas that give nothing back on the way out."""
    monkeypatch.setattr(loop, "make_token", TOKEN.get)
    real_release, real_leave = Lease.release, Membership.leave

    async def release(self):
        if self.member in Replica.dead:
            self.forget()
            return False
        return await real_release(self)

    async def leave(self):
        if self.token not in Replica.dead:
            await real_leave(self)

    monkeypatch.setattr(Lease, "release", release)
    monkeypatch.setattr(Membership, "leave", leave)
    yield
    for replica in Replica.started:  # a failed test still stops its replicas
        replica.stop.set()
    await asyncio.wait([r.task for r in Replica.started], timeout=10)
    Replica.started.clear()
    Replica.dead.clear()


async def _holders(client, prefixes):
    pipe = client.pipeline(transaction=False)
    for p in prefixes:
        pipe.get(Keyspace(p).relay("lease"))
    # A lease token is {member}#{term}: a holder is its member token.
    return [lease_member(v.decode()) if v else None for v in await pipe.execute()]


async def _shares(client, prefixes):
    return Counter(h for h in await _holders(client, prefixes) if h)


class Watch:
    """Samples every replica's relayd_active gauge: never two at 1 on one prefix."""

    def __init__(self, replicas, prefixes):
        self.replicas, self.prefixes, self.samples, self.overlaps = replicas, prefixes, 0, []
        self.task = asyncio.create_task(self._run())

    async def _run(self):
        while True:
            running = [(r.token, r.actives()) for r in self.replicas if r.task and not r.task.done()]
            for p in self.prefixes:
                on = [token for token, actives in running if p in actives]
                if len(on) > 1:
                    self.overlaps.append((p, on))
            self.samples += 1
            await asyncio.sleep(0.01)

    async def close(self):
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def _converge(client, prefixes, expected, timeout_s):
    started = time.monotonic()
    while sorted((await _shares(client, prefixes)).values()) != expected:
        if time.monotonic() - started > timeout_s:
            got = sorted((await _shares(client, prefixes)).values())
            raise AssertionError(f"shares {got} != {expected} after {timeout_s}s")
        await asyncio.sleep(0.02)
    return time.monotonic() - started


@pytest.fixture
def shards(prefix):
    return [f"{prefix}{{shard-{i}}}" for i in range(16)]


@pytest.mark.slow  # 6-13 s: three replicas join, one leaves, one joins, settled check
@pytest.mark.usefixtures("backend", "tokens")
async def test_three_replicas_converge_to_fair_shares_and_rebalance_on_leave_and_join(async_client, shards):
    a = Replica(async_client, shards, "host/1/a").run()
    await _converge(async_client, shards, [16], timeout_s=20 * TTL_S)
    b = Replica(async_client, shards, "host/2/b").run()
    c = Replica(async_client, shards, "host/3/c").run()
    watch = Watch([a, b, c], shards)

    joined_s = await _converge(async_client, shards, [5, 5, 6], timeout_s=20 * TTL_S)
    seeder = [Seeder(async_client, p) for p in shards]
    for i, s in enumerate(seeder):
        await s.outbox("t", f"e{i}")
    await until(lambda: sum(len(r.sink.delivered) for r in (a, b, c)) == 16)
    await b.finish()
    gone = "host/2/b" not in await read_members(async_client, Keyspace(shards[0]))  # left, not expired
    left_s = await _converge(async_client, shards, [8, 8], timeout_s=20 * TTL_S)
    d = Replica(async_client, shards, "host/4/d").run()
    watch.replicas.append(d)
    rejoined_s = await _converge(async_client, shards, [5, 5, 6], timeout_s=20 * TTL_S)
    await asyncio.sleep(TTL_S)  # settled: nothing moves any more
    settled = await _holders(async_client, shards)
    await asyncio.sleep(TTL_S)
    await watch.close()

    print(f"join {joined_s:.2f}s, leave {left_s:.2f}s, rejoin {rejoined_s:.2f}s (TTL {TTL_S}s)")
    delivered = [e.body["prefix"] for r in (a, b, c) for e in r.sink.delivered]
    assert sorted(delivered) == sorted(shards)  # each prefix's entry once, by one replica
    assert watch.overlaps == []
    assert watch.samples > 20  # it sampled throughout (fewer on a loaded machine, never none)
    assert await _holders(async_client, shards) == settled
    assert b.transitions("released") >= 5  # handed back cleanly on the way out
    assert gone
    for r in (a, c, d):
        await r.finish()
    assert await _shares(async_client, shards) == Counter()
    assert await read_members(async_client, Keyspace(shards[0])) == []


@pytest.mark.slow
@pytest.mark.usefixtures("backend", "tokens")
async def test_survivors_take_over_a_dead_replicas_prefixes_within_about_a_ttl(async_client, shards):
    replicas = [Replica(async_client, shards[:8], f"host/{i}/r{i}").run() for i in range(2)]
    await _converge(async_client, shards[:8], [4, 4], timeout_s=20 * TTL_S)
    late = Replica(async_client, shards[:8], "host/9/late").run()
    await _converge(async_client, shards[:8], [2, 3, 3], timeout_s=20 * TTL_S)
    victim = max([*replicas, late], key=lambda r: sum(r.active(p) for p in shards[:8]))
    orphaned = [p for p in shards[:8] if victim.active(p) == 1]

    released_before = victim.transitions("released")  # from rebalancing while "late" joined

    await victim.die()
    died = time.monotonic()
    assert victim.transitions("released") == released_before  # it gave nothing back: the TTL frees its leases
    taken_s = await _converge(async_client, shards[:8], [4, 4], timeout_s=20 * TTL_S)
    for i, p in enumerate(shards[:8]):
        await Seeder(async_client, p).outbox("t", f"after-{i}")
    survivors = [r for r in [*replicas, late] if r is not victim]
    await until(lambda: sum(len(r.sink.delivered) for r in survivors) == 8)

    print(f"dead replica's {len(orphaned)} prefixes taken over {time.monotonic() - died:.2f}s after death")
    assert taken_s < 6 * TTL_S  # about a TTL; room for a loaded machine
    assert victim.token not in set(await _holders(async_client, shards[:8]))
    assert sum(r.transitions("acquired") for r in survivors) >= 8 + len(orphaned) - 3
    for r in survivors:
        await r.finish()
