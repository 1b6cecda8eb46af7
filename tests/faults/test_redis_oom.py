"""A redis-server out of memory (``maxmemory`` far below use, ``noeviction``) under a running relay.

Redis refuses every write that grows it (cursors, attempt records, dead letters) and still
takes deletes (the acks). The relay must keep delivering and acking instead of starting its
sweeper over on each refused bookkeeping write, and say what it could not keep.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from faults.harness import RelayProcess
from support.redis_server import RedisServer
from support.seeding import outbox_value
from support.waiting import wait_until

from store import Keyspace
from tests.e2e.conftest import read_jsonl

pytestmark = [pytest.mark.faults, pytest.mark.slow]

ENTRIES = 400
BATCH = 20


def test_out_of_memory_redis_keeps_delivering_and_acking(tmp_path: Path, redis_process: RedisServer) -> None:
    client = redis_process.client()
    prefix = "oom"
    keyspace = Keyspace(prefix)
    out = tmp_path / "delivered.jsonl"
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", prefix, "--sink", f"jsonl:{out}",
            "--batch", str(BATCH), "--poll-interval", "0.2", "--lease-ttl", "3",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    relay.start()
    try:
        wait_until(lambda: client.exists(keyspace.relay("lease")), 30, "the relay to take the lease")
        # One MULTI/EXEC: the relay cannot read (and bury) the bad entry before memory runs out.
        pipe = client.pipeline(transaction=True)
        for seq in range(1, ENTRIES + 1):
            pipe.hset(keyspace.outbox, str(seq), outbox_value(f"t{seq % 7}", f"ev-{seq}"))
        pipe.set(keyspace.outbox_seq, ENTRIES)
        pipe.hset(keyspace.outbox, str(ENTRIES + 1), b"not json")  # its dead letter is refused too
        pipe.config_set("maxmemory-policy", "noeviction")
        pipe.config_set("maxmemory", 1)
        pipe.execute()

        def delivered() -> int:
            return len({envelope["id"] for envelope in read_jsonl(out)})

        try:
            wait_until(lambda: delivered() == ENTRIES, 90, f"{ENTRIES} deliveries under OOM")
        except AssertionError as exc:  # say where it stalled: the relay's own account
            raise AssertionError(f"{exc}; {delivered()} delivered; relay log: {relay.log_tail()}") from None
        wait_until(lambda: client.hlen(keyspace.outbox) == 1, 30, "every delivered entry acked")
        assert relay.alive, relay.log_tail()
    finally:
        client.config_set("maxmemory", 0)
        code = relay.stop()
    lines = [orjson.loads(line) for line in relay.log_path.read_bytes().splitlines() if line.startswith(b"{")]

    assert code == 0, relay.log_tail()  # SIGTERM: settled, exit 0
    assert {line.get("event") for line in lines} >= {"bookkeeping_refused"}
    # No sweeper started over: the loop logs a redis_error with the prefix each time it does.
    assert [
        line for line in lines if line.get("event") == "redis_error" and line.get("prefix") == prefix
    ] == []
    assert "Traceback" not in relay.log_path.read_text(errors="replace")
