"""The example sink, resolved the way relayd resolves it: by name through its entry point."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from relayd.envelope import Envelope
from relayd.sinks import DELIVERED, Batch, SinkOptions, resolve_sink


def envelope(seq: int) -> Envelope:
    id_ = f"stm:outbox:{seq}"
    body: dict[str, object] = {"v": "relayd/1", "kind": "outbox", "id": id_, "prefix": "stm", "seq": seq}
    return Envelope(id=id_, kind="outbox", prefix="stm", attempt=1, body=body, ordering_key=f"t{seq % 2}")


async def test_envelopes_are_stored_once_even_when_redelivered(tmp_path: Path) -> None:
    """Each id is one row; redelivering a batch changes nothing."""
    path = tmp_path / "out.db"
    sink = resolve_sink(f"sqlite:{path}", SinkOptions())
    await sink.start()

    first = await sink.deliver(Batch.of([envelope(1), envelope(2)]))
    again = await sink.deliver(Batch.of([envelope(2), envelope(3)]))
    await sink.close()

    rows = (
        sqlite3.connect(path).execute("SELECT id, kind, ordering_key FROM envelopes ORDER BY id").fetchall()
    )
    assert [DELIVERED, DELIVERED] == list(first) == list(again)
    assert rows == [
        ("stm:outbox:1", "outbox", "t1"),
        ("stm:outbox:2", "outbox", "t0"),
        ("stm:outbox:3", "outbox", "t1"),
    ]
