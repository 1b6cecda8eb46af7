"""Golden bytes of the sinks that write locally: the jsonl file's lines, and the log sink's lines
as relayd's JSON logging renders them."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest

from relayd.observability.logs import configure_logging

from .conftest import check, deliver_all, open_sink, payload


@pytest.mark.parametrize(
    ("case", "flags"),
    [("jsonl", {}), ("jsonl-cloudevents", {"format": "cloudevents"})],
    ids=["jsonl", "jsonl-cloudevents"],
)
async def test_jsonl_writes_the_recorded_lines(case: str, flags: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    sink = await open_sink(f"jsonl:{path}", **flags)
    try:
        await deliver_all(sink)
    finally:
        await sink.close()

    lines = path.read_bytes().split(b"\n")
    assert lines.pop() == b""  # every line ends with a newline, the last one too
    check(case, {"sink": "jsonl:PATH", "flags": flags, "lines": [payload(line) for line in lines]})


@pytest.mark.usefixtures("reset_logging")
async def test_log_writes_the_recorded_lines() -> None:
    """The lines of ``--log-format json``; each line's ``timestamp`` (the host's clock, which the
    log sink does not take from the sink options) is normalised, every other byte kept."""
    out = io.StringIO()
    configure_logging(log_format="json", stream=out)
    sink = await open_sink("log")
    try:
        await deliver_all(sink)
    finally:
        await sink.close()

    lines = out.getvalue().split("\n")
    assert lines.pop() == ""
    check("log", {"sink": "log", "lines": [payload(_normalised(line)) for line in lines]})


def _normalised(line: str) -> bytes:
    """The line with its ``timestamp`` value replaced in place (its key and place kept)."""
    fields = orjson.loads(line)
    stamp = orjson.dumps(fields["timestamp"])
    encoded = line.encode()
    assert encoded.count(b'"timestamp":' + stamp) == 1, line
    return encoded.replace(b'"timestamp":' + stamp, b'"timestamp":"<now>"')
