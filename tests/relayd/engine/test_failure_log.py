"""Why deliveries fail, rate-limited: one line per target per interval, a summary of the rest."""

from __future__ import annotations

from structlog.testing import capture_logs

from relayd.engine.failure_log import FailureDigest, FailureLog


def _fail(log: FailureLog, target: str, now_s: float, error: str = "http 503") -> None:
    log.failed(
        kind="outbox",
        target=target,
        id=f"p:outbox:{now_s:g}",
        error=error,
        attempt=2,
        retry_in_s=1.5,
        now_s=now_s,
    )


def test_the_first_failure_of_each_target_gets_a_line_with_its_reason():
    log = FailureLog("p", digest=FailureDigest(interval_s=60))
    with capture_logs() as lines:
        _fail(log, "a", 0.0)
        _fail(log, "b", 1.0, error="webhook connection error (Connection refused)")
        _fail(log, "a", 2.0)
        _fail(log, "a", 3.0)

    assert lines == [
        {
            "event": "delivery_failed", "log_level": "warning", "prefix": "p", "kind": "outbox",
            "target_id": "a", "id": "p:outbox:0", "error": "http 503", "attempt": 2, "retry_in_s": 1.5,
        },
        {
            "event": "delivery_failed", "log_level": "warning", "prefix": "p", "kind": "outbox",
            "target_id": "b", "id": "p:outbox:1", "error": "webhook connection error (Connection refused)",
            "attempt": 2, "retry_in_s": 1.5,
        },
    ]  # fmt: skip


def test_an_outage_of_many_targets_is_bounded_lines_then_one_summary_per_interval():
    log = FailureLog("p", digest=FailureDigest(interval_s=60, max_lines=3))
    with capture_logs() as lines:
        for round_ in range(5):  # 100 targets failing five times each within one interval
            for target in range(100):
                _fail(log, f"t{target}", now_s=round_ * 10.0)
        log.flush(59.0)
        before_the_interval_ends = len(lines)
        log.flush(61.0)
        _fail(log, "t0", now_s=62.0)  # a new interval: its first failure has a line again

    assert before_the_interval_ends == 3
    assert [line["target_id"] for line in lines[:3]] == ["t0", "t1", "t2"]
    assert lines[3] == {
        "event": "delivery_failures", "log_level": "warning", "prefix": "p", "interval_s": 61.0,
        "failures": 497, "targets": 100, "errors": {"http 503": 497},
    }  # fmt: skip
    assert (lines[4]["event"], lines[4]["target_id"]) == ("delivery_failed", "t0")
    assert len(lines) == 5


def test_no_summary_when_every_failure_had_its_line():
    digest = FailureDigest(interval_s=60)

    assert digest.note("timer", "exe-1", "http 500", 0.0)
    assert digest.roll(120.0) is None
    assert digest.note("timer", "exe-1", "http 500", 121.0)
