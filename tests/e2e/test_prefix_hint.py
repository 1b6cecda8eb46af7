"""A harel program writes under ``harel``; relayd's default prefix is ``stm``; a deployment may
use any prefix. ``status``, ``dlq list``, ``sweep`` and the console say so in one hint line
instead of showing an empty, healthy relay, naming the prefixes a bounded ``SCAN`` finds.
Shown on a real redis-server of the test's own (so no other test's keys interfere)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeredis
import httpx
import orjson
import pytest
import redis.asyncio as aioredis
from support.console import start_console
from support.redis_server import RedisServer

from relayd.console.poller import MIN_INTERVAL_S, OverviewPoller
from relayd.security.acl import acl_rule
from relayd.status.prefix_hint import SCAN_STEPS, hint_for, prefix_hints, prefix_of, scan_prefixes
from store import Event, Execution, Keyspace, RedisStore
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

    assert (empty.returncode, both.returncode) == (0, 0), (empty.stderr, both.stderr)
    assert "hint" not in empty.stderr
    assert "hint" not in both.stderr


def _commits_under(server: RedisServer, *prefixes: str) -> None:
    client = server.client()
    for prefix in prefixes:
        RedisStore(client, prefix=prefix).commit(
            Execution(id="exe-1", definition_id="flow"), [("t-1", Event(id="e-1", kind="ping", data={}))]
        )
    client.close()


def test_status_dlq_list_and_sweep_name_prefixes_only_a_scan_finds(own_redis: RedisServer, tmp_path: Path):
    """No well-known prefix holds keys: the prefixes named are those the SCAN met, sorted."""
    _commits_under(own_redis, "orders")
    url = ("--redis-url", own_redis.url)
    hint = "no keys under prefix 'stm'; found keys under 'orders': did you mean --prefix orders?"

    status = run_relayd("status", *url)
    dlq = run_relayd("dlq", "list", *url)
    sweep = run_relayd("sweep", "--once", *url, "--sink", f"jsonl:{tmp_path / 'out.jsonl'}")
    _commits_under(own_redis, "{billing}", "app:stm", "harel", "zeta")
    several = run_relayd("status", *url)

    for result in (status, dlq):
        assert result.returncode == 0, result.stderr
        assert result.stderr.splitlines() == [f"relayd: hint: {hint}"]
    warnings = [orjson.loads(line) for line in sweep.stderr.splitlines() if '"prefix_empty"' in line]
    assert [w["hint"] for w in warnings] == [hint]
    assert several.stderr.splitlines() == [
        "relayd: hint: no keys under prefix 'stm'; found keys under 'app:stm', 'harel', 'orders' and 2 more:"
        " did you mean one of them (--prefix)?"
    ]


def test_the_scan_stops_at_its_bound_on_a_larger_key_space(own_redis: RedisServer) -> None:
    """Ten times more keys than the bound examines: the hint sends exactly ``SCAN_STEPS`` SCANs."""
    admin = own_redis.client()
    pipe = admin.pipeline(transaction=False)
    for start in range(0, 10 * SCAN_STEPS * 1000, 1000):
        pipe.mset({f"noise:exe:{n}": b"{}" for n in range(start, start + 1000)})
    pipe.execute()
    admin.config_resetstat()

    hints = asyncio.run(_hints_once(own_redis.url, ["stm"]))

    assert hints == []  # nothing marks a prefix in use anywhere
    assert admin.info("commandstats")["cmdstat_scan"]["calls"] == SCAN_STEPS
    admin.close()


async def _hints_once(url: str, prefixes: list[str], **kwargs: str) -> list[str]:
    client = aioredis.Redis.from_url(url, **kwargs)
    try:
        return await prefix_hints(client, prefixes)
    finally:
        await client.aclose()


def test_a_user_without_scan_gets_no_hint_and_no_error(own_redis: RedisServer) -> None:
    """relayd's own ACL rule grants neither SCAN nor another prefix's keys: no hint, exit 0."""
    _commits_under(own_redis, "orders", "harel")
    admin = own_redis.client()
    admin.execute_command("ACL", "SETUSER", "relay", "reset", "on", ">pw", *acl_rule(["stm"]).split())
    admin.acl_log_reset()

    hints = asyncio.run(_hints_once(own_redis.url, ["stm"], username="relay", password="pw"))
    status = run_relayd("status", "--redis-url", f"redis://relay:pw@127.0.0.1:{own_redis.port}/0")

    assert hints == []
    assert status.returncode == 0, status.stderr
    assert "hint" not in status.stderr
    assert ("command", "scan") in {
        (str(e["reason"]), str(e["object"])) for e in admin.acl_log()
    }  # it was asked
    admin.close()


async def test_exists_only_while_the_chosen_prefix_is_in_use() -> None:
    """Bounded cost: a prefix in use costs one pipeline of EXISTS on its eight marker keys."""
    client = fakeredis.FakeAsyncRedis()
    await client.incr("stm:outbox:seq")
    await client.hset("harel:outbox", "1", "{}")
    sent = _record_commands(client)

    hints = await prefix_hints(client, ["stm"])

    assert hints == []
    assert sent == ["EXISTS"] * 8
    await client.aclose()


async def test_an_empty_prefix_adds_the_well_known_exists_and_a_bounded_scan() -> None:
    client = fakeredis.FakeAsyncRedis()
    await client.hset("harel:outbox", "1", "{}")
    await client.mset({f"other:exe:{n}": "{}" for n in range(50)})
    await client.zadd("zz:timers", {"x": 1.0})  # beyond what 3 steps of 5 keys examine, about
    sent = _record_commands(client)

    hints = await prefix_hints(client, ["stm"], scan_steps=3, scan_count=5)

    assert hints == [HINT]
    assert sent == ["EXISTS"] * 16 + ["SCAN"] * 3
    assert await scan_prefixes(client, steps=100, count=5) == {"harel", "zz"}
    await client.aclose()


def _record_commands(client: fakeredis.FakeAsyncRedis) -> list[str]:
    """The names of the commands ``client`` sends from now on, pipelined or not."""
    sent: list[str] = []
    real_pipeline, real_execute = client.pipeline, client.execute_command

    def recording_pipeline(*args: Any, **kwargs: Any) -> Any:
        pipe = real_pipeline(*args, **kwargs)
        original = pipe.execute_command

        def execute_command(*command: Any, **options: Any) -> Any:
            sent.append(str(command[0]).upper())
            return original(*command, **options)

        pipe.execute_command = execute_command  # type: ignore[method-assign]
        return pipe

    async def execute_command(*command: Any, **options: Any) -> Any:
        sent.append(str(command[0]).upper())
        return await real_execute(*command, **options)

    client.pipeline = recording_pipeline  # type: ignore[method-assign]
    client.execute_command = execute_command  # type: ignore[method-assign]
    return sent


def test_prefix_of_reads_the_prefix_off_a_marker_key() -> None:
    assert prefix_of(b"harel:outbox:seq") == "harel"
    assert prefix_of("app:stm:timers") == "app:stm"
    assert prefix_of("{billing}:relay:dead:outbox") == "{billing}"  # not the outbox of "{billing}:relay:dead"
    assert prefix_of(Keyspace("o").exe("1")) is None
    assert prefix_of("stm:relay:cursor:outbox") is None  # a relay swept stm: no engine wrote there
    assert prefix_of("stm:relay:attempts:timer") is None
    assert prefix_of(":outbox") is None
    assert prefix_of(b"\xff:outbox") is None


def test_hint_for_names_a_few_prefixes_sorted() -> None:
    assert hint_for("stm", {"harel"}) == HINT
    assert hint_for("stm", {"stm", "harel"}) == HINT
    assert hint_for("stm", set()) is None
    assert hint_for("orders", {"stm", "harel"}) == (
        "no keys under prefix 'orders'; found keys under 'harel', 'stm': did you mean one of them (--prefix)?"
    )
    assert hint_for("x", {"e", "d", "c", "b", "a"}) == (
        "no keys under prefix 'x'; found keys under 'a', 'b', 'c' and 2 more:"
        " did you mean one of them (--prefix)?"
    )


async def test_the_console_scans_once_a_minute_whatever_its_prefixes_and_polls() -> None:
    """Each poll asks EXISTS again, but one SCAN a minute serves every empty prefix."""
    client = fakeredis.FakeAsyncRedis()
    await client.hset("orders:outbox", "1", "{}")
    sent = _record_commands(client)
    clock = {"now": 0.0}
    poller = OverviewPoller(client, ["a", "b"], monotonic=lambda: clock["now"])

    first = await poller.current()
    for _ in range(3):
        clock["now"] += MIN_INTERVAL_S
        await poller.current()
    in_the_first_minute = sent.count("SCAN")
    clock["now"] += 60.0
    await poller.current()

    assert in_the_first_minute == 1
    assert sent.count("SCAN") == 2
    assert poller.reads == 5
    assert first.prefixes[1].warnings[-1] == (
        "no keys under prefix 'b'; found keys under 'orders': did you mean --prefix orders?"
    )
    await client.aclose()
