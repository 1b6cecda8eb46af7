"""relayd's own keys all live under P:relay:."""

from __future__ import annotations

from relayd.state.keys import RelayKeys
from store.keys import Keyspace


def test_every_relay_key_is_under_the_relay_prefix():
    keys = RelayKeys(Keyspace("{stm}"))

    names = [keys.lease, keys.attempts("outbox"), keys.dead("timer"), keys.cursor("spawns")]

    assert names == [
        "{stm}:relay:lease",
        "{stm}:relay:attempts:outbox",
        "{stm}:relay:dead:timer",
        "{stm}:relay:cursor:spawns",
    ]
    assert keys.audit == "{stm}:relay:audit"
    assert [keys.live(k) for k in ("outbox", "spawn", "timer")] == [
        "{stm}:outbox",
        "{stm}:spawns",
        "{stm}:timers",
    ]
