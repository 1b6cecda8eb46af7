"""A jsonl sink that refuses, permanently, every entry whose target is listed in a block file.

Used as ``python:tests.relayd.console.gate_sink:GateSink?path=OUT&block=FILE`` by the browser
test's relay: the listed targets are dead-lettered with a webhook-like reason; once the test
empties the block file, a replayed entry is delivered (a line appears in ``OUT``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import orjson

from relayd.envelope.batch import Batch
from relayd.sinks import Outcome, SinkOptions, SinkSpec
from relayd.sinks.base import DELIVERED, Permanent


class GateSink:
    name = "gate"

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        self._out = Path(spec.params["path"])
        self._block = Path(spec.params["block"])

    async def start(self) -> None:
        return None

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        bodies = batch.render()
        blocked = set(self._block.read_text().split()) if self._block.exists() else set()
        outcomes: list[Outcome] = []
        delivered: list[bytes] = []
        for body in bodies:
            target = orjson.loads(body).get("target_id")
            if target in blocked:
                request = hashlib.sha1(body).hexdigest()[:12]  # noqa: S324  # a made-up request id
                outcomes.append(Permanent(f"webhook answered 422 for {target} (request {request})"))
            else:
                delivered.append(body)
                outcomes.append(DELIVERED)
        if delivered:
            with self._out.open("ab") as out:
                out.write(b"".join(line + b"\n" for line in delivered))
        return outcomes

    def ready(self) -> bool:
        return True

    async def close(self) -> None:
        return None
