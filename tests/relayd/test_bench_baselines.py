"""Per-sink client baselines (``relayd.bench.baselines``) and how ``relayd bench`` measures them."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
import redis.asyncio as aioredis
from typer.testing import CliRunner

from relayd.bench import harness
from relayd.bench.baselines import ClientBaseline, _with_options, baseline_for
from relayd.bench.seed import drain_like_incumbent
from relayd.cli.app import app
from relayd.envelope import Kind
from relayd.sinks import SinkOptions, SinkSpec
from relayd.sinks.null import NullSink

#: ``relayd bench`` configures logging onto CliRunner's stream; later tests must not log there.
pytestmark = pytest.mark.usefixtures("restore_logging")


def _bench(*args: str) -> dict:
    result = CliRunner().invoke(app, ["bench", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_scheme_finds_its_module_and_one_without_falls_back() -> None:
    """webhook and jsonl have a publish baseline; the stream and null sinks keep the incumbent drain."""
    webhook, jsonl = baseline_for("webhook:http://127.0.0.1:1/hook"), baseline_for("jsonl:/tmp/x")

    assert webhook is not None
    assert webhook.publish is not None
    assert webhook.drain_backlog is None
    assert jsonl is not None
    assert jsonl.publish is not None
    assert baseline_for("redis-stream:redis://127.0.0.1:1?stream=s") is None
    assert baseline_for("null") is None


async def test_a_three_argument_publish_is_called_without_the_options() -> None:
    """The contract's first form takes no options; the bench hands them only to a fourth parameter."""
    seen: list[tuple] = []

    async def publish(spec: str, bodies: Sequence[bytes], keys: Sequence[str | None]) -> int:
        seen.append((spec, list(bodies), list(keys)))
        return len(bodies)

    confirmed = await _with_options(publish)("x:y", [b"{}"], ["k"], SinkOptions())

    assert confirmed == 1
    assert seen == [("x:y", [b"{}"], ["k"])]


@pytest.mark.slow
def test_webhook_local_starts_a_server_and_measures_the_raw_client(tmp_path) -> None:
    """``webhook:local``: relay and raw client each deliver every entry to a server the bench starts."""
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")

    report = _bench(
        "--sink",
        "webhook:local",
        "--kinds",
        "outbox",
        "--backlog",
        "60",
        "--webhook-secret-file",
        str(secret),
    )

    (row,) = report["kinds"]
    assert report["problems"] == []
    assert row["baseline_by"] == "webhook client publishing the same bodies"
    assert (row["relay"]["delivered"], row["baseline"]["delivered"], row["baseline"]["left"]) == (60, 60, 0)
    assert row["relay"]["cpu_per_entry_us"] > 0
    assert row["speedup"] > 0


def test_a_drain_backlog_baseline_drains_an_identical_backlog(redis_server, monkeypatch) -> None:
    """The second form gets the Redis URL, its own prefix and the kind; what it left is counted."""
    calls: list[tuple[str, Kind]] = []

    async def drain_backlog(redis_url: str, prefix: str, kind: Kind) -> int:
        calls.append((prefix, kind))
        client = aioredis.Redis.from_url(redis_url)
        sink = NullSink(SinkSpec("null"), SinkOptions())
        try:
            return await drain_like_incumbent(client, prefix, kind, sink, clock=lambda: 4e9)
        finally:
            await client.aclose()

    found = ClientBaseline("null", drain_backlog=drain_backlog)
    monkeypatch.setattr(harness, "baseline_for", lambda spec: found)

    report = _bench(
        "--redis-url", redis_server.url, "--sink", "null", "--kinds", "outbox,timer", "--backlog", "40"
    )

    assert [kind for _, kind in calls] == ["outbox", "timer"]
    assert all(prefix.startswith("bench") for prefix, _ in calls)
    for row in report["kinds"]:
        assert row["baseline_by"] == "null's own relay draining an identical backlog"
        assert (row["baseline"]["delivered"], row["baseline"]["left"]) == (40, 0)
    assert report["problems"] == []
