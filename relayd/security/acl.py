"""The Redis ACL rule relayd needs for its prefixes, and nothing more (docs/acl.md).

Pure: prefixes in, rule text out. ``acl_rule`` gives the selectors of an ``ACL SETUSER``:
``resetkeys resetchannels -@all`` and then every command in ``COMMANDS`` (each with the part
of relayd that sends it), the key pattern ``~P:*`` of each prefix (relayd reads and writes
nothing else: the engine's keys, docs/internals.md#key-space, and its own ``P:relay:``), the
three keyspace channels wake-up subscribes to per prefix, and ``~STREAM`` and ``+xadd`` for
redis-stream destinations on the same server.

Left out on purpose:

- ``CONFIG``: wake-up only reads ``notify-keyspace-events`` with ``CONFIG GET`` and goes on
  without knowing when it is refused; ``CONFIG GET`` would also reveal every server setting.
- ``SELECT``: given only with ``db`` other than 0 (redis-py selects the URL's database).
- ``CLIENT SETINFO``: redis-py names its library with it on connect (Redis 7.2 and later) and
  goes on when refused; the server then notes one denial per connection in ``ACL LOG``.
  (``HELLO`` and ``AUTH`` are always permitted.)

``tests/e2e/test_acl.py`` runs every command of relayd as a user made from this rule and fails
on any denial the server logs (``ACL LOG``), so a command added to the code without being added
here fails that test.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from relayd.engine.notify import channel, watched_keys
from store import Keyspace, glob_escape

#: Every command relayd sends (including those its Lua scripts call), with who sends it.
COMMANDS: Final[Mapping[str, str]] = {
    "ping": "connect: the first PING",
    "time": "the engine's clock; members registry (scripts)",
    "get": "lease holder; the lease check of every fenced ack (scripts); reader cursors; status; "
    "dlq replay of a timer: its execution's version (script)",
    "mget": "dead-lettering a timer: its execution's version",
    "set": "lease: SET NX PX; reader cursors; the sinks' health for status",
    "del": "lease release (script); dlq purge (script)",
    "pexpire": "lease renewal; members registry (scripts)",
    "pttl": "the lease's time left",
    "exists": "attempt counts present; the idle probe; relayd pause: a relayd serves the prefix",
    "type": "the live keys' types (a key of the wrong type parks its kind); status",
    "hlen": "backlog and dead-letter counts; each backlog read (its hash's size); pending spawns",
    "hkeys": "the reader across a counter jump or reset (a hash of at most 64 reads' worth)",
    "hvals": "the children of pending spawns, while spawns wait beyond the spawn lane (bounded)",
    "hmget": "the backlog reader",
    "hscan": "the backlog reader's gap scan; dlq list; operator pauses (each relay, at most twice a second)",
    "hget": "dead letters (script), the oldest due age gauge",
    "hexists": "dead-lettering an outbox or spawn entry (script)",
    "hset": "attempt counts (script); dead letters (script); relayd pause",
    "hsetnx": "dlq replay (script)",
    "incr": "dlq replay: an outbox or spawn entry goes back under a new seq (script)",
    "hdel": "acks (script); attempts; dlq replay and purge; relayd resume",
    "zadd": "members registry; dlq replay of a timer (script)",
    "zrem": "timer acks (script); members",
    "zscore": "dead-lettering a timer (script); timer acks before Redis 6.2 (script)",
    "zmscore": "timer acks (script); held timers re-checked before they are sent again",
    "zrange": "members registry (script); the oldest timer",
    "zrangebyscore": "due timers; members",
    "zcount": "status: due timers",
    "zcard": "status: timers",
    "eval": "scripts, first run; the shared --sink-rate bucket (--sink-rate-scope cluster)",
    "evalsha": "scripts the store registers (fenced acks); the redis-stream sink's script",
    "script|load": "the same, when the server answers NOSCRIPT",
    "subscribe": "wake-up",
    "unsubscribe": "wake-up: a busy prefix leaves its channels",
    "zscan": "console: timers of one execution",
    "multi": "an audit record and its trim in one transaction",
    "exec": "the same",
    "lpush": "console and CLI actions (replay, purge, pause, resume): the audit record",
    "ltrim": "console: the audit log kept bounded",
    "lrange": "console: the audit page",
}
#: Added with a redis-stream destination on the same server (``streams``).
STREAM_COMMANDS: Final = ("xadd",)
#: Added when the database is not 0: redis-py selects it on every new connection.
SELECT: Final = "select"


def acl_rule(prefixes: Iterable[str], *, db: int = 0, streams: Iterable[str] = ()) -> str:
    """The ACL selectors for relayd on ``prefixes`` (``ACL SETUSER name reset on >pw <rule>``).

    ``streams`` are redis-stream sink destinations on the same server: a literal key, or a
    template whose ``{target}`` becomes ``*``; they add the key patterns and ``XADD``.
    """
    parts = ["resetkeys", "resetchannels", "-@all"]
    streams = list(streams)
    commands = [*COMMANDS, *(STREAM_COMMANDS if streams else ()), *([SELECT] if db else [])]
    parts += [f"+{command}" for command in commands]
    keyspaces = [Keyspace(prefix) for prefix in prefixes]
    parts += [f"~{glob_escape(keyspace.prefix)}:*" for keyspace in keyspaces]
    for stream in streams:
        parts.append("~" + "*".join(glob_escape(piece) for piece in stream.split("{target}")))
    for keyspace in keyspaces:
        parts += [f"&{glob_escape(channel(db, key))}" for key in watched_keys(keyspace)]
    return " ".join(dict.fromkeys(parts))
