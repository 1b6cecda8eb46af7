"""No silent drain: a misspelt ``RELAYD_*`` variable or a sweep without a sink stops with exit 2
before anything is read, and leaves the backlog in Redis (a real redis-server)."""

from __future__ import annotations

import uuid
from pathlib import Path

import orjson
from support.redis_server import RedisServer

from relayd.config.environment import ALLOW_UNKNOWN
from relayd.config.settings import NO_SINK_HINT
from tests.e2e.conftest import commit_backlog, run_relayd


def _backlog_sizes(server: RedisServer, prefix: str) -> tuple[int, int, int]:
    client = server.client()
    return client.hlen(f"{prefix}:outbox"), client.hlen(f"{prefix}:spawns"), client.zcard(f"{prefix}:timers")


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_misspelt_variable_exits_2_naming_the_right_one_and_acks_nothing(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """``RELAYD_SINKS`` for ``RELAYD_SINK``: one line naming the closest variable, exit 2."""
    prefix = f"typo-{uuid.uuid4().hex[:8]}"
    commit_backlog(redis_server.client(), prefix, executions=6, emits=5, spawns=1, past_timers=2)
    before = _backlog_sizes(redis_server, prefix)
    out = tmp_path / "x.jsonl"

    result = run_relayd(
        "sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix,
        env={"RELAYD_SINKS": f"jsonl:{out}"},
    )  # fmt: skip

    assert result.returncode == 2, result.stderr
    assert _one_error_line(result.stderr) == (
        "relayd: error: unknown environment variable RELAYD_SINKS (did you mean RELAYD_SINK?); "
        f"if it is meant for something else, list it in {ALLOW_UNKNOWN}"
    )
    assert _backlog_sizes(redis_server, prefix) == before
    assert min(before) > 0
    assert not out.exists()


def test_a_sweep_without_a_sink_exits_2_with_the_hint_and_acks_nothing(redis_server: RedisServer) -> None:
    prefix = f"nosink-{uuid.uuid4().hex[:8]}"
    commit_backlog(redis_server.client(), prefix, executions=6, emits=5, spawns=1, past_timers=2)
    before = _backlog_sizes(redis_server, prefix)

    result = run_relayd("sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix)

    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert line == f"relayd: error: no sink for spawn, outbox, timer entries: {NO_SINK_HINT}"
    assert _backlog_sizes(redis_server, prefix) == before


def test_an_allowed_variable_passes_and_the_named_log_sink_logs_whole_envelopes(
    redis_server: RedisServer,
) -> None:
    """The escape lets a variable meant for something else through; ``--sink log`` named on
    purpose still drains, and each line carries the whole envelope, not only its id."""
    prefix = f"logged-{uuid.uuid4().hex[:8]}"
    commit_backlog(
        redis_server.client(), prefix, executions=2, emits=2, spawns=1, past_timers=1, future_timers=0
    )

    result = run_relayd(
        "sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix, "--sink", "log",
        env={"RELAYD_SIDECAR_MODE": "on", ALLOW_UNKNOWN: "RELAYD_SIDECAR_MODE"},
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    lines = [
        orjson.loads(line) for line in (result.stdout + result.stderr).splitlines() if line.startswith("{")
    ]
    logged = [line for line in lines if line.get("event") == "envelope"]
    assert sorted(line["kind"] for line in logged) == ["outbox"] * 4 + ["spawn"] * 2 + ["timer"] * 2
    for line in logged:
        assert line["envelope"]["id"] == line["id"]
        assert line["envelope"]["v"] == "relayd/1"
    outbox = next(line["envelope"] for line in logged if line["kind"] == "outbox")
    assert outbox["event"]["kind"] == "Ping"
    assert _backlog_sizes(redis_server, prefix) == (0, 0, 0)
