"""``relayd pause`` and ``relayd resume`` against real relay processes and a real redis-server.

The relays deliver into a Redis stream on the same server, so what arrived, in which order and
at which attempt is read from the stream itself. ``--sink-rate`` slows the drain enough for a
pause to land in the middle of it.
"""

from __future__ import annotations

import asyncio
import subprocess
import urllib.request
from collections import defaultdict
from pathlib import Path

import orjson
import pytest
import redis
import redis.asyncio as aioredis
from faults.harness import RelayProcess, sample
from support.binaries import require_binaries
from support.redis_server import RedisServer
from support.seeding import Entries
from support.waiting import wait_until

from relayd.state.audit import MAX_RECORDS
from relayd.state.pauses import Pause, pause
from store import Keyspace
from tests.e2e.conftest import relayd_argv, relayd_env

pytestmark = pytest.mark.slow

ENTRIES = 1000
TARGETS = 20
RATE = 200


def _cli(url: str, prefix: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        relayd_argv(*args, "--redis-url", url, "--prefix", prefix),
        env=relayd_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _relay(url: str, prefix: str, log: Path) -> RelayProcess:
    return RelayProcess(
        [
            "--redis-url", url, "--prefix", prefix, "--sink", f"redis-stream:{url}?stream=out",
            "--sink-rate", str(RATE), "--poll-interval", "0.2", "--lease-ttl", "1",
            "--log-level", "info", "--log-format", "json",
        ],
        log,
    )  # fmt: skip


def _delivered(client: redis.Redis) -> list[dict[str, object]]:
    """Every envelope in the stream, in arrival order."""
    return [orjson.loads(fields[b"envelope"]) for _, fields in client.xrange("out")]


def _count(client: redis.Redis, kind: str) -> int:
    return sum(1 for e in _delivered(client) if e["kind"] == kind)


def _seed_outbox(client: redis.Redis, prefix: str) -> None:
    pipe = client.pipeline()
    entries = Entries(pipe, prefix)
    for seq in range(1, ENTRIES + 1):
        entries.outbox(seq, f"t{seq % TARGETS}", f"e{seq}")
    entries.counters(outbox=ENTRIES)
    pipe.execute()


def _assert_once_in_order_first_attempt(envelopes: list[dict[str, object]]) -> None:
    outbox = [e for e in envelopes if e["kind"] == "outbox"]
    ids = [str(e["id"]) for e in outbox]
    assert len(ids) == len(set(ids)) == ENTRIES
    assert {e["attempt"] for e in outbox} == {1}
    per_target: dict[str, list[int]] = defaultdict(list)
    for e in outbox:
        per_target[str(e["target_id"])].append(int(str(e["id"]).rpartition(":")[2]))
    assert all(seqs == sorted(seqs) for seqs in per_target.values())


@pytest.fixture
def server(tmp_path: Path):
    require_binaries("redis-server", "relayd")
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.kill()


def test_a_paused_outbox_stops_while_spawns_and_timers_flow_survives_a_takeover_and_resumes(
    server: RedisServer, tmp_path: Path
) -> None:
    """Outbox paused mid-drain: its deliveries stop, spawns and timers go on, the standby that
    takes over stays paused; resumed, every entry arrives once, in per-target order, at attempt 1."""
    prefix = "pz"
    client = server.client()
    _seed_outbox(client, prefix)
    first, standby = (
        _relay(server.url, prefix, tmp_path / "a.log"),
        _relay(server.url, prefix, tmp_path / "b.log"),
    )
    first.start()
    wait_until(lambda: client.exists(Keyspace(prefix).relay("lease")), 30, "the first relay's lease")
    standby.start()
    try:
        wait_until(lambda: _count(client, "outbox") >= RATE // 2, 30, "the drain under way")

        # Written as ``relayd pause`` writes it, without the command's start-up time, so the
        # pause lands mid-drain however loaded the machine (the command is tested below).
        _pause_now(server, prefix, Pause(kind="outbox", by="cli:test@host", reason="receiver migration"))
        at_pause = _count(client, "outbox")
        # Within the pauses' read period (half a second) plus the batch in flight, outbox
        # deliveries stop: well under a second's worth at the sink rate.
        wait_until(lambda: _stable(client), 10, "outbox deliveries stopped")
        stopped_at = _count(client, "outbox")
        print(f"outbox delivered after the pause command returned: {stopped_at - at_pause}")
        assert stopped_at - at_pause < RATE
        assert stopped_at < ENTRIES
        entries = Entries(client.pipeline(), prefix)
        entries.spawn(1, "parent", "child-1").timer("exe-1", "a", 1.0).counters(spawns=1)
        entries.pipe.execute()
        wait_until(
            lambda: _count(client, "spawn") == 1 and _count(client, "timer") == 1, 20, "spawn and timer"
        )

        # One replica, one prefix: the second says it is standing by.
        standby_log = tmp_path / "b.log"
        wait_until(lambda: '"event":"standing_by"' in standby_log.read_text(), 30, "the standby's line")
        first.stop()  # the standby takes the lease over and finds the pause in Redis
        wait_until(
            lambda: _holder_pid(client, prefix) == standby.proc.pid, 30, "the standby holding the lease"
        )
        entries = Entries(client.pipeline(), prefix)
        entries.spawn(2, "parent", "child-2").timer("exe-2", "a", 2.0).counters(spawns=2)
        entries.pipe.execute()
        wait_until(
            lambda: _count(client, "spawn") == 2 and _count(client, "timer") == 2, 20, "spawn and timer"
        )
        assert _count(client, "outbox") == stopped_at
        # A pause is intended: the relay stays ready.
        with urllib.request.urlopen(f"http://127.0.0.1:{standby.metrics_port}/readyz", timeout=10) as ready:
            assert ready.status == 200
        status = _cli(server.url, prefix, "status", "--json")
        assert orjson.loads(status.stdout)["prefixes"][0]["paused"][0]["reason"] == "receiver migration"
        table = _cli(server.url, prefix, "status").stdout
        assert "paused" in table
        assert "migration" in table

        resumed = _cli(server.url, prefix, "resume", "--kind", "outbox")

        assert resumed.returncode == 0, resumed.stderr
        wait_until(lambda: _count(client, "outbox") >= ENTRIES, 30, "every outbox entry")
        wait_until(lambda: client.hlen(Keyspace(prefix).outbox) == 0, 10, "every outbox entry acked")
    finally:
        first.stop()
        standby.stop()
    _assert_once_in_order_first_attempt(_delivered(client))
    assert not client.exists(f"{prefix}:relay:attempts:outbox")
    actions = [orjson.loads(r)["action"] for r in client.lrange(f"{prefix}:relay:audit", 0, MAX_RECORDS)]
    assert actions == ["resume", "pause"]


def _pause_now(server: RedisServer, prefix: str, scope: Pause) -> None:
    async def write() -> None:
        client = aioredis.Redis(port=server.port)
        try:
            await pause(client, Keyspace(prefix), scope, command="relayd pause", source=scope.by)
        finally:
            await client.aclose()

    asyncio.run(write())


def _stable(client: redis.Redis, window_s: float = 0.6) -> bool:
    """Whether no outbox entry arrived for ``window_s`` (longer than the pauses' read period)."""
    import time

    before = _count(client, "outbox")
    time.sleep(window_s)
    return _count(client, "outbox") == before


def _holder_pid(client: redis.Redis, prefix: str) -> int | None:
    holder = client.get(f"{prefix}:relay:lease")
    return None if holder is None else int(holder.decode().split("/")[1])


def test_a_paused_target_holds_only_its_own_key(server: RedisServer, tmp_path: Path) -> None:
    """Target t3 paused: every other target's entries arrive, none of t3's; resumed, t3's follow
    in order at their first attempt."""
    prefix = "pt"
    client = server.client()
    relay = _relay(server.url, prefix, tmp_path / "relay.log")
    relay.start()
    try:
        wait_until(lambda: client.exists(Keyspace(prefix).relay("members")), 30, "the relay registered")
        paused = _cli(server.url, prefix, "pause", "--target", "t3", "--reason", "tenant migrating")
        assert paused.returncode == 0, paused.stderr
        wait_until(
            lambda: sample(
                relay.metrics(), "relayd_paused_since_timestamp_seconds", prefix=prefix, scope="target"
            ),
            30,
            "the relay obeying the pause",
        )
        _seed_outbox(client, prefix)
        others = ENTRIES - ENTRIES // TARGETS
        wait_until(lambda: _count(client, "outbox") >= others, 30, "every other target")
        assert _stable(client)
        assert _t3(client) == 0
        assert client.hlen(Keyspace(prefix).outbox) == ENTRIES // TARGETS

        resumed = _cli(server.url, prefix, "resume", "--target", "t3")

        assert resumed.returncode == 0, resumed.stderr
        wait_until(lambda: _count(client, "outbox") >= ENTRIES, 30, "t3's entries")
    finally:
        relay.stop()
    _assert_once_in_order_first_attempt(_delivered(client))


def _t3(client: redis.Redis) -> int:
    return sum(1 for e in _delivered(client) if e["kind"] == "outbox" and e["target_id"] == "t3")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pause", "--kind", "outbox", "--reason", " "], "--reason cannot be empty"),
        (["pause", "--kind", "outbx", "--reason", "r"], "invalid --kind 'outbx'"),
        (["pause", "--sink", "webhok", "--reason", "r"], "unknown --sink 'webhok'"),
        (["pause", "--queue", "q", "--reason", "r"], "No such option: --queue"),
        (["pause", "--reason", "r"], "no relayd serves prefix 'nobody'"),
        (["resume", "--kind", "outbx"], "invalid --kind 'outbx'"),
    ],
    ids=[
        "empty-reason",
        "unknown-kind",
        "unknown-sink",
        "unknown-selector",
        "unserved-prefix",
        "resume-kind",
    ],
)
def test_bad_pause_input_is_one_line_and_exit_2(server: RedisServer, args: list[str], message: str) -> None:
    """Nothing is written: one line on stderr, exit code 2."""
    done = _cli(server.url, "nobody", *args)

    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not server.client().exists("nobody:relay:pauses")
