"""A fence: a write that goes through only while a guard key still holds the writer's token.

A relay acks (deletes) entries only while it holds its prefix's lease. Checking the lease and
then deleting would be two calls, and a process paused between them acks after another replica
has taken over; with a ``Fence`` the check and the write are one Lua call, so a write whose
guard no longer holds the token is refused by Redis (``StoreFenced``) and changes nothing.
The store does not know what the guard key means; the caller names it.

Every fenced script, the store's and relayd's (``relayd/state/scripts``), keeps one convention,
so one place here builds its call (``fenced_call``) and one recognises its refusal
(``fenced_refusal``). A *fenced read* hands over what it found only while the guard holds the
token: it sends ``guard_read`` first in its round-trip and passes that reply to
``check_guard``. The fenced scripts' convention:

- the guard key is the **last** of KEYS, present only when the call is fenced;
- the caller's token is **ARGV[1]**, present only when the call is fenced (the script's own
  arguments follow it);
- a fenced call first checks ``redis.call('GET', KEYS[n]) ~= ARGV[1]`` (``n`` the last key) and,
  when the guard holds another token or none, replies the error ``FENCED_TAG``, writing nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from store.errors import StoreFenced

#: The error reply of every fenced script whose guard holds another token (or none).
FENCED_TAG: Final = "RELAYD_FENCED"

#: One argument of a script call, as redis-py encodes it.
Arg: TypeAlias = bytes | str | float


@dataclass(frozen=True, slots=True)
class Fence:
    """Write only while ``GET key == token``; ``key`` must share the written keys' cluster slot."""

    key: str
    token: str


def fenced_call(keys: Sequence[str], args: Sequence[Arg], fence: Fence | None) -> tuple[list[str], list[Arg]]:
    """KEYS and ARGV of a fenced script call: the guard key last, the token first (unfenced: as given)."""
    if fence is None:
        return list(keys), list(args)
    return [*keys, fence.key], [fence.token, *args]


def fenced_refusal(exc: BaseException, fence: Fence | None) -> StoreFenced | None:
    """``StoreFenced`` when ``exc`` is a fenced script's refusal of ``fence``'s write, else None."""
    if fence is not None and FENCED_TAG in str(exc):
        return StoreFenced(fence.key)
    return None


def guard_read(fence: Fence) -> tuple[str, str]:
    """The command a fenced read sends first in its round-trip: ``GET`` of the guard key."""
    return ("GET", fence.key)


def check_guard(fence: Fence, holder: bytes | str | None, *, found: Iterable[object]) -> None:
    """Raise ``StoreFenced`` unless ``holder`` (the reply of ``guard_read``) is ``fence``'s token.

    ``found``: what the read found (``None`` for a place it found empty); the refusal names how
    many it withholds, counted only when it refuses.
    """
    if holder != fence.token and holder != fence.token.encode():
        raise StoreFenced(fence.key, withheld=sum(entry is not None for entry in found))
