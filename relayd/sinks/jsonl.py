"""The ``jsonl`` sink: append one JSON line per envelope, fsync'd before the batch is reported.

``jsonl:PATH`` appends to PATH (created if missing; its directory must exist). Every batch is
written with one ``write``, flushed and ``os.fsync``'d in a worker thread before ``deliver``
returns, so an acked entry is on disk. If the write fails part-way, the file is truncated back
to where the batch began, so a torn line never stays in the file; the whole batch is retried.

``jsonl:-`` writes to stdout and flushes per batch (no fsync: stdout may be a pipe or a tty).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from relayd.envelope.batch import Batch
from relayd.errors import ConfigError, SinkError
from relayd.sinks import cloudevents
from relayd.sinks.base import DELIVERED, Outcome, ReadyByReason, Retry, SinkOptions
from relayd.sinks.spec import SinkSpec


class JsonlSink(ReadyByReason):
    """Append envelopes as JSON lines to a file or stdout."""

    name = "jsonl"

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        if not spec.target:
            raise ConfigError("sink 'jsonl' needs a path: 'jsonl:PATH' (or 'jsonl:-' for stdout)")
        self._stdout = spec.target == "-"
        self._render = cloudevents.structured_renderer(options.output_format, options.cloudevents_source)
        self.path = None if self._stdout else Path(spec.target)
        if self.path is not None and not self.path.parent.is_dir():
            raise ConfigError(f"sink 'jsonl': directory {str(self.path.parent)!r} does not exist")
        self._file: BinaryIO | None = None
        self._not_ready: str | None = None

    async def start(self) -> None:
        if self._stdout:
            self._file = sys.stdout.buffer
            return
        assert self.path is not None
        try:
            self._file = await asyncio.to_thread(open, self.path, "ab")
        except OSError as exc:
            raise SinkError(f"sink 'jsonl': cannot open {str(self.path)!r}: {exc.strerror}") from exc

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        if self._file is None:
            raise SinkError("sink 'jsonl' delivered to before start()")
        data = b"".join(line + b"\n" for line in self._render(batch))
        try:
            await asyncio.to_thread(self._write, self._file, data)
        except OSError as exc:
            self._not_ready = f"jsonl write failed: {exc.strerror or exc}"
            return [Retry(error=self._not_ready)] * len(batch)
        self._not_ready = None
        return [DELIVERED] * len(batch)

    def _write(self, file: BinaryIO, data: bytes) -> None:
        """Write, flush and fsync (runs in a worker thread; blocking is fine here)."""
        if self._stdout:
            file.write(data)
            file.flush()
            return
        start = file.tell()
        try:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        except OSError:
            # leave no torn line behind: the batch is retried whole
            try:
                file.truncate(start)
                file.seek(start)
            except OSError:
                pass
            raise

    def not_ready_reason(self) -> str | None:
        return self._not_ready

    async def close(self) -> None:
        file, self._file = self._file, None
        if file is not None and not self._stdout:
            await asyncio.to_thread(file.close)
