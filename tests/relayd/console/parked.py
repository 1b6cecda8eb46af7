"""Park dead letters directly (as the relay's dead-letter script leaves them), for console tests."""

from __future__ import annotations

from typing import Any

from relayd.state.deadletters import encode_dead_letter
from relayd.state.keys import RelayKeys
from store.keys import Keyspace


def park_outbox(
    client: Any,
    prefix: str,
    seqs: range,
    *,
    reason_code: str = "permanent",
    reason: str = "webhook answered 500 for order-{seq}",
    target: str = "order-{seq}",
) -> list[str]:
    """Park outbox dead letters for ``seqs`` (sync client); return their ids."""
    keys = RelayKeys(Keyspace(prefix))
    ids, mapping = [], {}
    for seq in seqs:
        id_ = f"{prefix}:outbox:{seq}"
        envelope = {"kind": "outbox", "id": id_, "seq": seq, "target_id": target.format(seq=seq),
                    "event": {"id": f"e{seq}", "kind": "Ping", "data": {}}}  # fmt: skip
        mapping[id_] = encode_dead_letter(
            id_=id_, kind="outbox", reason_code=reason_code, reason=reason.format(seq=seq), attempts=3,
            first_attempt_at=100.0, last_attempt_at=160.0, dead_at=170.0, envelope=envelope,
            field=str(seq), seq=seq, value=b'{"t": "x", "e": "{}"}',
        )  # fmt: skip
        ids.append(id_)
    if mapping:
        client.hset(keys.dead("outbox"), mapping=mapping)
    return ids


def park_timers(client: Any, prefix: str, count: int) -> list[str]:
    keys = RelayKeys(Keyspace(prefix))
    mapping = {}
    for n in range(count):
        id_ = f"timeout:exe-{n}:wait:{float(n)}"
        mapping[id_] = encode_dead_letter(
            id_=id_, kind="timer", reason_code="bad_member", reason="bad_member: no NUL", attempts=0,
            first_attempt_at=None, last_attempt_at=None, dead_at=5.0, envelope=None,
            member=f"exe-{n}wait".encode(), fire_at=float(n),
        )  # fmt: skip
    client.hset(keys.dead("timer"), mapping=mapping)
    return list(mapping)
