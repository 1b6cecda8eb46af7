"""A short, redacted excerpt of an HTTP error answer's body, kept with the failure's reason.

A receiver's 422 usually says what it disliked ("missing field 'order_id'"); the dead letter
keeps that much, so an operator sees why without the receiver's logs. Bounded: at most
``READ_BYTES`` of the body are looked at and ``MAX_CHARS`` kept. Redacted: URL user info, bearer
and basic credentials, and the values of fields named like secrets (``token``, ``password``,
``api_key``, ...) become ``***``. Pure, and linear in its bounded input.
"""

from __future__ import annotations

import re
from typing import Final

#: Bytes of the body looked at.
READ_BYTES: Final = 1024
#: Characters of the excerpt kept.
MAX_CHARS: Final = 200

_REDACTIONS: Final = (
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^/\s@]+@", re.I), r"\1***@"),
    (re.compile(r"\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+", re.I), r"\1 ***"),
    (
        re.compile(
            r"""(["']?\b[\w-]{0,40}(?:token|secret|password|passwd|api[_-]?key|authorization|signature|cookie)"""
            r"""["']?\s*[:=]\s*["']?)[^"'\s,;&}]+""",
            re.I,
        ),
        r"\1***",
    ),
)
_SPACES: Final = re.compile(r"[\x00-\x20\x7f]+")


def body_excerpt(body: bytes) -> str:
    """The start of ``body`` on one line, credentials redacted, at most ``MAX_CHARS`` long."""
    text = _SPACES.sub(" ", body[:READ_BYTES].decode("utf-8", "replace")).strip()
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"
