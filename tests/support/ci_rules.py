"""Pytest plugin: under ``CI`` a skipped test is a failed test.

Locally a test may skip when the machine lacks what it needs (no ``redis-server``, no
``promtool``, no IPv6 loopback) and ``-ra`` says why. ``.ci/run`` installs everything and sets
``CI``, so there a skip can only mean a broken machine or a test that stopped running: either
way the run must fail, not go green with fewer tests. One rule for every skip, wherever it is
raised (``pytest.skip``, a ``skipif`` mark, a fixture, a module), instead of a check at each call
site; an ``xfail`` called at run time (not a mark) gives up on a test the same way and counts alike.
An ``xfail`` mark may only meet a failed assertion there: a connection refused (a server that is
not running) under an ``xfail`` mark fails too, so a mark cannot hide a missing server.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def _fail_skip(report: Any) -> None:
    if hasattr(report, "wasxfail"):
        reason = str(report.wasxfail)
    else:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
    report.outcome = "failed"
    report.longrepr = f"skipped under CI, where every test must run: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and in_ci()):
        return
    if _gave_up(item, report):
        _fail_skip(report)
    elif call.excinfo is not None and not call.excinfo.errisinstance(AssertionError):
        # An xfail mark expects a broken promise (a failed assertion), not a server that is
        # missing or refused: that error must not pass as the expected failure.
        report.outcome = "failed"
        report.longrepr = (
            "an xfail mark met an error, not a failed assertion, under CI: "
            f"{call.excinfo.typename}: {call.excinfo.value}"
        )


def _gave_up(item: pytest.Item, report: Any) -> bool:
    """A skip, or an ``xfail`` called from a test or fixture: both stop a test without running it.

    Only an ``xfail`` mark is a known failure the run may carry (``xfail_strict`` keeps it honest).
    """
    return not hasattr(report, "wasxfail") or item.get_closest_marker("xfail") is None


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and in_ci():  # a module-level skip
        _fail_skip(report)
