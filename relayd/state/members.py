"""The registry of live replicas per prefix: heartbeats in, members and lease holder out.

    P:relay:members   zset   {replica token -> expiry, epoch ms on the Redis server's clock}

Every replica of ``relayd sweep`` beats into the registry of each prefix it serves every third
of the lease TTL; a member whose expiry has passed is dead and is pruned by the next beat of
anyone. A clean shutdown removes the member at once. One beat is one script per prefix, all
prefixes in one pipeline; each script touches only its own prefix's keys (one Redis Cluster
slot when the prefix carries a hash tag).

Expiry is judged on the Redis server's clock (``TIME`` inside the script), the same clock
that expires the leases, so replicas on hosts whose clocks disagree still agree on who is
alive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from relayd.state import RedisClient
from relayd.state.keys import RelayKeys
from store import Keyspace

#: Suffix of the registry under ``P:relay:``.
MEMBERS_SUFFIX: Final = "members"
#: The registry key outlives its last member by this many TTLs, then Redis drops it.
_KEY_TTL_FACTOR: Final = 10
#: The key's TTL is refreshed on every this-many-th beat (beats come every third of a member
#: TTL, so it is refreshed at least every 4/3 member TTLs, far inside ``_KEY_TTL_FACTOR``).
_KEY_TTL_EVERY: Final = 4

# KEYS[1]  P:relay:members   the registry
# KEYS[2]  P:relay:lease     the prefix's lease (read; extended when ARGV[4] asks and it is ours)
# ARGV[1]  our token
# ARGV[2]  member TTL in milliseconds
# ARGV[3]  the registry key's own TTL in member TTLs, or 0 to leave the key's TTL alone
# ARGV[4]  the lease token of our term, to renew the lease (member TTL = lease TTL) if it still
#          holds it; '' for none
# Returns {the lease holder's member token or false, 1 if it extended the lease else 0,
# live member tokens...}.
# Idle cost (docs/internals.md#delivery-semantics): few commands in the common case. Expired
# members are filtered from the one ZRANGE and removed only when there are some; the key's
# TTL is refreshed only when the caller asks (every few beats: it lasts many member TTLs).
_BEAT: Final = """
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl_ms = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now_ms + ttl_ms, ARGV[1])
if tonumber(ARGV[3]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl_ms * tonumber(ARGV[3]))
end
local scored = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local holder = redis.call('GET', KEYS[2])
local renewed = 0
if ARGV[4] ~= '' and holder == ARGV[4] then
  renewed = redis.call('PEXPIRE', KEYS[2], ttl_ms)  -- the lease renewal rides on the beat
end
if holder then
  holder = string.match(holder, '^([^#]*)')  -- a lease token is {member}#{term}
end
local members, dead = {holder, renewed}, {}
for i = 1, #scored, 2 do
  if tonumber(scored[i + 1]) > now_ms then
    table.insert(members, scored[i])
  else
    table.insert(dead, scored[i])
  end
end
if #dead > 0 then
  redis.call('ZREM', KEYS[1], unpack(dead))
end
return members
"""

# KEYS[1]  P:relay:members
# Returns the live member tokens without registering anyone (for status).
_LIVE: Final = """
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now_ms, '+inf')
"""


def members_key(keyspace: Keyspace) -> str:
    """The registry key of one prefix."""
    return keyspace.relay(MEMBERS_SUFFIX)


@dataclass(frozen=True, slots=True)
class Registration:
    """What one beat saw on one prefix."""

    prefix: str
    members: frozenset[str]
    #: The member token of the lease's holder at the moment of the beat; None when no replica
    #: is active.
    holder: str | None
    #: The beat renewed our lease (asked for, and our token held it), as the script reported.
    renewed: bool = False


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class Membership:
    """One replica's registration on every prefix it serves."""

    def __init__(
        self, client: RedisClient, keyspaces: Sequence[Keyspace], *, token: str, ttl_s: float
    ) -> None:
        self._client = client
        self._keyspaces = tuple(keyspaces)
        self.token = token
        self._ttl_ms = max(int(ttl_s * 1000), 1)
        self._beats = 0

    async def beat(self, renew: Mapping[str, str] | None = None) -> list[Registration]:
        """Register (or refresh) this replica on every prefix; return what each registry holds.

        The lease of each prefix in ``renew`` (prefix -> the lease token of our term) is
        extended in the same script when that token still holds it (``Registration.renewed``):
        one command more instead of a renewal script.
        """
        renew = renew or {}
        key_ttl = _KEY_TTL_FACTOR if self._beats % _KEY_TTL_EVERY == 0 else 0
        self._beats += 1
        pipe = self._client.pipeline(transaction=False)
        for keyspace in self._keyspaces:
            keys = (members_key(keyspace), RelayKeys(keyspace).lease)
            term = renew.get(keyspace.prefix, "")
            pipe.eval(_BEAT, 2, *keys, self.token, str(self._ttl_ms), str(key_ttl), term)
        replies = await pipe.execute()
        seen = []
        for keyspace, reply in zip(self._keyspaces, replies, strict=True):
            holder, renewed, *members = reply
            seen.append(
                Registration(
                    prefix=keyspace.prefix,
                    members=frozenset(_text(m) for m in members),
                    holder=None if holder is None else _text(holder),
                    renewed=int(renewed) == 1,
                )
            )
        return seen

    async def leave(self) -> None:
        """Remove this replica from every registry (clean shutdown: the others rebalance now)."""
        pipe = self._client.pipeline(transaction=False)
        for keyspace in self._keyspaces:
            pipe.zrem(members_key(keyspace), self.token)
        await pipe.execute()


async def read_members(client: RedisClient, keyspace: Keyspace) -> list[str]:
    """Return the live members registered on ``keyspace``, in token order."""
    live = await client.eval(_LIVE, 1, members_key(keyspace))
    return sorted(_text(member) for member in live)
