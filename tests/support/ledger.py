"""The ledger every fault case ends with: what was committed against what a sink received.

Committed ids are the delivery ids of docs/internals.md#key-space (``P:outbox:{seq}``, ``P:spawn:{seq}``,
``timeout:{execution_id}:{path}:{fire_at}``); delivered ids come from a ``jsonl`` sink file,
one ``relayd/1`` envelope per line. ``compute_ledger`` (pure) counts committed, delivered
(distinct committed ids seen), duplicates (deliveries beyond the first of an id), lost
(committed, never delivered: must be 0) and unexpected (delivered, never committed: a burned
seq or another case's entry). ``report_ledger`` prints it as one line (``pytest -s`` shows it)
and attaches it to the test report via ``record_property``; ``assert_ledger`` fails the test
with that line when the promise is broken.

A relay killed mid-write can leave a torn line in the jsonl file, with the next run's line
appended to it: ``parse_jsonl`` salvages the complete envelope at the end of such a line and
counts the tear.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson

#: How many lost ids a failure message lists (the count is always complete).
SHOWN_LOST_IDS = 10


@dataclass(frozen=True, slots=True)
class Delivery:
    """One envelope as a sink wrote it."""

    id: str
    kind: str


@dataclass(frozen=True, slots=True)
class JsonlRead:
    deliveries: tuple[Delivery, ...]
    torn_lines: int


def kind_of(entry_id: str) -> str:
    """``outbox``, ``spawn`` or ``timer`` from a delivery id's shape (docs/internals.md#key-space)."""
    if entry_id.startswith("timeout:"):
        return "timer"
    _, kind, _ = entry_id.rsplit(":", 2)
    return kind


def _envelope(text: str) -> Delivery | None:
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("id"), str):
        return None
    return Delivery(id=body["id"], kind=str(body.get("kind", "")))


def parse_jsonl(text: str) -> JsonlRead:
    """Read every envelope of a jsonl sink's output; salvage torn lines (see module doc)."""
    deliveries: list[Delivery] = []
    torn = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        found = _envelope(line)
        if found is None:
            torn += 1
            # a torn write followed by a whole one: the whole envelope starts at some later "{"
            start = line.find("{", 1)
            while found is None and start != -1:
                found = _envelope(line[start:])
                start = line.find("{", start + 1)
        if found is not None:
            deliveries.append(found)
    return JsonlRead(tuple(deliveries), torn)


def read_jsonl(path: Path) -> JsonlRead:
    """``parse_jsonl`` of a file; a file not written yet holds no deliveries."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return JsonlRead((), 0)
    return parse_jsonl(text)


@dataclass(frozen=True, slots=True)
class Ledger:
    """Committed versus delivered for one fault case."""

    case: str
    committed: int
    delivered: int
    duplicates: int
    lost: int
    unexpected: int
    recover_s: float | None = None
    torn_lines: int = 0
    #: per kind: (committed, delivered distinct)
    by_kind: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    lost_ids: tuple[str, ...] = ()

    def line(self) -> str:
        """The one-line summary a fault case prints."""
        kinds = " ".join(f"{kind}={done}/{total}" for kind, (total, done) in sorted(self.by_kind.items()))
        recover = "-" if self.recover_s is None else f"{self.recover_s:.2f}"
        return (
            f"ledger case={self.case} committed={self.committed} delivered={self.delivered} "
            f"duplicates={self.duplicates} lost={self.lost} unexpected={self.unexpected} "
            f"recover_s={recover} torn_lines={self.torn_lines} {kinds}"
        ).rstrip()


def compute_ledger(
    case: str,
    committed: Iterable[str],
    delivered: Iterable[str],
    *,
    recover_s: float | None = None,
    torn_lines: int = 0,
) -> Ledger:
    """Count what was delivered of what was committed (pure)."""
    committed_ids = list(dict.fromkeys(committed))
    seen = Counter(delivered)
    committed_set = set(committed_ids)
    lost = [entry for entry in committed_ids if entry not in seen]
    by_kind: dict[str, tuple[int, int]] = {}
    for entry in committed_ids:
        total, done = by_kind.get(kind_of(entry), (0, 0))
        by_kind[kind_of(entry)] = (total + 1, done + (entry in seen))
    return Ledger(
        case=case,
        committed=len(committed_ids),
        delivered=len(committed_set & seen.keys()),
        duplicates=sum(count - 1 for count in seen.values()),
        lost=len(lost),
        unexpected=len(seen.keys() - committed_set),
        recover_s=recover_s,
        torn_lines=torn_lines,
        by_kind=by_kind,
        lost_ids=tuple(lost[:SHOWN_LOST_IDS]),
    )


def ledger_from_jsonl(
    case: str, committed: Iterable[str], path: Path, *, recover_s: float | None = None
) -> Ledger:
    """``compute_ledger`` over what a jsonl sink wrote to ``path``."""
    read = read_jsonl(path)
    return compute_ledger(
        case,
        committed,
        (d.id for d in read.deliveries),
        recover_s=recover_s,
        torn_lines=read.torn_lines,
    )


def report_ledger(ledger: Ledger, record_property: Callable[[str, object], None] | None = None) -> None:
    """Print the ledger line and attach it to the test's report (``record_property`` fixture)."""
    print(ledger.line())  # the ledger line is the case's output (pytest -s)
    if record_property is not None:
        record_property("ledger", ledger.line())


def assert_ledger(
    ledger: Ledger, *, max_duplicates: int | None = None, allow_unexpected: bool = False
) -> None:
    """Fail unless nothing was lost, nothing unknown delivered, and duplicates stay in bound."""
    problems = []
    if ledger.lost:
        problems.append(f"lost {ledger.lost}, e.g. {', '.join(ledger.lost_ids)}")
    if ledger.unexpected and not allow_unexpected:
        problems.append(f"{ledger.unexpected} delivered ids were never committed")
    if max_duplicates is not None and ledger.duplicates > max_duplicates:
        problems.append(f"{ledger.duplicates} duplicates > bound {max_duplicates}")
    assert not problems, f"{ledger.line()}: {'; '.join(problems)}"


class JsonlTail:
    """Follow a growing jsonl sink file, reading only what was appended since the last poll.

    A trailing line without its newline yet is kept back until it is complete.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: Counter[str] = Counter()
        self.torn_lines = 0
        self._offset = 0
        self._partial = b""

    def poll(self) -> int:
        """Read what was appended; returns how many envelopes it held."""
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except FileNotFoundError:
            return 0
        self._offset += len(chunk)
        complete, newline, rest = (self._partial + chunk).rpartition(b"\n")
        if not newline:
            self._partial = rest
            return 0
        self._partial = rest
        read = parse_jsonl(complete.decode("utf-8", errors="replace"))
        self.seen.update(d.id for d in read.deliveries)
        self.torn_lines += read.torn_lines
        return len(read.deliveries)


def wait_delivered(
    path: Path,
    committed: Iterable[str],
    *,
    since: float,
    timeout_s: float,
    poll_s: float = 0.05,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float | None:
    """Wait until the jsonl sink at ``path`` holds every committed id.

    Returns the time to recover: seconds from ``since`` (a ``monotonic()`` reading, normally
    when the fault ended) to the moment everything was delivered; None on timeout.
    """
    wanted = set(committed)
    tail = JsonlTail(path)
    deadline = monotonic() + timeout_s
    while True:
        tail.poll()
        if wanted <= tail.seen.keys():
            return monotonic() - since
        if monotonic() >= deadline:
            return None
        sleep(poll_s)
