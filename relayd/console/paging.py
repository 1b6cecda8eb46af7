"""Page tokens for the dead-letter list: where the next page's HSCAN resumes.

A token is ``{kind}:{cursor}``: the kind being scanned and Redis's own HSCAN cursor in it. The
kinds are walked in ``KINDS`` order; cursor 0 of the last kind means the end. Because the
cursor is Redis's, a page costs the same at a thousand dead letters and at a million
(tests/benchmarks/bench_console.py). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from relayd.envelope import Kind


class PageTokenInvalid(ValueError):
    """A page token that this console did not hand out."""


@dataclass(frozen=True, slots=True)
class PagePosition:
    """Where a scan stands: ``kind_index`` into the kinds walked, and the HSCAN cursor there."""

    kind_index: int
    cursor: int

    def token(self, kinds: tuple[Kind, ...]) -> str:
        return f"{kinds[self.kind_index]}:{self.cursor}"


def start_position() -> PagePosition:
    return PagePosition(0, 0)


def read_token(token: str | None, kinds: tuple[Kind, ...]) -> PagePosition:
    """Parse a token against the kinds walked; None or empty means the first page."""
    if not token:
        return start_position()
    kind, sep, cursor = token.partition(":")
    if not sep or kind not in kinds or not cursor.isdigit() or len(cursor) > 20:
        raise PageTokenInvalid(f"invalid page token {token[:40]!r}")
    return PagePosition(kinds.index(kind), int(cursor))


def advance(position: PagePosition, next_cursor: int, kinds: tuple[Kind, ...]) -> PagePosition | None:
    """Where to go after a scan step returned ``next_cursor``; None once every kind is done."""
    if next_cursor != 0:
        return PagePosition(position.kind_index, next_cursor)
    if position.kind_index + 1 < len(kinds):
        return PagePosition(position.kind_index + 1, 0)
    return None
