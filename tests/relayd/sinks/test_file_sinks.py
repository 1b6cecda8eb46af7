"""The local sinks: jsonl (exact lines, fsync before Delivered, stdout), log and null."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from structlog.testing import capture_logs

from relayd.envelope import Envelope
from relayd.envelope.batch import Batch
from relayd.errors import ConfigError
from relayd.sinks import DELIVERED, Retry, SinkOptions, SinkSpec
from relayd.sinks.jsonl import JsonlSink
from relayd.sinks.log import LogSink
from relayd.sinks.null import NullSink

from .conftest import deliver_runs, outbox, spawn, timer


def batch(prefix: str = "p") -> list[Envelope]:
    return [
        outbox(prefix, 1, "a"),
        outbox(prefix, 2, None),
        spawn(prefix, 7, "a", "a.r1", root_path="root.r1", context={"k": [1, 2]}),
        timer(prefix, "a", "root.wait", 1_700_000_123.5),
    ]


async def test_jsonl_appends_exact_envelopes_one_per_line(tmp_path: Path) -> None:
    """Each envelope becomes one line whose JSON equals the envelope body; batches append."""
    path = tmp_path / "out.jsonl"
    path.write_bytes(b'{"earlier":true}\n')
    sink = JsonlSink(SinkSpec("jsonl", str(path)), SinkOptions())
    envelopes = batch()

    await sink.start()
    first = await sink.deliver(Batch.of(envelopes[:2]))
    second = await deliver_runs(sink, envelopes[2:])
    await sink.close()

    lines = path.read_bytes().splitlines()
    assert [DELIVERED] * 2 == list(first) == list(second)
    assert orjson.loads(lines[0]) == {"earlier": True}
    assert [e.body for e in envelopes] == [orjson.loads(line) for line in lines[1:]]


async def test_jsonl_fsyncs_the_batch_before_reporting_delivered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.fsync runs on the file, with the whole batch already written, before deliver returns."""
    path = tmp_path / "out.jsonl"
    synced_sizes: list[int] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        real_fsync(fd)
        synced_sizes.append(os.fstat(fd).st_size)

    monkeypatch.setattr(os, "fsync", spy)
    sink = JsonlSink(SinkSpec("jsonl", str(path)), SinkOptions())
    envelopes = [outbox("p", seq, "a") for seq in range(1, 5)]

    await sink.start()
    await sink.deliver(Batch.of(envelopes))
    size_when_returned = path.stat().st_size
    await sink.close()

    assert [size_when_returned] == synced_sizes  # one fsync, after the whole batch
    assert sum(len(e.to_json()) + 1 for e in envelopes) == size_when_returned


async def test_jsonl_failed_write_is_retried_and_leaves_no_torn_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An fsync failure means Retry for the whole batch, the file is cut back, ready() turns false."""
    path = tmp_path / "out.jsonl"
    sink = JsonlSink(SinkSpec("jsonl", str(path)), SinkOptions())
    await sink.start()
    await sink.deliver(Batch.of([outbox("p", 1, "a")]))
    good_size = path.stat().st_size

    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    outcomes = await sink.deliver(Batch.of([outbox("p", 2, "a"), outbox("p", 3, "b")]))
    monkeypatch.undo()
    ready_after_failure = sink.ready()
    recovered = await sink.deliver(Batch.of([outbox("p", 2, "a")]))
    await sink.close()

    assert all(isinstance(o, Retry) and "No space left" in o.error for o in outcomes)
    assert not ready_after_failure
    assert list(recovered) == [DELIVERED]
    assert sink.ready()
    lines = path.read_bytes().splitlines()
    assert good_size == len(lines[0]) + 1
    assert [orjson.loads(line)["id"] for line in lines] == ["p:outbox:1", "p:outbox:2"]


async def test_jsonl_dash_writes_stdout(capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    """jsonl:- writes the same lines to stdout, flushed per batch."""
    sink = JsonlSink(SinkSpec("jsonl", "-"), SinkOptions())
    envelopes = batch()

    await sink.start()
    await deliver_runs(sink, envelopes)
    out = capfdbinary.readouterr().out
    await sink.close()

    assert [e.body for e in envelopes] == [orjson.loads(line) for line in out.splitlines()]


def test_jsonl_refuses_a_missing_directory(tmp_path: Path) -> None:
    """A path whose directory does not exist is a configuration error at resolve time."""
    with pytest.raises(ConfigError, match="does not exist"):
        JsonlSink(SinkSpec("jsonl", str(tmp_path / "nope" / "out.jsonl")), SinkOptions())


async def test_log_sink_logs_one_line_per_envelope_with_fixed_fields() -> None:
    """Each envelope gives an info line with id, kind, prefix, attempt and the whole envelope, and
    is Delivered."""
    sink = LogSink(SinkSpec("log"), SinkOptions())
    envelopes = batch()

    with capture_logs() as logs:
        outcomes = await deliver_runs(sink, envelopes)

    assert list(outcomes) == [DELIVERED] * 4
    assert [
        {
            "event": "envelope",
            "log_level": "info",
            "id": e.id,
            "kind": e.kind,
            "prefix": "p",
            "attempt": 1,
            "envelope": e.body,
        }
        for e in envelopes
    ] == logs


async def test_null_sink_delivers_and_counts() -> None:
    """The null sink reports everything delivered and keeps only a count."""
    sink = NullSink(SinkSpec("null"), SinkOptions())

    outcomes = [*await deliver_runs(sink, batch()), *await sink.deliver(Batch.of(batch()[:1]))]

    assert outcomes == [DELIVERED] * 5
    assert sink.delivered == 5
