"""A fence: a write that goes through only while a guard key still holds the writer's token.

A relay acks (deletes) entries only while it holds its prefix's lease. Checking the lease and
then deleting would be two calls, and a process paused between them acks after another replica
has taken over; with a ``Fence`` the check and the write are one Lua call, so a write whose
guard no longer holds the token is refused by Redis (``StoreFenced``) and changes nothing.
The store does not know what the guard key means; the caller names it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Fence:
    """Write only while ``GET key == token``; ``key`` must share the written keys' cluster slot."""

    key: str
    token: str
