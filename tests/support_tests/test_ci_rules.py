"""support.ci_rules: a skip is a skip locally and a failure under CI; xfail stays xfail."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parents[1]

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

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    assert False

def test_runs():
    assert True
"""


def _run(tmp_path: Path, *, ci: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_inner.py").write_text(INNER)
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PYTHONPATH": str(TESTS_DIR)}
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "support.ci_rules", "-p", "no:cacheprovider", "-q", "-rA"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("ci", [False, True], ids=["local", "ci"])
def test_a_skip_fails_only_under_ci(tmp_path: Path, ci: bool) -> None:
    result = _run(tmp_path, ci=ci)
    summary = result.stdout.strip().splitlines()[-1]

    if ci:
        assert result.returncode == 1, result.stdout
        # a skip raised in the test fails it; one from a mark (setup) reports as an error
        assert "2 failed, 1 passed, 1 xfailed, 1 error" in summary
        reason = "skipped under CI, where every test must run: relayd-no-such-program not on PATH"
        assert reason in result.stdout
    else:
        assert result.returncode == 0, result.stdout
        assert "1 passed, 3 skipped, 1 xfailed" in summary


def test_the_suite_itself_runs_under_the_rule(pytestconfig: pytest.Config) -> None:
    """The root conftest loads the rule for every run (the inner runs above pass ``-p``): without
    it a skip in CI would go green again."""
    assert pytestconfig.pluginmanager.has_plugin("support.ci_rules")
