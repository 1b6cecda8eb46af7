"""An example relayd sink: store every envelope in an SQLite table, one transaction per batch.

``sqlite:PATH`` (``sqlite:PATH?table=NAME`` to pick the table, default ``envelopes``). The table
is keyed by the envelope id, so a redelivered envelope is stored once (``INSERT OR IGNORE``):
relayd delivers at least once, and a good sink makes duplicates harmless. The batch is
committed before ``deliver`` returns, so an entry relayd acks is on disk.

It reads the batch a column at a time (``batch.ids()``, ``batch.keys()``, ``batch.render()``),
which a window of outbox entries answers without building an envelope per entry.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from relayd.errors import ConfigError, SinkError
from relayd.sinks import DELIVERED, Batch, Outcome, Retry, SinkOptions, SinkSpec

__all__ = ["SqliteSink"]

_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class SqliteSink:
    """The factory relayd calls: ``SqliteSink(spec, options)`` (no I/O until ``start``)."""

    name = "sqlite"

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        path, _, query = spec.target.partition("?")
        if not path:
            raise ConfigError("sink 'sqlite' needs a path: 'sqlite:PATH'")
        params = dict(part.partition("=")[::2] for part in query.split("&") if part)
        self.table = params.get("table", "envelopes")
        if not _TABLE.fullmatch(self.table):
            raise ConfigError(f"sink 'sqlite': table must be an identifier, got {self.table[:40]!r}")
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None
        self._healthy = True

    async def start(self) -> None:
        try:
            self._db = await asyncio.to_thread(self._open)
        except sqlite3.Error as exc:
            raise SinkError(f"sink 'sqlite': cannot open {str(self.path)!r}: {exc}") from exc

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} "
            "(id TEXT PRIMARY KEY, kind TEXT NOT NULL, ordering_key TEXT, body TEXT NOT NULL)"
        )
        return db

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        if self._db is None:
            raise SinkError("sink 'sqlite' delivered to before start()")
        kind = batch.kind
        rows = [
            (id_, kind, key, body.decode())
            for id_, key, body in zip(batch.ids(), batch.keys(), batch.render(), strict=True)
        ]
        try:
            await asyncio.to_thread(self._insert, self._db, rows)
        except sqlite3.OperationalError as exc:  # locked, disk full: worth another try
            self._healthy = False
            return [Retry(error=f"sqlite: {exc}")] * len(batch)
        self._healthy = True
        return [DELIVERED] * len(batch)

    def _insert(self, db: sqlite3.Connection, rows: list[tuple[str, str, str | None, str]]) -> None:
        with db:  # one transaction: all of the batch or none of it
            db.execute("BEGIN")
            # the table name was checked against _TABLE: an identifier, never free text
            db.executemany(f"INSERT OR IGNORE INTO {self.table} VALUES (?, ?, ?, ?)", rows)  # noqa: S608

    def ready(self) -> bool:
        return self._healthy

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await asyncio.to_thread(db.close)
