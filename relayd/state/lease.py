"""The per-prefix lease that makes one replica the active one (docs/internals.md#delivery-semantics).

The holder ``SET``s ``P:relay:lease`` to a fresh token with ``NX PX ttl``, extends it every third
of the TTL with a compare-and-pexpire script and deletes it with compare-and-delete on a clean
shutdown. Each acquisition is a *term* with a token of its own, ``{member}#{term}``: the replica's
member token (``hostname/pid/random``, one per process) and a random part new on every ``SET NX``,
so Redis tells a replica's first term from its third, and a pass bound to an old term is refused
even after its replica took the lease again.

A holder counts the lease as its own only until its *deadline*, ``sent + ttl`` minus a safety margin
(monotonic clock), where ``sent`` is when the last successful acquire/renew was *sent*: if the
process was paused or Redis was slow, it stops sending and acking on its own before a standby can
take over. What it sends after all (a pause between the check and the write) is caught by Redis:
every ack script checks that the lease still holds ``token`` in the same call (``fence``,
``store.Fence``).
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from relayd.state import RedisClient, scripts
from relayd.state.keys import RelayKeys
from store import Fence, Keyspace

#: The lease stops counting as ours this fraction of its TTL before Redis would expire it: room
#: for the time between the local check and the command reaching Redis, and for clock rate drift.
SAFETY_FRACTION: Final = 0.1


def make_token() -> str:
    """A token naming this replica for ``relayd status``: ``hostname/pid/random``."""
    return f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(4)}"


#: Between a replica's member token and its term in a lease token.
TERM_SEPARATOR: Final = "#"


def lease_member(token: str) -> str:
    """The member token of the replica whose lease token is ``token`` (its term dropped)."""
    return token.split(TERM_SEPARATOR, 1)[0]


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    """Who holds a prefix's lease and for how much longer."""

    token: str
    ttl_ms: int

    @property
    def holder(self) -> str:
        """``hostname/pid`` of the active replica (the token without its random parts)."""
        return lease_member(self.token).rsplit("/", 1)[0]


async def read_lease(client: RedisClient, keyspace: Keyspace) -> LeaseInfo | None:
    """Return the current holder of ``keyspace``'s lease, or None when no replica is active."""
    key = RelayKeys(keyspace).lease
    pipe = client.pipeline(transaction=False)
    pipe.get(key)
    pipe.pttl(key)
    token, ttl_ms = await pipe.execute()
    if token is None:
        return None
    text = token.decode("utf-8", "replace") if isinstance(token, bytes) else str(token)
    return LeaseInfo(token=text, ttl_ms=max(int(ttl_ms), 0))


class Lease:
    """One replica's view of one prefix's lease. Not safe to share between event loops."""

    def __init__(
        self,
        client: RedisClient,
        keyspace: Keyspace,
        *,
        ttl_s: float,
        monotonic: Callable[[], float],
        token: str | None = None,
    ) -> None:
        self._client = client
        self._key = RelayKeys(keyspace).lease
        self._ttl_ms = max(int(ttl_s * 1000), 1)
        self._valid_s = self.ttl_s * (1 - SAFETY_FRACTION)
        self._monotonic = monotonic
        #: This replica's member token; ``token`` is the lease token of its current term.
        self.member = token or make_token()
        self.token = self.member
        #: A term's token sent with a ``SET NX`` whose reply never came: tried again first.
        self._unconfirmed: str | None = None
        self._valid_until: float | None = None
        #: When the last successful acquire or renewal was sent (monotonic s); None: never.
        self.sent_s: float | None = None

    @property
    def ttl_s(self) -> float:
        return self._ttl_ms / 1000.0

    @property
    def fence(self) -> Fence:
        """The guard every ack script checks: the lease key still holds our token."""
        return Fence(self._key, self.token)

    @property
    def deadline_s(self) -> float | None:
        """Monotonic seconds until which the lease counts as ours; None when it does not."""
        return self._valid_until

    def held(self) -> bool:
        """Whether this replica may send and ack now: it holds the lease, its deadline ahead."""
        return self._valid_until is not None and self._monotonic() < self._valid_until

    def holds(self, token: str) -> bool:
        """``held``, and still in the term whose token is ``token`` (a pass is bound to its term)."""
        return self.token == token and self.held()

    async def acquire(self) -> bool:
        """Take the lease if it is free, in a new term; returns whether we hold it."""
        sent = self._monotonic()
        retried = self._unconfirmed  # a SET NX whose reply was lost: it may have landed
        candidate = retried or f"{self.member}{TERM_SEPARATOR}{secrets.token_hex(4)}"
        self._unconfirmed = candidate
        if await self._client.set(self._key, candidate, nx=True, px=self._ttl_ms):
            self._unconfirmed = None
            self.token = candidate
            self._valid_until, self.sent_s = sent + self._valid_s, sent
            return True
        self._unconfirmed = None
        # Ours already (an acquire whose reply was lost, or a term we still hold): extend it. A
        # fresh candidate or a member token that never held a term cannot be the lease's value.
        ours = [t for t in (retried, self.token) if t is not None and t != self.member]
        for token in dict.fromkeys(ours):
            self.token = token
            if await self.renew():
                return True
        return False

    async def renew(self) -> bool:
        """Extend the lease if we still hold it; on False we have lost it and must stop."""
        sent = self._monotonic()
        extended = await self._client.eval(scripts.LEASE_RENEW, 1, self._key, self.token, str(self._ttl_ms))
        if int(extended) == 1:
            self._valid_until, self.sent_s = sent + self._valid_s, sent
            return True
        self._valid_until = None
        return False

    def extended(self, sent_s: float) -> None:
        """Someone else's script (the membership beat) sent at ``sent_s`` renewed the lease.

        Ignored once the lease is no longer counted as ours (released or lost meanwhile).
        """
        if self._valid_until is not None:
            self._valid_until = max(self._valid_until, sent_s + self._valid_s)
            self.sent_s = max(self.sent_s or sent_s, sent_s)

    def forget(self) -> None:
        """Stop counting the lease as ours (renewal failed with an error)."""
        self._valid_until = None

    async def release(self) -> bool:
        """Delete the lease if we hold it, so a standby takes over at once.

        It stops counting as ours before the command goes out: should the command fail, the
        lease expires on its own within the TTL, and we deliver no more meanwhile.
        """
        self.forget()
        released = await self._client.eval(scripts.LEASE_RELEASE, 1, self._key, self.token)
        return int(released) == 1
