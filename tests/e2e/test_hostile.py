"""Hostile entries against a real redis-server and a real ``relayd sweep`` delivering to a JSONL file.

Each hostile entry, alone and all together inside a good backlog: no traceback, no hang, every
good entry delivered byte for byte, every bad one dead-lettered with its reason and its original
bytes, ``sweep --once`` exits 1, a long-running sweep answers ``/healthz`` throughout and exits 0
on SIGTERM. A prefix whose outbox key is a string is reported while its other kinds, and the
other prefixes, flow.
"""

from __future__ import annotations

import base64
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
import redis
from support.health import readyz
from support.ports import free_port
from support.processes import end_process
from support.seeding import outbox_value
from support.waiting import wait_until

from store import Keyspace
from tests.e2e.conftest import commit_backlog, read_jsonl, run_relayd, start_relayd

pytestmark = pytest.mark.slow

DEEP = 100_000


@dataclass(frozen=True)
class Hostile:
    """One hostile entry: where it goes, its bytes, and the reason it must be parked with."""

    name: str
    structure: str  # "outbox", "spawns" or "timers"
    ref: bytes  # hash field or zset member, as stored
    value: bytes | None  # hash value (None for a timer)
    reason: str


def _event(kind: object = "K", data: object = None, **extra: object) -> str:
    return orjson.dumps({"id": "ev", "kind": kind, "data": {} if data is None else data, **extra}).decode()


HOSTILE = [
    Hostile("field-not-utf8", "outbox", b"\xff\xfe7", outbox_value("a", "ev-bad-field"), "not_utf8"),
    Hostile("value-not-utf8", "outbox", b"900001", b'{"t": "a", "e": "\xff\xfe"}', "not_utf8"),
    Hostile("deep-brackets", "outbox", b"900002", b"[" * DEEP, "too_deep"),
    Hostile(
        "valid-deep-event",
        "outbox",
        b"900003",
        orjson.dumps(
            {"t": "a", "e": '{"id": "d", "kind": "K", "data": {"x": ' + "[" * DEEP + "]" * DEEP + "}}"}
        ),
        "too_deep",
    ),
    Hostile("empty-event", "outbox", b"900004", orjson.dumps({"t": "a", "e": "{}"}), "missing_field"),
    Hostile("numeric-kind", "outbox", b"900005", orjson.dumps({"t": "a", "e": _event(kind=5)}), "wrong_type"),
    Hostile(
        "list-data", "outbox", b"900006", orjson.dumps({"t": "a", "e": _event(data=[1, 2])}), "wrong_type"
    ),
    Hostile(
        "spawn-field-not-utf8", "spawns", b"\xc3\x28", b'{"p": "a", "c": "b", "r": "c", "x": {}}', "not_utf8"
    ),
    Hostile(
        "spawn-deep-context",
        "spawns",
        b"900007",
        b'{"p": "a", "c": "b", "r": "c", "x": ' + b"[" * DEEP + b"]" * DEEP + b"}",
        "too_deep",
    ),
    Hostile("timer-not-utf8", "timers", b"exe-\xff\x00path", None, "not_utf8"),
    Hostile("timer-256k-no-nul", "timers", b"F" * 256_000, None, "bad_member"),
]

#: A good entry written with ``HSET`` at a seq far above the counter (no INCR): delivered.
ABOVE_COUNTER_SEQ = 5001


def _seed_hostile(client: redis.Redis, prefix: str, cases: list[Hostile]) -> None:
    keyspace = Keyspace(prefix)
    for case in cases:
        if case.structure == "timers":
            client.zadd(keyspace.timers, {case.ref: time.time() - 5})
        else:
            client.hset(f"{prefix}:{case.structure}", case.ref, case.value)  # type: ignore[arg-type]


def _seed_above_counter(client: redis.Redis, prefix: str) -> bytes:
    value = outbox_value("above", "ev-above-counter", data={"n": ABOVE_COUNTER_SEQ})
    client.hset(Keyspace(prefix).outbox, str(ABOVE_COUNTER_SEQ), value)
    return value


def _good_outbox(client: redis.Redis, prefix: str) -> dict[int, bytes]:
    """Every good outbox entry as stored: seq -> the event's stored text."""
    stored = client.hgetall(Keyspace(prefix).outbox)
    good = {}
    for field, value in stored.items():
        try:
            seq, doc = int(field), orjson.loads(value)
        except (ValueError, orjson.JSONDecodeError):
            continue
        if seq < 900_000:
            good[seq] = doc["e"].encode()
    return good


def _delivered_lines(out: Path) -> list[bytes]:
    if not out.exists():
        return []
    complete, _, _ = out.read_bytes().rpartition(b"\n")
    return complete.splitlines()


def _assert_outbox_byte_for_byte(out: Path, prefix: str, good: dict[int, bytes]) -> None:
    by_id = {}
    for line in _delivered_lines(out):
        envelope = orjson.loads(line)
        if envelope["kind"] == "outbox" and envelope["prefix"] == prefix:
            by_id[envelope["id"]] = line
    assert set(by_id) == {f"{prefix}:outbox:{seq}" for seq in good}
    for seq, event in good.items():
        assert by_id[f"{prefix}:outbox:{seq}"].endswith(b',"event":' + event + b"}")


def _dead_letters(client: redis.Redis, prefix: str) -> list[dict[str, object]]:
    docs = []
    for kind in ("outbox", "spawn", "timer"):
        docs += [orjson.loads(raw) for raw in client.hvals(f"{prefix}:relay:dead:{kind}")]
    return docs


def _original_bytes(doc: dict[str, object], name: str) -> bytes:
    if f"{name}_b64" in doc:
        return base64.b64decode(str(doc[f"{name}_b64"]))
    return str(doc[name]).encode()


def _assert_parked(client: redis.Redis, prefix: str, cases: list[Hostile]) -> None:
    """Each case parked once, with its reason code, a reason text and its original bytes."""
    docs = _dead_letters(client, prefix)
    found = {}
    for doc in docs:
        if doc["kind"] == "timer":
            found[_original_bytes(doc, "member")] = doc
        else:
            found[_original_bytes(doc, "field")] = doc
    assert len(docs) == len(cases)
    for case in cases:
        doc = found[case.ref]
        assert (case.name, doc["reason_code"]) == (case.name, case.reason)
        assert doc["reason"]
        if case.value is not None:
            assert _original_bytes(doc, "value") == case.value


def _good_backlog(client: redis.Redis, prefix: str):
    return commit_backlog(client, prefix, executions=10, emits=8, spawns=2, past_timers=2, future_timers=1)


def _sweep_once(redis_url: str, out: Path, *prefixes: str) -> subprocess.CompletedProcess[str]:
    args = ["sweep", "--once", "--redis-url", redis_url, "--sink", f"jsonl:{out}", "--batch", "50"]
    for prefix in prefixes:
        args += ["--prefix", prefix]
    return run_relayd(*args, timeout_s=180)


@pytest.mark.parametrize("case", HOSTILE, ids=[c.name for c in HOSTILE])
def test_each_hostile_entry_alone_is_parked_and_the_backlog_delivered(
    redis_server, prefix: str, tmp_path: Path, case: Hostile
):
    client = redis_server.client()
    backlog = _good_backlog(client, prefix)
    good = _good_outbox(client, prefix)
    _seed_hostile(client, prefix, [case])
    out = tmp_path / "out.jsonl"

    result = _sweep_once(redis_server.url, out, prefix)

    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    _assert_outbox_byte_for_byte(out, prefix, good)
    assert len(read_jsonl(out)) == backlog.due_count
    _assert_parked(client, prefix, [case])
    assert client.hlen(Keyspace(prefix).outbox) == 0
    assert client.hlen(Keyspace(prefix).spawns) == 0


def test_an_entry_above_the_counter_is_delivered(redis_server, prefix: str, tmp_path: Path):
    """``HSET P:outbox 5001`` while the counter is far below: the reconcile scan finds it."""
    client = redis_server.client()
    backlog = _good_backlog(client, prefix)
    value = _seed_above_counter(client, prefix)
    assert int(client.get(Keyspace(prefix).outbox_seq)) < ABOVE_COUNTER_SEQ
    out = tmp_path / "out.jsonl"

    result = _sweep_once(redis_server.url, out, prefix)

    assert result.returncode == 0, result.stderr[-3000:]
    lines = [
        line
        for line in _delivered_lines(out)
        if f'"id":"{prefix}:outbox:{ABOVE_COUNTER_SEQ}"'.encode() in line
    ]
    assert len(lines) == 1
    assert lines[0].endswith(b',"event":' + orjson.loads(value)["e"].encode() + b"}")
    assert len(read_jsonl(out)) == backlog.due_count + 1
    assert client.hlen(Keyspace(prefix).outbox) == 0


def _seed_wrong_type_prefix(client: redis.Redis, prefix: str) -> tuple[int, int]:
    """A prefix whose outbox key is a string, with due timers and spawns that must flow."""
    backlog = commit_backlog(client, prefix, executions=3, emits=0, spawns=2, past_timers=2, future_timers=0)
    client.delete(Keyspace(prefix).outbox)
    client.set(Keyspace(prefix).outbox, "not a hash")
    return len(backlog.spawns), len(backlog.past_timers)


def _all_together(client: redis.Redis, prefix: str, broken: str):
    backlog = _good_backlog(client, prefix)
    _seed_above_counter(client, prefix)
    good = _good_outbox(client, prefix)
    _seed_hostile(client, prefix, HOSTILE)
    spawns, timers = _seed_wrong_type_prefix(client, broken)
    return backlog, good, spawns + timers


def _kinds_delivered(out: Path, prefix: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for envelope in read_jsonl(out):
        if envelope["prefix"] == prefix:
            counts[envelope["kind"]] = counts.get(envelope["kind"], 0) + 1
    return counts


def test_every_hostile_entry_together_and_a_wrong_type_key_once(redis_server, prefix: str, tmp_path: Path):
    client = redis_server.client()
    broken = prefix + "w"
    backlog, good, broken_due = _all_together(client, prefix, broken)
    out = tmp_path / "out.jsonl"

    result = _sweep_once(redis_server.url, out, prefix, broken)
    status = run_relayd(
        "status", "--json", "--redis-url", redis_server.url, "--prefix", prefix, "--prefix", broken
    )

    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    _assert_outbox_byte_for_byte(out, prefix, good)
    assert sum(_kinds_delivered(out, prefix).values()) == backlog.due_count + 1
    _assert_parked(client, prefix, HOSTILE)
    assert sum(_kinds_delivered(out, broken).values()) == broken_due
    assert _kinds_delivered(out, broken).get("outbox", 0) == 0
    wrong = [orjson.loads(line) for line in result.stderr.splitlines() if '"key_wrong_type"' in line]
    assert [(w["prefix"], w["kind"]) for w in wrong] == [(broken, "outbox")]
    assert f"{broken}:outbox is a string, not a hash" in wrong[0]["error"]
    reports = {r["prefix"]: r for r in orjson.loads(status.stdout)["prefixes"]}
    assert reports[broken]["wrong_type"] == {"outbox": f"{broken}:outbox is a string, not a hash"}
    assert reports[prefix]["wrong_type"] == {}


def _healthz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def test_a_long_running_sweep_answers_healthz_through_hostile_input_and_exits_0(
    redis_server, prefix: str, tmp_path: Path
):
    client = redis_server.client()
    broken = prefix + "w"
    backlog, good, broken_due = _all_together(client, prefix, broken)
    out = tmp_path / "out.jsonl"
    port = free_port()
    grace_s = 5
    proc = start_relayd(
        "sweep",
        "--redis-url",
        redis_server.url,
        "--prefix",
        prefix,
        "--prefix",
        broken,
        "--sink",
        f"jsonl:{out}",
        "--batch",
        "50",
        "--poll-interval",
        "0.2",
        "--shutdown-grace",
        str(grace_s),
        "--metrics-addr",
        f"127.0.0.1:{port}",
    )
    try:
        wait_until(lambda: _healthz(port) == 200, 30, "the relay to serve /healthz")
        answers = []

        def done() -> bool:
            answers.append(_healthz(port))
            parked = len(_dead_letters(client, prefix)) == len(HOSTILE)
            delivered = sum(_kinds_delivered(out, prefix).values()) == backlog.due_count + 1
            return parked and delivered and sum(_kinds_delivered(out, broken).values()) == broken_due

        wait_until(done, 120, "every good entry delivered and every bad one parked", poll_s=0.2)
        ready_status, ready_reason = readyz(port)
        proc.send_signal(signal.SIGTERM)
        exit_code = proc.wait(grace_s + 10)
    finally:
        end_process(proc, signal.SIGKILL)
    stderr = proc.stderr.read() if proc.stderr else ""

    assert set(answers) == {200}
    assert exit_code == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    assert ready_status == 503
    assert f"{broken}:outbox is a string, not a hash" in ready_reason
    _assert_outbox_byte_for_byte(out, prefix, good)
    _assert_parked(client, prefix, HOSTILE)
