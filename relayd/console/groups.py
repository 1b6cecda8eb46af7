"""Group dead letters by kind, reason code and error signature, largest group first. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from relayd.console.filters import DeadLetterFilter
from relayd.console.signatures import error_signature
from relayd.envelope import Kind
from relayd.state.deadletters import DeadLetter


@dataclass(frozen=True, slots=True)
class Group:
    """Dead letters that failed alike; ``example`` is one full reason text of the group."""

    kind: Kind
    reason_code: str
    signature: str
    count: int
    example: str

    def as_filter(self) -> DeadLetterFilter:
        return DeadLetterFilter(kind=self.kind, reason_code=self.reason_code, signature=self.signature)


def group_dead_letters(letters: Iterable[DeadLetter]) -> list[Group]:
    """Count ``letters`` per (kind, reason code, signature)."""
    counts: Counter[tuple[Kind, str, str]] = Counter()
    examples: dict[tuple[Kind, str, str], str] = {}
    for letter in letters:
        key = (letter.kind, letter.reason_code, error_signature(letter.reason))
        counts[key] += 1
        examples.setdefault(key, letter.reason)
    return [
        Group(kind=k, reason_code=r, signature=s, count=n, example=examples[(k, r, s)])
        for (k, r, s), n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def reason_counts(letters: Iterable[DeadLetter]) -> dict[str, int]:
    """Dead letters per reason code."""
    return dict(Counter(letter.reason_code for letter in letters).most_common())
