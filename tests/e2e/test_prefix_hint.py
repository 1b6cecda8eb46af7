"""A harel program writes under ``harel``; relayd's default prefix is ``stm``. ``status``,
``dlq list``, ``sweep`` and the console say so in one hint line instead of showing an empty,
healthy relay.
Shown on a real redis-server of the test's own (so no other test's ``stm`` keys interfere)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import fakeredis
import httpx
import orjson
import pytest
from support.console import start_console
from support.redis_server import RedisServer

from relayd.prefix_hint import hint_for, prefix_hints
from store import Event, Execution, RedisStore
from tests.e2e.conftest import run_relayd

HINT = "no keys under prefix 'stm'; found keys under 'harel': did you mean --prefix harel?"


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.cleanup()


def _harel_commits(server: RedisServer) -> None:
    client = server.client()
    RedisStore(client, prefix="harel").commit(
        Execution(id="exe-1", definition_id="harel.flow"), [("t-1", Event(id="e-1", kind="ping", data={}))]
    )
    client.close()


def test_status_dlq_list_and_sweep_name_the_prefix_that_holds_keys(own_redis: RedisServer, tmp_path: Path):
    _harel_commits(own_redis)
    url = ("--redis-url", own_redis.url)

    status = run_relayd("status", *url)
    status_json = run_relayd("status", "--json", *url)
    dlq = run_relayd("dlq", "list", *url)
    sweep = run_relayd("sweep", "--once", *url, "--sink", f"jsonl:{tmp_path / 'out.jsonl'}")
    right = run_relayd("status", *url, "--prefix", "harel")
    console = start_console(own_redis.url, ["stm"])
    try:
        overview = httpx.get(console.url + "/", timeout=30)
    finally:
        console.stop()

    for result in (status, status_json, dlq):
        assert result.returncode == 0, result.stderr
        assert result.stderr.splitlines() == [f"relayd: hint: {HINT}"]
    assert orjson.loads(status_json.stdout)["prefixes"][0]["prefix"] == "stm"  # stdout stays JSON
    assert sweep.returncode == 0, sweep.stderr
    warnings = [orjson.loads(line) for line in sweep.stderr.splitlines() if '"prefix_empty"' in line]
    assert [(w["level"], w["hint"]) for w in warnings] == [("warning", HINT)]
    assert right.returncode == 0
    assert "hint" not in right.stderr
    assert HINT.replace("'", "&#39;") in overview.text  # as Jinja escapes it


def test_no_hint_when_the_prefix_holds_keys_or_nothing_is_anywhere(own_redis: RedisServer):
    empty = run_relayd("status", "--redis-url", own_redis.url)
    _harel_commits(own_redis)
    both_client = own_redis.client()
    RedisStore(both_client, prefix="stm").commit(Execution(id="exe-2", definition_id="stm.flow"), [])
    both_client.incr("stm:outbox:seq")
    both_client.close()
    both = run_relayd("status", "--redis-url", own_redis.url)

    assert "hint" not in empty.stderr
    assert "hint" not in both.stderr


async def test_the_probe_is_exists_only_never_a_scan() -> None:
    """Bounded cost: the commands sent are EXISTS on a fixed set of keys, whatever the key space."""
    client = fakeredis.FakeAsyncRedis()
    await client.hset("harel:outbox", "1", "{}")
    sent: list[str] = []
    real = client.pipeline

    def recording_pipeline(*args, **kwargs):
        pipe = real(*args, **kwargs)
        original = pipe.execute_command

        def execute_command(*command, **options):
            sent.append(str(command[0]).upper())
            return original(*command, **options)

        pipe.execute_command = execute_command
        return pipe

    client.pipeline = recording_pipeline

    hints = await prefix_hints(client, ["stm"])

    assert hints == [HINT]
    assert set(sent) == {"EXISTS"}
    assert len(sent) == 2 * 8  # the chosen prefix and harel (stm is both), eight marker keys each
    await client.aclose()


def test_hint_for_names_the_first_well_known_prefix_in_use() -> None:
    assert hint_for("stm", {"stm": False, "harel": True}) == HINT
    assert hint_for("stm", {"stm": True, "harel": True}) is None
    assert hint_for("stm", {"stm": False, "harel": False}) is None
    assert hint_for("orders", {"orders": False, "stm": True, "harel": True}) == (
        "no keys under prefix 'orders'; found keys under 'stm': did you mean --prefix stm?"
    )
