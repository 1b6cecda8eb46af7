"""A secret value that never shows itself: not in a repr, a str, an error or a log line."""

from __future__ import annotations

from typing import Final

_MASK: Final = "**********"


class Secret:
    """Holds a password or token; only ``get_secret_value()`` hands it out."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret('{_MASK}')"

    def __str__(self) -> str:
        return _MASK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def strip_secret(text: str) -> str:
    """A secret file's value: its text without surrounding whitespace (the trailing newline too).

    Spaces, tabs, CR and LF before and after the value are dropped, so a file written by
    ``echo``, an editor or a Kubernetes Secret holds the same secret; whitespace inside it stays.
    """
    return text.strip()


def secret_lines(text: str) -> tuple[str, ...]:
    """The secrets of a multi-secret file: one a line, each stripped, blank lines skipped."""
    return tuple(line for line in (strip_secret(raw) for raw in text.splitlines()) if line)
