"""Passes are logged at info once per interval, summed, never once per pass."""

from __future__ import annotations

import structlog

from relayd.engine.pass_log import INTERVAL_S, PassLog
from relayd.engine.passes import PassResult


def _worked(delivered: int = 1, retried: int = 0, dead: int = 0) -> PassResult:
    return PassResult(
        delivered={"outbox": delivered},
        retried={"outbox": retried},
        dead_lettered={"spawn": dead},
        read=delivered + retried + dead,
        attempted=delivered + retried + dead,
    )


def test_a_thousand_passes_in_an_interval_make_one_line_with_their_sums():
    now = [100.0]
    passes = PassLog("p", lambda: now[0])

    with structlog.testing.capture_logs() as logs:
        for n in range(1000):  # 1000 passes over two and a half intervals
            now[0] = 100.0 + n * (2.5 * INTERVAL_S / 1000)
            passes.add(_worked(delivered=2, retried=1 if n % 10 == 0 else 0, dead=1 if n == 7 else 0))
        passes.flush()  # the loop ends

    lines = [entry for entry in logs if entry["event"] == "passes"]
    assert len(lines) == 3  # two whole intervals, and the remainder at the end
    assert all(line["log_level"] == "info" for line in lines)
    assert sum(line["passes"] for line in lines) == 1000
    assert sum(line["delivered"] for line in lines) == 2000
    assert sum(line["retried"] for line in lines) == 100
    assert sum(line["dead_lettered"] for line in lines) == 1
    assert lines[0]["passes"] == 401  # the pass that closes the interval is counted in it
    assert lines[0]["prefix"] == "p"


def test_an_idle_relay_logs_no_passes_line():
    now = [0.0]
    passes = PassLog("p", lambda: now[0])

    with structlog.testing.capture_logs() as logs:
        for n in range(100):
            now[0] = n * INTERVAL_S / 10
            passes.add(PassResult())
        passes.flush()

    assert [entry for entry in logs if entry["event"] == "passes"] == []
