"""Decide which prefixes this replica should hold: fair quotas and a stable assignment.

Replicas share prefixes the way a consumer group shares partitions. With N prefixes and M
live members each member's quota is ``N // M``; the ``N % M`` members left over get one more.
Those extras go first to the members that already hold the most (ties in token order), so a
settled group keeps its shape when nothing changes, and when nobody holds anything yet the
extras go to the first members in token order.

The assignment keeps what every member already holds (up to its quota, its most preferred
prefixes first) and gives the rest out by rendezvous hashing of ``(prefix, member)`` among
the members with room left. So a join, a leave or a death moves only the prefixes that must
move, and every replica that reads the same registry computes the same assignment.

The lease still decides who is active; this module only says which leases to try for and
which to give back. It assumes the replicas of one group serve the same prefix list (one
deployment with one ``--prefix`` setting): fairness is computed over the prefixes a replica
serves and the members registered on them.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PrefixView:
    """One prefix as the registry shows it: its live members and its lease holder."""

    prefix: str
    members: frozenset[str]
    #: Token holding the prefix's lease now; None when the lease is free.
    holder: str | None = None


@dataclass(frozen=True, slots=True)
class ShareDecision:
    """What one replica should do with its leases after looking at the registry."""

    #: How many prefixes this replica should hold.
    quota: int
    #: Live members the quota was computed over (this replica included).
    members: int
    #: The prefixes the assignment gives this replica.
    target: frozenset[str]
    #: Prefixes to try to take (a lease taken elsewhere simply fails to be acquired).
    acquire: frozenset[str]
    #: Prefixes held now that go back to the group (finish the pass, checkpoint, release).
    release: frozenset[str]


def preference(prefix: str, member: str) -> int:
    """Rendezvous score of ``member`` for ``prefix``: higher is preferred, same on every host."""
    digest = hashlib.blake2b(f"{prefix}\x00{member}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def fair_quotas(
    n_prefixes: int, members: Iterable[str], held: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Split ``n_prefixes`` over ``members``: floor for all, one more for the first ``N % M``.

    The first are those holding the most in ``held`` (a settled group keeps its extras), then
    in token order.
    """
    ordered = sorted(set(members))
    if not ordered:
        return {}
    held = held or {}
    base, extras = divmod(n_prefixes, len(ordered))
    ranked = sorted(ordered, key=lambda member: (-held.get(member, 0), member))
    return {member: base + (1 if rank < extras else 0) for rank, member in enumerate(ranked)}


def assign(
    prefixes: Sequence[str], quotas: Mapping[str, int], holders: Mapping[str, str | None]
) -> dict[str, str]:
    """Map each prefix to the member that should hold it, within ``quotas``.

    Current holders keep up to their quota (their most preferred prefixes first); the other
    prefixes go by rendezvous score to members with room. A prefix is left out only when the
    quotas sum to less than the prefixes (never, for quotas from ``fair_quotas``).
    """
    owner: dict[str, str] = {}
    load: Counter[str] = Counter()
    kept = sorted(
        ((preference(p, h), p, h) for p in prefixes if (h := holders.get(p)) is not None and h in quotas),
        reverse=True,
    )
    for _, prefix, holder in kept:
        if load[holder] < quotas[holder]:
            owner[prefix] = holder
            load[holder] += 1
    free = [p for p in prefixes if p not in owner]
    ranked = sorted(((preference(p, m), p, m) for p in free for m in quotas), reverse=True)
    for _, prefix, member in ranked:
        if prefix not in owner and load[member] < quotas[member]:
            owner[prefix] = member
            load[member] += 1
    return owner


def decide_shares(views: Sequence[PrefixView], me: str) -> ShareDecision:
    """Compute this replica's quota, its target prefixes, and the leases to take or give back.

    The group is every member seen live on any of the prefixes, plus ``me``. A lease held by
    a token that is not a live member (a one-shot job, a replica whose registration expired)
    counts as nobody's: the prefix is assigned, and its assignee takes it once it is free.
    """
    group = {me}.union(*(view.members for view in views))
    holders = {view.prefix: view.holder for view in views}
    held = Counter(holder for holder in holders.values() if holder in group)
    quotas = fair_quotas(len(views), group, held)
    owner = assign([view.prefix for view in views], quotas, holders)
    target = frozenset(prefix for prefix, member in owner.items() if member == me)
    mine = frozenset(prefix for prefix, holder in holders.items() if holder == me)
    return ShareDecision(
        quota=quotas[me],
        members=len(group),
        target=target,
        acquire=target - mine,
        release=mine - target,
    )
