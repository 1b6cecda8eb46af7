"""Which dead letters a console view or action means: kind, reason, signature, target, event kind, id.

A ``DeadLetterFilter`` is read from a query string, written back to one (for links and the
audit record), tested against a decoded dead letter, and spelled as the equivalent
``relayd dlq`` command where the CLI can express it. Pure: no Redis, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Final
from urllib.parse import urlencode

import orjson

from relayd.console.signatures import error_signature
from relayd.envelope import KINDS, Kind
from relayd.state.deadletters import DeadLetter

#: Longest filter value accepted, in characters (a query string is not a payload).
MAX_VALUE_CHARS: Final = 200


class FilterInvalid(ValueError):
    """A filter value is not acceptable (unknown kind, too long)."""


@dataclass(frozen=True, slots=True)
class DeadLetterFilter:
    """Every field optional; an empty filter matches every dead letter.

    ``id`` matches exactly when ``exact_id`` is set (one HGET per kind), else as a substring.
    """

    kind: Kind | None = None
    reason_code: str | None = None
    signature: str | None = None
    target: str | None = None
    event_kind: str | None = None
    id: str | None = None
    exact_id: bool = False
    #: Found anywhere in the stored record: the value as stored, the envelope, the error text.
    text: str | None = None

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> DeadLetterFilter:
        """Read the filter from query or form parameters; blank values mean "any"."""
        values: dict[str, str | None] = {}
        for name in ("kind", "reason_code", "signature", "target", "event_kind", "id", "text"):
            value = (query.get(name) or "").strip()
            if len(value) > MAX_VALUE_CHARS:
                raise FilterInvalid(f"{name} is longer than {MAX_VALUE_CHARS} characters")
            values[name] = value or None
        kind = values.pop("kind")
        if kind is not None and kind not in KINDS:
            raise FilterInvalid(f"kind must be one of {', '.join(KINDS)}")
        exact = (query.get("exact_id") or "") in ("1", "on", "true")
        return cls(kind=kind, exact_id=exact and values["id"] is not None, **values)

    @property
    def is_empty(self) -> bool:
        return not any(getattr(self, f.name) for f in fields(self) if f.name != "exact_id")

    @property
    def narrows_within_kind(self) -> bool:
        """Whether anything besides the kind must be checked entry by entry."""
        return any((self.reason_code, self.signature, self.target, self.event_kind, self.id, self.text))

    def kinds(self) -> tuple[Kind, ...]:
        return KINDS if self.kind is None else (self.kind,)

    def matches(self, letter: DeadLetter) -> bool:  # noqa: PLR0911  # one early return per field
        """Whether ``letter`` passes every set field."""
        if self.kind is not None and letter.kind != self.kind:
            return False
        if self.reason_code is not None and letter.reason_code != self.reason_code:
            return False
        if self.signature is not None and error_signature(letter.reason) != self.signature:
            return False
        if self.id is not None and not (
            letter.id == self.id if self.exact_id else self.id.lower() in letter.id.lower()
        ):
            return False
        if self.text is not None and self.text.lower() not in orjson.dumps(letter.document).decode().lower():
            return False
        envelope = letter.envelope or {}
        if self.target is not None and str(envelope.get("target_id") or "") != self.target:
            return False
        if self.event_kind is not None:
            event = envelope.get("event")
            kind = event.get("kind") if isinstance(event, dict) else None
            if kind != self.event_kind:
                return False
        return True

    def to_query(self, **extra: str) -> str:
        """The query string that reads back as this filter (plus ``extra`` parameters)."""
        return urlencode({**self.as_record(), **extra})

    def describe(self) -> str:
        """A short human text: ``kind=outbox reason_code=permanent`` or ``all dead letters``."""
        parts = [f"{k}={v}" for k, v in self.as_record().items() if k != "exact_id"]
        return " ".join(parts) or "all dead letters"

    def as_record(self) -> dict[str, str]:
        """The set fields as ``from_query`` reads them back: the confirm form, links, the audit record."""
        return {k: ("1" if v is True else str(v)) for k, v in asdict(self).items() if v not in (None, False)}
