"""Fair shares: quotas, the stable rendezvous assignment, and what a replica takes or gives back."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from relayd.engine.shares import PrefixView, assign, decide_shares, fair_quotas, preference

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
