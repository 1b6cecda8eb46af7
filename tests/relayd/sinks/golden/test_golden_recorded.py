"""The golden files themselves: each belongs to a case, and ``check`` fails on one changed byte."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.golden import RECORD_VARIABLE

from . import conftest as golden


def test_every_case_has_a_recorded_file_and_every_file_a_case() -> None:
    """While recording, the files of cases not run yet may still be missing: only strays count."""
    recorded = {path.stem for path in golden.RECORDED.glob("*.json")}
    assert {path.suffix for path in golden.RECORDED.iterdir()} == {".json"}
    if os.environ.get(RECORD_VARIABLE) == "1":
        assert recorded <= golden.CASES
    else:
        assert recorded == golden.CASES


def test_check_fails_with_a_diff_on_one_changed_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(golden, "RECORDED", tmp_path)
    monkeypatch.delenv(RECORD_VARIABLE, raising=False)
    (tmp_path / "webhook.json").write_text(
        golden.render({"body": golden.payload(b'{"a":1}')}), encoding="utf-8"
    )

    golden.check("webhook", {"body": golden.payload(b'{"a":1}')})
    with pytest.raises(pytest.fail.Exception) as failed:
        golden.check("webhook", {"body": golden.payload(b'{"a":2}')})

    assert '-    "text": "{\\"a\\":1}"\n+    "text": "{\\"a\\":2}"' in str(failed.value)


def test_recording_is_refused_under_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(golden, "RECORDED", tmp_path)
    monkeypatch.setenv(RECORD_VARIABLE, "1")
    monkeypatch.setenv("CI", "true")

    with pytest.raises(pytest.fail.Exception, match="under CI"):
        golden.check("webhook", {"body": golden.payload(b"{}")})
    assert not (tmp_path / "webhook.json").exists()
