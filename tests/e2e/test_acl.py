"""relayd as a least-privilege Redis user made from ``relayd acl``, on a real redis-server.

The user is created the way the docs say: ``relayd acl --user relayd --password-file F`` piped
into ``redis-cli``. It then runs everything relayd does on one prefix: ``sweep --once`` (with
the redis-stream sink on the same server), ``status``, ``dlq list|replay|purge``, and a
long-running ``sweep`` with wake-up and the lease, ``pause`` and ``resume`` while it runs. The
server's ``ACL LOG`` records every command, key or channel it denied to anyone: apart from the
one denial relayd expects and tolerates (wake-up's ``CONFIG GET``), the log must stay empty, so
a command added to the code but not to ``relayd.security.acl.COMMANDS`` fails this test. The same user
is refused another prefix's keys and channels, ``CONFIG SET`` and ``FLUSHALL``.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from support.ledger import read_jsonl
from support.ports import pick_ports
from support.processes import end_process
from support.redis_server import RedisServer, start_redis_server
from support.workload import Workload

from relayd.envelope.stored import MAX_ENTRY_BYTES
from store import Keyspace, RedisStore

pytestmark = [pytest.mark.slow]

USER = "relayd"
PASSWORD = "acl-pw-7Hq2"
PREFIX = "aclp"
STREAM = "acl-events"
RUN_TIMEOUT_S = 60
#: Denials relayd expects and goes on without: wake-up reads notify-keyspace-events if it may;
#: redis-py names its library on connect (Redis 7.2+) if it may.
TOLERATED = {("command", "config|get"), ("command", "client|setinfo")}


@pytest.fixture
def server() -> Iterator[RedisServer]:
    running = start_redis_server("--notify-keyspace-events", "Khz")
    yield running
    running.cleanup()


@pytest.fixture
def credentials(tmp_path: Path) -> dict[str, Path]:
    user, password = tmp_path / "redis-username", tmp_path / "redis-password"
    user.write_text(USER + "\n")
    password.write_text(PASSWORD + "\n")
    return {"user": user, "password": password}


def relayd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["relayd", *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )


def create_user(server: RedisServer, credentials: dict[str, Path]) -> str:
    """``relayd acl ... --user --password-file | redis-cli``, as docs/acl.md shows."""
    password_file = str(credentials["password"])
    printed = relayd(
        "acl", "--prefix", PREFIX, "--stream", STREAM, "--user", USER, "--password-file", password_file
    )
    assert printed.returncode == 0, printed.stderr
    assert PASSWORD not in printed.stdout
    applied = subprocess.run(
        ["redis-cli", "-p", str(server.port)],
        input=printed.stdout,
        check=False,
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert applied.stdout.strip() == "OK", applied.stdout + applied.stderr
    return printed.stdout


def denials(admin: redis.Redis) -> set[tuple[str, str]]:
    """(reason, object) of every ACL LOG entry: what the server refused since the last reset."""
    return {(str(entry["reason"]), str(entry["object"])) for entry in admin.acl_log()}


def test_a_user_made_from_relayd_acl_runs_every_command_and_nothing_else(
    server: RedisServer, credentials: dict[str, Path], tmp_path: Path
) -> None:
    admin = server.client()
    create_user(server, credentials)
    admin.acl_log_reset()
    seeded = Workload(RedisStore(admin, prefix=PREFIX), rate_per_s=1e9, timer_delay_s=(-5.0, 0.0)).run(40)
    bad_seq = admin.incr(Keyspace(PREFIX).outbox_seq)
    admin.hset(Keyspace(PREFIX).outbox, str(bad_seq), b"not json")  # dead-lettered: dlq has work
    # A timer too large to send, of an execution: parking it reads its execution's version.
    admin.zadd(Keyspace(PREFIX).timers, {"acl-exe\x00" + "p" * MAX_ENTRY_BYTES: 1.0})
    connection = [
        "--redis-url", server.url, "--prefix", PREFIX,
        "--redis-username-file", str(credentials["user"]),
        "--redis-password-file", str(credentials["password"]),
    ]  # fmt: skip
    out = tmp_path / "out.jsonl"
    stream_sink = f"redis-stream:redis://{USER}:{PASSWORD}@127.0.0.1:{server.port}/0?stream={STREAM}"

    once = relayd("sweep", "--once", "--outbox-sink", stream_sink, "--sink", f"jsonl:{out}", *connection)
    status = relayd("status", "--json", *connection)
    listed = relayd("dlq", "list", "--json", *connection)
    replayed = relayd("dlq", "replay", "--all", *connection)
    again = relayd("sweep", "--once", "--sink", f"jsonl:{out}", *connection)
    purged = relayd("dlq", "purge", "--yes", *connection)
    delivered_long = _run_long_sweep(server, admin, connection, tmp_path)

    assert once.returncode == 1, once.stderr  # one entry dead-lettered, everything else delivered
    assert admin.xlen(STREAM) == len(seeded.of_kind("outbox"))
    (report,) = json.loads(status.stdout)["prefixes"]
    assert status.returncode == 0, status.stderr
    assert (report["dead_letters"]["outbox"], report["dead_letters"]["timer"]) == (1, 1)
    assert listed.returncode == 0, listed.stderr
    assert f'"{bad_seq}"' in listed.stdout
    assert replayed.returncode == 0, replayed.stderr
    assert again.returncode == 1, again.stderr  # the replayed entry is still not JSON
    assert purged.returncode == 0, purged.stderr
    assert "purged 2" in purged.stdout
    assert delivered_long
    assert denials(admin) <= TOLERATED
    admin.close()


def _run_long_sweep(server: RedisServer, admin: redis.Redis, connection: list[str], tmp_path: Path) -> bool:
    """``relayd sweep`` (wake-up, lease): entries written while it idles are delivered; exit 0."""
    out = tmp_path / "long.jsonl"
    log = tmp_path / "long.log"
    port = pick_ports(1, random.Random())[0]
    argv = [
        "relayd", "sweep", *connection, "--sink", f"jsonl:{out}", "--metrics-addr", f"127.0.0.1:{port}",
        "--lease-ttl", "1", "--poll-interval", "30", "--log-format", "json",
    ]  # fmt: skip
    with log.open("wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=sink)
    try:
        _wait(lambda: b"wake_subscribed" in log.read_bytes(), proc, "the wake-up subscription")
        _wait(lambda: admin.get(Keyspace(PREFIX).relay("lease")) is not None, proc, "the lease")
        written = Workload(RedisStore(admin, prefix=PREFIX), rate_per_s=1e9, seed=11).run(10)
        wanted = set(written.committed) - {i for i in written.committed if i.startswith("timeout:")}
        # --poll-interval 30: only a wake-up delivers these within the wait
        _wait(lambda: wanted <= {d.id for d in read_jsonl(out).deliveries}, proc, "delivery on wake-up")
        # The operator's pause and resume, and the relay reading them, under the same rule.
        paused = relayd("pause", "--kind", "timer", "--reason", "acl check", *connection)
        assert paused.returncode == 0, paused.stderr
        resumed = relayd("resume", "--kind", "timer", *connection)
        assert resumed.returncode == 0, resumed.stderr
        time.sleep(0.5)  # a few lease renewals and registry beats, so they are in the ACL log if denied
    finally:
        code = end_process(proc, signal.SIGTERM, wait_s=20)
    assert code == 0, log.read_text()[-2000:]
    return True


def _wait(check: object, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not check():  # type: ignore[operator]
        assert proc.poll() is None, f"relayd sweep exited while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("get", ("otherprefix:outbox",)),
        ("hset", ("otherprefix:outbox", "1", "x")),
        ("config_set", ("notify-keyspace-events", "")),
        ("flushall", ()),
        ("keys", ("*",)),
    ],
    ids=["other-prefix-read", "other-prefix-write", "config-set", "flushall", "keys"],
)
def test_the_same_user_is_refused_everything_else(
    server: RedisServer, credentials: dict[str, Path], command: str, args: tuple[str, ...]
) -> None:
    create_user(server, credentials)
    user = server.client(username=USER, password=PASSWORD)

    with pytest.raises(redis.exceptions.NoPermissionError):
        getattr(user, command)(*args)

    assert user.hlen(Keyspace(PREFIX).outbox) == 0  # its own prefix: permitted
    user.close()


def test_the_same_user_cannot_listen_to_another_prefixs_channels(
    server: RedisServer, credentials: dict[str, Path]
) -> None:
    create_user(server, credentials)
    pubsub = server.client(username=USER, password=PASSWORD).pubsub()

    def listen(channel: str) -> None:
        pubsub.subscribe(channel)
        pubsub.get_message(timeout=2)

    with pytest.raises(redis.exceptions.NoPermissionError):
        listen("__keyspace@0__:otherprefix:outbox")
    pubsub.close()
