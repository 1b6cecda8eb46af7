"""Golden files: what a test produced now, compared with what was recorded and committed.

``compare`` fails with a unified diff when they differ; with ``GOLDEN_RECORD=1`` it writes the
file instead (refused under CI: recordings are made on a workstation and reviewed in the diff).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Final

import pytest

from support.ci_rules import in_ci

RECORD_VARIABLE: Final = "GOLDEN_RECORD"


def compare(path: Path, text: str, *, shown: str, what: str) -> None:
    """Compare ``text`` with the file at ``path`` (named ``shown`` in messages); on a difference,
    fail saying ``what`` changed, with a unified diff. With ``GOLDEN_RECORD=1``, write it."""
    if os.environ.get(RECORD_VARIABLE) == "1":
        if in_ci():
            pytest.fail(f"{RECORD_VARIABLE}=1 under CI: record on a workstation and commit the files")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    if not path.is_file():
        pytest.fail(f"no recorded file {shown}: run with {RECORD_VARIABLE}=1 to record it", pytrace=False)
    recorded = path.read_text(encoding="utf-8")
    if text != recorded:
        diff = difflib.unified_diff(
            recorded.splitlines(keepends=True), text.splitlines(keepends=True), shown, "now"
        )
        pytest.fail(
            f"{what} changed ({RECORD_VARIABLE}=1 records it if meant):\n" + "".join(diff), pytrace=False
        )
