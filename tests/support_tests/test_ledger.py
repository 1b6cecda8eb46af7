"""The ledger: committed against delivered, duplicates, lost, torn jsonl lines, recovery time."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support.ledger import (
    JsonlTail,
    assert_ledger,
    compute_ledger,
    kind_of,
    ledger_from_jsonl,
    parse_jsonl,
    report_ledger,
    wait_delivered,
)

COMMITTED = ["p:outbox:1", "p:outbox:2", "p:spawn:1", "timeout:e1:root.wait:1700000000.5"]


def _line(entry_id: str, kind: str = "outbox") -> str:
    return orjson.dumps({"v": "relayd/1", "kind": kind, "id": entry_id, "attempt": 1}).decode()


@pytest.mark.parametrize(
    ("entry_id", "kind"),
    [
        ("stm:outbox:12", "outbox"),
        ("{shard-7}:spawn:3", "spawn"),
        ("timeout:exe-1:root.a:b:1700000000.25", "timer"),
    ],
    ids=["outbox", "spawn-hash-tagged", "timer-with-colons"],
)
def test_kind_of_reads_the_delivery_id_shape(entry_id: str, kind: str) -> None:
    assert kind_of(entry_id) == kind


def test_ledger_counts_delivered_duplicates_lost_and_unexpected() -> None:
    """Distinct deliveries count once; repeats are duplicates; unknown ids are unexpected."""
    delivered = ["p:outbox:2", "p:outbox:2", "p:spawn:1", "p:spawn:1", "p:spawn:1", "p:outbox:9"]

    ledger = compute_ledger("case-a", COMMITTED, delivered, recover_s=1.5)

    assert (ledger.committed, ledger.delivered, ledger.duplicates) == (4, 2, 3)
    assert (ledger.lost, ledger.unexpected) == (2, 1)
    assert ledger.lost_ids == ("p:outbox:1", "timeout:e1:root.wait:1700000000.5")
    assert ledger.by_kind == {"outbox": (2, 1), "spawn": (1, 1), "timer": (1, 0)}


def test_ledger_line_is_one_line_with_every_figure() -> None:
    ledger = compute_ledger("kill-relay", COMMITTED, COMMITTED, recover_s=0.256)

    line = ledger.line()

    assert line == (
        "ledger case=kill-relay committed=4 delivered=4 duplicates=0 lost=0 unexpected=0 "
        "recover_s=0.26 torn_lines=0 outbox=2/2 spawn=1/1 timer=1/1"
    )


def test_assert_ledger_passes_a_clean_case_and_names_what_broke() -> None:
    """A clean ledger passes; lost entries, unknown ids and too many duplicates each fail."""
    assert_ledger(compute_ledger("ok", COMMITTED, [*COMMITTED, "p:outbox:1"]), max_duplicates=1)

    with pytest.raises(AssertionError, match=r"lost 1, e\.g\. p:spawn:1"):
        assert_ledger(compute_ledger("lost", COMMITTED, [c for c in COMMITTED if "spawn" not in c]))
    with pytest.raises(AssertionError, match="1 delivered ids were never committed"):
        assert_ledger(compute_ledger("extra", COMMITTED, [*COMMITTED, "p:outbox:7"]))
    with pytest.raises(AssertionError, match="2 duplicates > bound 1"):
        assert_ledger(compute_ledger("dups", COMMITTED, [*COMMITTED, *COMMITTED[:2]]), max_duplicates=1)


def test_torn_line_is_counted_and_the_whole_envelope_after_it_salvaged() -> None:
    """A write cut by SIGKILL, then the next run's line appended to it: the tear is counted once."""
    text = "\n".join([_line("p:outbox:1"), _line("p:outbox:2")[:17] + _line("p:outbox:2"), ""])

    read = parse_jsonl(text)

    assert [d.id for d in read.deliveries] == ["p:outbox:1", "p:outbox:2"]
    assert read.torn_lines == 1


def test_ledger_from_a_jsonl_file_and_a_missing_file(tmp_path: Path) -> None:
    sink = tmp_path / "sink.jsonl"
    assert ledger_from_jsonl("none-yet", COMMITTED, sink).lost == 4

    sink.write_text("".join(_line(c) + "\n" for c in COMMITTED))

    assert ledger_from_jsonl("all", COMMITTED, sink).lost == 0


def test_tail_reads_only_appended_complete_lines(tmp_path: Path) -> None:
    """A line still being written is held back until its newline arrives."""
    sink = tmp_path / "sink.jsonl"
    sink.write_text(_line("p:outbox:1") + "\n" + _line("p:outbox:2")[:10])
    tail = JsonlTail(sink)

    assert tail.poll() == 1
    with sink.open("a") as handle:
        handle.write(_line("p:outbox:2")[10:] + "\n")
    assert tail.poll() == 1

    assert dict(tail.seen) == {"p:outbox:1": 1, "p:outbox:2": 1}


def test_wait_delivered_returns_recovery_time_or_none(tmp_path: Path) -> None:
    """Time to recover runs from ``since``; a case that never completes returns None."""
    sink = tmp_path / "sink.jsonl"
    clock = iter([10.0, 10.5, 11.0, 11.5, 12.0, 12.5])
    writes = iter(COMMITTED)

    def sleep(_: float) -> None:
        with sink.open("a") as handle:
            handle.write(_line(next(writes)) + "\n")

    recovered = wait_delivered(
        sink, COMMITTED, since=9.0, timeout_s=30, monotonic=lambda: next(clock), sleep=sleep
    )

    assert recovered == 3.5  # four sleeps wrote the four entries; the fifth reading is 12.5
    assert wait_delivered(tmp_path / "never.jsonl", COMMITTED, since=0.0, timeout_s=0, sleep=sleep) is None


def test_report_prints_the_line_and_records_it(capsys: pytest.CaptureFixture[str]) -> None:
    ledger = compute_ledger("printed", COMMITTED, COMMITTED)
    recorded: list[tuple[str, object]] = []

    report_ledger(ledger, lambda name, value: recorded.append((name, value)))

    assert capsys.readouterr().out == ledger.line() + "\n"
    assert recorded == [("ledger", ledger.line())]
