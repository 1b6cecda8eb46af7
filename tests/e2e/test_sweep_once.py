"""``relayd sweep --once --sink jsonl:FILE`` end to end, over a real redis-server and fakeredis over TCP."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
from harel.engine.core import timeout_event
from harel.engine.execution import Execution as HarelExecution
from harel.engine.store import RedisStore as HarelRedisStore
from harel.engine.store import TimerOp as HarelTimerOp
from harel.spec.states import Event as HarelEvent

from tests.e2e.conftest import commit_backlog, read_jsonl, run_relayd, snapshot_engine_keys

ENVELOPE_KEYS = {"v", "kind", "id", "prefix", "attempt", "relayed_at"}


def _assert_common(env: dict[str, Any], prefix: str, started: float, finished: float) -> None:
    assert env["v"] == "relayd/1"
    assert env["prefix"] == prefix
    assert env["attempt"] == 1
    assert started - 1 <= env["relayed_at"] <= finished + 1


def test_once_delivers_a_mixed_backlog_exactly_and_acks_it(e2e_redis, prefix: str, tmp_path: Path):
    client = e2e_redis.client
    backlog = commit_backlog(client, prefix)
    untouched = snapshot_engine_keys(client, prefix)
    out = tmp_path / "out.jsonl"
    started = time.time()

    result = run_relayd(
        "sweep",
        "--once",
        "--redis-url",
        e2e_redis.url,
        "--prefix",
        prefix,
        "--sink",
        f"jsonl:{out}",
        "--batch",
        "500",
    )

    finished = time.time()
    assert result.returncode == 0, result.stderr[-2000:]
    lines = read_jsonl(out)
    by_kind: dict[str, list[dict[str, Any]]] = {"outbox": [], "spawn": [], "timer": []}
    for env in lines:
        _assert_common(env, prefix, started, finished)
        by_kind[env["kind"]].append(env)
    assert len(lines) == backlog.due_count

    outbox = {env["seq"]: env for env in by_kind["outbox"]}
    assert set(outbox) == set(backlog.outbox)
    for seq, (target, event) in backlog.outbox.items():
        env = outbox[seq]
        assert set(env) == ENVELOPE_KEYS | {"seq", "target_id", "event"}
        assert env["id"] == f"{prefix}:outbox:{seq}"
        assert env["target_id"] == target
        assert env["event"] == event

    spawns = {
        (e["parent_id"], e["child_id"], e["root_path"], orjson_key(e["context"])): e for e in by_kind["spawn"]
    }
    assert set(spawns) == {(p, c, r, orjson_key(x)) for p, c, r, x in backlog.spawns}
    for env in by_kind["spawn"]:
        assert set(env) == ENVELOPE_KEYS | {"seq", "parent_id", "child_id", "root_path", "context"}
        assert env["id"] == f"{prefix}:spawn:{env['seq']}"

    timers = {(e["execution_id"], e["path"]): e for e in by_kind["timer"]}
    assert set(timers) == set(backlog.past_timers)
    for (exe_id, path), fire_at in backlog.past_timers.items():
        env = timers[(exe_id, path)]
        assert set(env) == ENVELOPE_KEYS | {"execution_id", "path", "fire_at", "event"}
        assert env["fire_at"] == fire_at
        assert env["id"] == f"timeout:{exe_id}:{path}:{fire_at}"
        assert env["event"] == {
            "id": env["id"],
            "kind": "Timeout",
            "data": {"path": path, "fire_at": fire_at},
        }

    outbox_order = [e["seq"] for e in by_kind["outbox"]]
    assert outbox_order == sorted(outbox_order)
    timer_order = [e["fire_at"] for e in by_kind["timer"]]
    assert timer_order == sorted(timer_order)

    assert client.hlen(f"{prefix}:outbox") == 0
    assert client.hlen(f"{prefix}:spawns") == 0
    remaining = dict(client.zrange(f"{prefix}:timers", 0, -1, withscores=True))
    assert remaining == {f"{e}\x00{p}".encode(): f for (e, p), f in backlog.future_timers.items()}
    assert snapshot_engine_keys(client, prefix) == untouched


def orjson_key(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def test_once_relays_a_backlog_harel_committed(e2e_redis, prefix: str, tmp_path: Path):
    """A backlog written by harel's own RedisStore relays, timer events equal harel's timeout_event."""
    client = e2e_redis.client
    harel = HarelRedisStore(client, prefix=prefix)
    now = time.time()
    expected_timers = {}
    expected_events = {}
    for n in range(30):
        exe = HarelExecution(id=f"h-{n}", definition_id="d")
        events = [
            ("target-a" if i % 2 else None, HarelEvent(kind="Ping", data={"n": n, "i": i})) for i in range(5)
        ]
        timer_ops = [HarelTimerOp("schedule", f"s/{i}", now - 10 - i - n / 7) for i in range(3)]
        timer_ops.append(HarelTimerOp("schedule", "future", now + 3600))
        seqs = harel.commit(exe, events, None, timers=tuple(timer_ops), spawns=((f"h-{n}.c", "r", {"n": n}),))
        for seq, (_target, event) in zip(seqs, events, strict=True):
            expected_events[seq] = event.model_dump(mode="json")
        for t in timer_ops[:-1]:
            expected_timers[(exe.id, t.path)] = timeout_event(exe.id, t.path, t.fire_at).model_dump(
                mode="json"
            )
    out = tmp_path / "harel.jsonl"

    result = run_relayd(
        "sweep", "--once", "--redis-url", e2e_redis.url, "--prefix", prefix, "--sink", f"jsonl:{out}"
    )

    assert result.returncode == 0, result.stderr[-2000:]
    lines = read_jsonl(out)
    timers = {(e["execution_id"], e["path"]): e for e in lines if e["kind"] == "timer"}
    assert set(timers) == set(expected_timers)
    for key, event in expected_timers.items():
        assert timers[key]["event"]["id"] == event["id"]
        assert timers[key]["event"]["data"] == event["data"]
        assert timers[key]["id"] == event["id"]
    outbox = {e["seq"]: e["event"] for e in lines if e["kind"] == "outbox"}
    assert {seq: (ev["id"], ev["kind"], ev["data"]) for seq, ev in outbox.items()} == {
        seq: (ev["id"], ev["kind"], ev["data"]) for seq, ev in expected_events.items()
    }
    assert sum(1 for e in lines if e["kind"] == "spawn") == 30
    assert client.zcard(f"{prefix}:timers") == 30


#: Malformed shapes: (structure, field or member, value, expected reason code).
POISON = [
    ("outbox", "900", b"not json", "bad_json"),
    ("outbox", "901", b'{"t": "a"}', "missing_field"),
    ("outbox", "902", b'{"t": 5, "e": "{}"}', "wrong_type"),
    ("outbox", "x1", b'{"t": "a", "e": "{\\"id\\":\\"e\\",\\"kind\\":\\"k\\",\\"data\\":{}}"}', "bad_seq"),
    ("spawns", "900", b"[1, 2]", "wrong_type"),
    ("spawns", "901", b'{"p": "a", "c": "b"}', "missing_field"),
    ("timers", "no-separator", None, "bad_member"),
]


def test_poison_entries_are_dead_lettered_with_reasons_and_replayed(e2e_redis, prefix: str, tmp_path: Path):
    """Each malformed shape is parked with its reason, everything else delivered, replay puts them back."""
    client = e2e_redis.client
    backlog = commit_backlog(client, prefix, executions=5, emits=4, spawns=2, past_timers=2, future_timers=0)
    for structure, ref, value, _reason in POISON:
        if structure == "timers":
            client.zadd(f"{prefix}:timers", {ref: time.time() - 5})
        else:
            client.hset(f"{prefix}:{structure}", ref, value)
    out = tmp_path / "out.jsonl"
    common = ["--redis-url", e2e_redis.url, "--prefix", prefix]

    result = run_relayd("sweep", "--once", "--sink", f"jsonl:{out}", *common)
    listed = run_relayd("dlq", "list", "--json", *common)
    replayed = run_relayd("dlq", "replay", "--all", *common)

    assert result.returncode == 1, result.stderr[-2000:]
    assert len(read_jsonl(out)) == backlog.due_count
    letters = orjson.loads(listed.stdout)
    assert sorted(letter["reason_code"] for letter in letters) == sorted(p[3] for p in POISON)
    assert f"replayed {len(POISON)}" in replayed.stdout
    for structure, ref, value, _reason in POISON:
        if structure == "timers":
            assert client.zscore(f"{prefix}:timers", ref) is not None
        elif ref.isdigit():  # back under a new seq, as a new commit
            assert client.hget(f"{prefix}:{structure}", ref) is None
            assert value in client.hvals(f"{prefix}:{structure}")
        else:
            assert client.hget(f"{prefix}:{structure}", ref) == value
    assert client.hlen(f"{prefix}:relay:dead:outbox") == 0
