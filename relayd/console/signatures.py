"""Reduce an error text to its signature: the same failure with other numbers and ids looks alike.

``webhook answered 503 for order-17 after 2.5s`` and ``webhook answered 503 for order-9 after
0.1s`` are one failure to an operator; grouping dead letters by signature shows it once.
"""

from __future__ import annotations

import re
from typing import Final

#: Longest signature kept, in characters (a stack trace is grouped by its head).
MAX_SIGNATURE_CHARS: Final = 160

# Order matters: the specific shapes first, so a UUID is not read as numbers and hex.
_RULES: Final = (
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<uuid>"),
    (re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I), "<url>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{12,}\b", re.I), "<hex>"),
    # An HTTP status stays: a 401, a 404 and a 422 are different failures.
    (re.compile(r"(?<!\w)(?<!http )\d+(?:\.\d+)?(?:e[-+]?\d+)?", re.I), "<n>"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "<str>"),
    (re.compile(r"\s+"), " "),
)


def error_signature(text: str) -> str:
    """Return ``text`` with numbers, ids, URLs and quoted values replaced by placeholders."""
    signature = text.strip()
    for pattern, placeholder in _RULES:
        signature = pattern.sub(placeholder, signature)
    return signature[:MAX_SIGNATURE_CHARS] or "(no error text)"
