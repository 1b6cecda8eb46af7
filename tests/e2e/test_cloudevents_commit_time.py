"""``--format cloudevents``: an outbox event and a spawn committed through ``store`` reach the sink
with the commit time ``store`` stamped (``"ct"``) as their CloudEvents ``time``; entries harel
writes (no stamp) keep the relay's time. A real relay process and redis-server, the events read
back by the CloudEvents SDK."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import orjson
import pytest
from cloudevents.core.formats.json import JSONFormat
from faults.harness import RelayProcess, sample
from support.binaries import require_binaries
from support.redis_server import RedisServer
from support.seeding import Entries
from support.waiting import wait_until

from store import Event, Execution, RedisStore, Status

pytestmark = pytest.mark.slow

PREFIX = "cet"


def test_committed_entries_carry_their_commit_time_and_harel_written_ones_the_relay_time(
    tmp_path: Path,
) -> None:
    require_binaries("redis-server", "relayd")
    server = RedisServer(tmp_path / "redis")
    server.start()
    client = server.client()
    args = [
        "--redis-url", server.url, "--prefix", PREFIX, "--sink", f"redis-stream:{server.url}?stream=out",
        "--format", "cloudevents", "--poll-interval", "0.2", "--log-level", "warning",
    ]  # fmt: skip
    try:
        relay = RelayProcess(args, tmp_path / "relay.log")
        relay.start()
        try:
            wait_until(
                lambda: sample(relay.metrics(), "relayd_active", prefix=PREFIX) == 1, 30, "the relay active"
            )
            seconds, micros = client.time()
            before = dt.datetime.fromtimestamp(seconds + micros / 1e6, dt.UTC)
            Entries(client.pipeline(), PREFIX).outbox(1, "t", "harel-written").spawn(
                1, "harel-parent", "harel-child"
            ).counters(outbox=1, spawns=1).pipe.execute()
            wait_until(lambda: client.xlen("out") == 2, 30, "the harel-written entries delivered")
        finally:
            relay.stop()

        # Committed and read back with no relay running: none can deliver and delete them first.
        RedisStore(client, prefix=PREFIX).commit(
            Execution(definition_id="d", status=Status.RUNNING),
            [("t", Event(kind="Ping"))],
            spawns=[("child", "root", {})],
        )
        (outbox_value,) = client.hvals(f"{PREFIX}:outbox")
        (spawn_value,) = client.hvals(f"{PREFIX}:spawns")
        committed = {
            f"{PREFIX}:outbox:2": orjson.loads(outbox_value)["ct"],
            f"{PREFIX}:spawn:2": orjson.loads(spawn_value)["ct"],
        }
        relay = RelayProcess(args, tmp_path / "relay-again.log")
        relay.start()
        try:
            wait_until(lambda: client.xlen("out") == 4, 30, "the committed entries delivered")
        finally:
            relay.stop()
        entries = client.xrange("out")
    finally:
        server.kill()

    events = {fields[b"id"].decode(): JSONFormat().read(None, fields[b"envelope"]) for _, fields in entries}
    for event_id, at in committed.items():
        assert events[event_id].get_time() == dt.datetime.fromtimestamp(at, dt.UTC)  # to the microsecond
    delivered = dt.datetime.fromtimestamp(int(entries[1][0].split(b"-")[0]) / 1000, dt.UTC)
    for event_id in (f"{PREFIX}:outbox:1", f"{PREFIX}:spawn:1"):
        relayed = events[event_id].get_time()
        assert relayed is not None
        # the relay's own time (on the Redis server's clock): after the write, by its delivery
        assert before <= relayed <= delivered + dt.timedelta(milliseconds=1)
