"""How the console's pages write values: times, durations, JSON and stored entries. Pure.

These are the Jinja2 filters every template may use (``rendering`` registers them); each takes
whatever the page holds and answers text, ``-`` when there is nothing sensible to show.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import orjson


def when(epoch_s: object) -> str:
    """An epoch time in UTC, to the second."""
    if not isinstance(epoch_s, int | float):
        return "-"
    return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def seconds(value: object) -> str:
    """A duration in seconds, or in minutes once it is two minutes or more."""
    if not isinstance(value, int | float):
        return "-"
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def pretty(value: object) -> str:
    """Indented JSON; what JSON cannot hold is shown as its text."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()


def stored_value(document: dict[str, object]) -> str:
    """The entry as it lived in Redis: pretty JSON when it parses, else the text as stored.

    The engine keeps an outbox event as a JSON string inside the JSON value (``"e"``); it is
    shown parsed, so the event reads as a document rather than an escaped line.
    """
    if "value" in document:
        text = str(document["value"])
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
        if isinstance(value, dict) and isinstance(value.get("e"), str):
            with contextlib.suppress(orjson.JSONDecodeError):
                value = {**value, "e": orjson.loads(value["e"])}
        return pretty(value)
    for name in ("member", "value_b64", "member_b64"):
        if name in document:
            return str(document[name]).replace("\x00", "\\x00")
    return "-"
