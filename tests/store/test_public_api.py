"""``store.__all__`` is exactly what the package exports, and every script declares its keys."""

from __future__ import annotations

import importlib
import re
from importlib.resources import files

import redis
from redis.crc import key_slot

import store
from store import Event, Execution, RedisStore, TimerOp


def test_every_public_name_resolves_to_its_module_s_object() -> None:
    """Each name of ``__all__`` is the very object its module defines (loaded lazily or not)."""
    for name in store.__all__:
        home = importlib.import_module(store._HOMES[name])

        assert getattr(store, name) is getattr(home, name), name


def test_every_lua_script_opens_with_its_keys_and_touches_only_declared_keys() -> None:
    for resource in files("store.scripts").iterdir():
        if not resource.name.endswith(".lua"):
            continue
        source = resource.read_text()
        calls = re.findall(r"redis\.call\('(\w+)',\s*([^,)]+)", source)

        assert source.startswith("-- "), resource.name
        assert "KEYS[1]" in source.split("\n\n")[0] or "KEYS[1]" in source[:600], resource.name
        assert calls, resource.name
        assert all(re.fullmatch(r"KEYS\[\d+\]", key.strip()) for _, key in calls), (resource.name, calls)


def test_a_hash_tag_prefix_keeps_every_key_in_one_slot(redis_server) -> None:
    """Run every script and commit path with ``{tag}`` on the real server; one slot for all keys."""
    client: redis.Redis = redis_server.client()
    prefix = "{tag7}"
    s = RedisStore(client, prefix=prefix)
    exe = Execution(id="x", definition_id="d")
    s.commit(exe, [])
    s.commit(exe, [("t", Event(kind="E"))], "ev", timers=(TimerOp("schedule", "p", 1.0),), trace={})
    s.commit(exe, [], spawns=(("c", "r", {}),))
    assert s.delete_timer("x", "p", 1.0)
    reader = s.backlog("outbox")
    reader.start()
    reader.read_new(10, now=0.0)
    reader.checkpoint()

    keys = client.keys("{tag7}:*")

    assert len(keys) >= 8
    assert {key_slot(k) for k in keys} == {key_slot(b"{tag7}")}
    client.delete(*keys)
    client.close()
