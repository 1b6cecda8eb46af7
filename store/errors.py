"""The store's exceptions.

StoreError                 base of everything the store raises on purpose
├── StoreConflict          the version compare-and-set lost to another writer
├── StoreUnavailable       Redis could not be reached (wraps the redis-py error)
├── StoreFenced            a fenced write was refused: its guard key holds another token
└── MalformedEntry         a stored outbox/spawn/timer value cannot be decoded; ``reason``
                           is one of a small fixed set, so it can label a metric
"""

from __future__ import annotations

from typing import Final

#: The fixed set of reasons a stored entry is malformed (bounded metric label values).
MALFORMED_REASONS: Final = frozenset(
    {"bad_json", "missing_field", "bad_seq", "bad_member", "wrong_type", "not_utf8", "too_large", "too_deep"}
)


class StoreError(Exception):
    """Base of the store's own errors."""


class StoreConflict(StoreError):
    """A commit lost the optimistic version check; nothing was written."""

    def __init__(self, execution_id: str, expected: int | None = None, found: int | None = None) -> None:
        super().__init__(f"execution {execution_id!r}: expected version {expected}, found {found}")
        self.execution_id, self.expected, self.found = execution_id, expected, found


class StoreUnavailable(StoreError):
    """Redis did not answer (connection refused, timeout, authentication)."""


class StoreFenced(StoreError):
    """A fenced write or read (``store.Fence``) was refused: nothing was written, and a read
    handed over nothing (``withheld``: the entries it found and kept back)."""

    def __init__(self, key: str, withheld: int = 0) -> None:
        super().__init__(f"refused: {key!r} no longer holds this writer's token")
        self.key = key
        self.withheld = withheld


class MalformedEntry(StoreError):
    """A stored entry cannot be decoded. ``reason`` is in ``MALFORMED_REASONS``; ``detail`` is text."""

    def __init__(self, reason: str, detail: str = "") -> None:
        if reason not in MALFORMED_REASONS:
            raise ValueError(f"unknown malformed reason {reason!r}")
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail
