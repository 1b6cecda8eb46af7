"""The floor benchmark does the relay's per-entry work and drains everything it reads.

``tests/benchmarks/bench_floor.py`` is only a fair measure while its envelopes are the relay's
bytes and its drain loses nothing; these tests hold it to both.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import redis
from support.redis_server import RedisServer

from relayd.bench.seed import seed
from relayd.envelope.decode import outbox_envelopes
from store import Event, Keyspace
from store.backlog import RawEntry
from store.codec import encode_outbox_value

FLOOR = Path(__file__).parents[1] / "benchmarks" / "bench_floor.py"


@functools.cache
def _floor() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_floor", FLOOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_floor_renders_the_relays_envelope_bytes_and_ids() -> None:
    events = [Event(kind="k", data={"x": n / 3, "s": 'quote " slash / é\n'}) for n in range(4)]
    values = [encode_outbox_value(f"t-{n}" if n else None, e) for n, e in enumerate(events)]
    # passed through as written, not re-serialised
    values.append(
        b'{"t":"t-x","e":"{\\"id\\": \\"e-x\\", \\"kind\\": \\"k\\", \\"data\\": {\\"a\\": 1.0e0}}"}'
    )
    fields = [str(100 + n) for n in range(len(values))]
    now = time.time()

    args = _floor()._envelopes("pre\\fix", fields, values, now)

    entries = [RawEntry(f, int(f), v) for f, v in zip(fields, values, strict=True)]
    window, _, malformed = outbox_envelopes(entries, prefix="pre\\fix", attempt=1, relayed_at=now)
    assert not malformed
    assert args == [part for env in window for part in (env.to_json(), env.id)]


def test_the_floor_drains_every_entry_into_the_stream(redis_server: RedisServer) -> None:
    sync = redis.Redis.from_url(redis_server.url)
    prefix, count = f"floor{time.time_ns()}", 2_500  # two full windows and a partial one
    seed(sync, prefix, "outbox", count, clock=time.time)
    try:
        asyncio.run(_floor().floor_drain(redis_server.url, prefix, count, f"{prefix}:stream"))
        assert sync.hlen(Keyspace(prefix).outbox) == 0
        assert sync.xinfo_stream(f"{prefix}:stream")["entries-added"] == count
    finally:
        for key in sync.scan_iter(f"{prefix}*"):
            sync.delete(key)
        sync.close()
