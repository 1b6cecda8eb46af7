"""tests.e2e.conftest.read_jsonl: what a test polling a file the daemon appends to may read."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.e2e.conftest import read_jsonl


def test_a_line_still_being_written_is_not_read_yet(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"id":"a"}\n{"id":"b"}\n{"id":"c","ki')

    assert read_jsonl(out) == [{"id": "a"}, {"id": "b"}]

    with out.open("ab") as file:
        file.write(b'nd":"outbox"}\n')
    assert read_jsonl(out) == [{"id": "a"}, {"id": "b"}, {"id": "c", "kind": "outbox"}]


def test_a_complete_line_that_is_not_json_still_fails(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"id":"a"}\n{"id":\n')

    with pytest.raises(orjson.JSONDecodeError):
        read_jsonl(out)
