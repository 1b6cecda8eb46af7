"""``relayd status --retrying``: the entries in backoff, read from the attempt records a real relay
writes while a webhook receiver answers 503 for one target."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest
from aiohttp import web
from faults.harness import RelayProcess
from support.binaries import require_binaries
from support.http_receiver import serve_in_thread
from support.redis_server import RedisServer
from support.seeding import Entries
from support.waiting import wait_until

from tests.e2e.conftest import relayd_argv, relayd_env

pytestmark = pytest.mark.slow

PREFIX = "rt"


async def _receiver(request: web.Request) -> web.Response:
    """503 for every entry of target ``bad``; 200 for the rest."""
    envelope = orjson.loads(await request.read())
    if envelope.get("target_id") == "bad":
        return web.Response(status=503, text="down for maintenance")
    return web.Response(status=200)


def _retrying(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        relayd_argv("status", "--retrying", "--redis-url", url, "--prefix", PREFIX, *args),
        env=relayd_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_retrying_view_lists_an_entry_a_receiver_answers_503_with_its_error_and_next_attempt(
    tmp_path: Path,
) -> None:
    require_binaries("redis-server", "relayd")
    server = RedisServer(tmp_path / "redis")
    server.start()
    client = server.client()
    try:
        entries = Entries(client.pipeline(), PREFIX)
        entries.outbox(1, "bad", "e-bad").outbox(2, "ok", "e-ok").outbox(3, "ok", "e-ok-2").counters(outbox=3)
        entries.pipe.execute()
        with serve_in_thread(_receiver) as hook:
            relay = RelayProcess(
                [
                    "--redis-url", server.url, "--prefix", PREFIX, "--sink", f"webhook:{hook}",
                    "--retry-base", "30", "--retry-cap", "60", "--poll-interval", "0.2",
                    "--log-level", "warning",
                ],
                tmp_path / "relay.log",
            )  # fmt: skip
            relay.start()
            try:
                wait_until(lambda: client.hlen(f"{PREFIX}:relay:attempts:outbox"), 30, "an attempt record")
                listed = _retrying(server.url, "--json")
                table = _retrying(server.url)
                (now_s, _) = client.time()
            finally:
                relay.stop()
    finally:
        server.kill()

    assert listed.returncode == 0, listed.stderr
    doc = orjson.loads(listed.stdout)
    (entry,) = doc["retrying"]
    assert (entry["prefix"], entry["kind"], entry["id"], entry["key"]) == (
        PREFIX,
        "outbox",
        f"{PREFIX}:outbox:1",
        "bad",
    )
    assert entry["attempts"] == 1
    assert "503" in entry["last_error"]
    assert entry["first_attempt_at"] == entry["last_attempt_at"]
    assert entry["next_attempt_at"] > now_s  # backing off at least --retry-base from the attempt
    assert entry["next_attempt_at"] - entry["last_attempt_at"] >= 30 * 0.5  # the jitter's floor
    assert doc["next_page"] is None
    assert table.returncode == 0, table.stderr
    assert f"{PREFIX}:outbox:1" in table.stdout
    assert "503" in table.stdout
