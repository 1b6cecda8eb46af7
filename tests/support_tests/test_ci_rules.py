"""support.ci_rules: a skip is a skip locally and a failure under CI; xfail stays xfail."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest"]

INNER = """
import pytest
from support.binaries import require_binaries

def test_skips_itself():
    pytest.skip("no such thing here")

@pytest.mark.skipif(True, reason="marked")
def test_marked():
    pass

def test_needs_a_missing_program():
    require_binaries("relayd-no-such-program")

@pytest.fixture(scope="module")
def server_of_the_module():
    pytest.skip("no server for this module")

def test_needs_the_module_server(server_of_the_module):
    pass

@pytest.fixture(scope="session")
def broker_of_the_session():
    pytest.skip("no broker binary")  # as support.kafka and support.nats do

def test_needs_the_session_broker(broker_of_the_session):
    pass

def test_needs_a_missing_module():
    pytest.importorskip("relayd_no_such_module")

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    assert False

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure_meets_no_server():
    raise ConnectionRefusedError("no server on 127.0.0.1:1")

def test_gives_up_at_run_time():
    pytest.xfail("no broker today")

def test_runs():
    assert True
"""

#: A module that skips itself whole while it is collected.
SKIPPED_MODULE = """
import pytest

pytest.skip("nothing to test here", allow_module_level=True)

def test_never_collected():
    pass
"""


def _run(tmp_path: Path, *, ci: bool, workers: int) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_inner.py").write_text(INNER)
    (tmp_path / "test_skipped_module.py").write_text(SKIPPED_MODULE)
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PYTHONPATH": str(TESTS_DIR)}
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [
            *PYTEST,
            "-p",
            "support.ci_rules",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            "-n",
            str(workers),
            "--continue-on-collection-errors",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "xdist"])
@pytest.mark.parametrize("ci", [False, True], ids=["local", "ci"])
def test_a_skip_fails_only_under_ci(tmp_path: Path, ci: bool, workers: int) -> None:
    """Every way a test can skip (in the test, a mark, a module or session fixture as the broker
    fixtures do, ``importorskip``, the module itself) or
    give up at run time (``pytest.xfail``) fails under CI, with or without xdist workers (CI runs
    ``pytest -n 2``); an ``xfail`` mark stays an expected failure, unless what it met is an
    error rather than a failed assertion (a server refusing connections)."""
    result = _run(tmp_path, ci=ci, workers=workers)
    summary = result.stdout.strip().splitlines()[-1]

    if ci:
        assert result.returncode == 1, result.stdout
        # a skip raised in the test fails it; one in setup (a mark, a fixture) or collection errors
        assert "5 failed, 1 passed, 1 xfailed, 4 errors" in summary
        reasons = [
            "no broker today",
            "relayd-no-such-program not on PATH",
            "no such thing here",
            "marked",
            "no server for this module",
            "no broker binary",
            "could not import 'relayd_no_such_module'",
            "nothing to test here",
        ]
        hidden = "an xfail mark met an error, not a failed assertion, under CI: ConnectionRefusedError"
        assert hidden in result.stdout
        for reason in reasons:
            assert f"skipped under CI, where every test must run: {reason}" in result.stdout
    else:
        assert result.returncode == 0, result.stdout
        assert "1 passed, 7 skipped, 3 xfailed" in summary


def test_the_suite_itself_runs_under_the_rule(pytestconfig: pytest.Config) -> None:
    """The root conftest loads the rule for every run (the inner runs above pass ``-p``): without
    it a skip in CI would go green again."""
    assert pytestconfig.pluginmanager.has_plugin("support.ci_rules")
