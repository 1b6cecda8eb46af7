"""The long-running ``relayd sweep``: SIGTERM mid-drain, SIGKILL and restart, /metrics, /readyz, demo."""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.ports import free_port
from support.waiting import wait_until

from tests.e2e.conftest import (
    commit_backlog,
    read_jsonl,
    run_relayd,
    start_relayd,
)

REPO = Path(__file__).resolve().parents[2]
PYPATH = {"PYTHONPATH": str(REPO)}

#: Every metric name of docs/metrics.md as exposed (histograms by their ``_bucket``/``_sum``/``_count``).
DOCUMENTED_METRICS = (
    "relayd_delivered_total",
    "relayd_delivery_attempts_total",
    "relayd_dead_lettered_total",
    "relayd_backlog_entries",
    "relayd_dead_letters",
    "relayd_oldest_due_age_seconds",
    "relayd_timer_lag_seconds",
    "relayd_sink_latency_seconds",
    "relayd_sweep_duration_seconds",
    "relayd_redis_errors_total",
    "relayd_active",
    "relayd_lease_transitions_total",
    "relayd_last_sweep_timestamp_seconds",
    "relayd_build_info",
)


def slow_sink(path: Path, delay_s: float = 0.05) -> str:
    return f"python:tests.e2e.slow_sink:SlowJsonl?path={path}&delay_s={delay_s}"


def delivered_ids(path: Path) -> Counter[str]:
    return Counter(env["id"] for env in read_jsonl(path))


def expected_ids(backlog) -> set[str]:
    """Outbox and timer ids known up front; spawn ids come from their seqs (all of them)."""
    ids = {f"{backlog.prefix}:outbox:{seq}" for seq in backlog.outbox}
    ids |= {f"{backlog.prefix}:spawn:{seq}" for seq in range(1, len(backlog.spawns) + 1)}
    ids |= {f"timeout:{e}:{p}:{f}" for (e, p), f in backlog.past_timers.items()}
    return ids


def scrape(port: int, path: str = "/metrics") -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=5)


def test_sigterm_mid_drain_exits_0_within_the_grace_and_loses_nothing(e2e_redis, prefix: str, tmp_path: Path):
    client = e2e_redis.client
    backlog = commit_backlog(
        client, prefix, executions=60, emits=30, spawns=5, past_timers=5, future_timers=0
    )
    out = tmp_path / "out.jsonl"
    proc = start_relayd(
        "sweep",
        "--redis-url",
        e2e_redis.url,
        "--prefix",
        prefix,
        "--sink",
        slow_sink(out, 0.1),
        "--batch",
        "50",
        "--metrics-addr",
        f"127.0.0.1:{free_port()}",
        "--shutdown-grace",
        "5",
        env=PYPATH,
    )
    wait_until(lambda: len(read_jsonl(out)) >= 200)

    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    code = proc.wait(timeout=15)
    took_s = time.monotonic() - sent

    _, stderr = proc.communicate()
    assert code == 0, stderr[-2000:]
    assert took_s < 5 + 2
    delivered = set(delivered_ids(out))
    left = {f"{prefix}:outbox:{int(f)}" for f in client.hkeys(f"{prefix}:outbox")}
    left |= {f"{prefix}:spawn:{int(f)}" for f in client.hkeys(f"{prefix}:spawns")}
    for member, fire_at in client.zrange(f"{prefix}:timers", 0, -1, withscores=True):
        exe_id, _, path = member.decode().partition("\x00")
        left.add(f"timeout:{exe_id}:{path}:{fire_at}")
    assert delivered | left >= expected_ids(backlog)
    assert len(delivered) < backlog.due_count  # it really stopped mid-drain
    assert client.get(f"{prefix}:relay:lease") is None  # released on the way out


@pytest.mark.crash
def test_sigkill_mid_drain_and_restart_delivers_everything_at_least_once(
    redis_server, prefix: str, tmp_path: Path
):
    client = redis_server.client()
    backlog = commit_backlog(
        client, prefix, executions=60, emits=30, spawns=5, past_timers=5, future_timers=0
    )
    out = tmp_path / "out.jsonl"
    batch, kills = 50, 3
    args = ["--redis-url", redis_server.url, "--prefix", prefix, "--batch", str(batch), "--lease-ttl", "1"]
    for n in range(kills):
        proc = start_relayd(
            "sweep",
            *args,
            "--sink",
            slow_sink(out, 0.05),
            "--metrics-addr",
            f"127.0.0.1:{free_port()}",
            env=PYPATH,
            stderr=subprocess.DEVNULL,
        )
        target = 300 * (n + 1)
        wait_until(lambda t=target: len(read_jsonl(out)) >= t)
        proc.kill()
        proc.wait(5)
    time.sleep(1.2)  # the dead replica's lease expires (--lease-ttl 1)

    final = run_relayd("sweep", "--once", *args, "--sink", f"jsonl:{out}")

    assert final.returncode == 0, final.stderr[-2000:]
    counts = delivered_ids(out)
    assert set(counts) == expected_ids(backlog)
    duplicates = sum(n - 1 for n in counts.values())
    assert duplicates <= kills * batch * 3  # at most one unacked batch per kind per kill
    assert client.hlen(f"{prefix}:outbox") == 0
    assert client.hlen(f"{prefix}:spawns") == 0
    assert client.zcard(f"{prefix}:timers") == 0


def test_metrics_scraped_during_a_run_match_what_was_delivered(e2e_redis, prefix: str, tmp_path: Path):
    client = e2e_redis.client
    backlog = commit_backlog(
        client, prefix, executions=20, emits=10, spawns=3, past_timers=4, future_timers=2
    )
    out = tmp_path / "out.jsonl"
    port = free_port()
    proc = start_relayd(
        "sweep",
        "--redis-url",
        e2e_redis.url,
        "--prefix",
        prefix,
        "--sink",
        f"jsonl:{out}",
        "--metrics-addr",
        f"127.0.0.1:{port}",
    )
    try:
        # Every due id, not a line count: a redelivery (at-least-once) must not end the wait early.
        wait_until(lambda: set(delivered_ids(out)) >= expected_ids(backlog))

        def settled():
            text = scrape(port).text
            families = {f.name: f for f in text_string_to_metric_families(text)}
            delivered = {
                s.labels["kind"]: s.value
                for s in families["relayd_delivered"].samples
                if s.name == "relayd_delivered_total" and s.labels.get("prefix") == prefix
            }
            return families if delivered.get("outbox") == len(backlog.outbox) else None

        families = wait_until(settled, timeout_s=15)
        ready = scrape(port, "/readyz")
        live = scrape(port, "/healthz")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)

    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples
    }
    exposed = {name for name, _labels in samples}
    for name in DOCUMENTED_METRICS:
        assert name in exposed or f"{name}_count" in exposed, name

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted({"prefix": prefix, **labels}.items())))]

    assert value("relayd_delivered_total", kind="outbox") == len(backlog.outbox)
    assert value("relayd_delivered_total", kind="spawn") == len(backlog.spawns)
    assert value("relayd_delivered_total", kind="timer") == len(backlog.past_timers)
    assert value("relayd_active") == 1
    assert value("relayd_backlog_entries", kind="outbox") == 0
    assert value("relayd_dead_letters", kind="outbox") == 0
    assert (ready.status_code, live.status_code) == (200, 200)


@pytest.mark.crash
def test_readyz_follows_redis_and_the_relay_resumes_by_itself(own_redis_server, prefix: str, tmp_path: Path):
    client = own_redis_server.client()
    out = tmp_path / "out.jsonl"
    port = free_port()
    proc = start_relayd(
        "sweep",
        "--redis-url",
        own_redis_server.url,
        "--prefix",
        prefix,
        "--sink",
        f"jsonl:{out}",
        "--metrics-addr",
        f"127.0.0.1:{port}",
        "--poll-interval",
        "0.2",
        "--lease-ttl",
        "1",
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: scrape_ok(port, "/readyz") == 200)

        own_redis_server.stop()
        wait_until(lambda: scrape_ok(port, "/readyz") == 503, timeout_s=20)
        own_redis_server.start()
        wait_until(lambda: scrape_ok(port, "/readyz") == 200, timeout_s=30)
        client = own_redis_server.client()
        backlog = commit_backlog(
            client, prefix, executions=5, emits=4, spawns=1, past_timers=1, future_timers=0
        )
        # Every due id, not a line count: a pooled connection that died with the server makes
        # the first pass after it fail and its entries go again, which a count would take for
        # the timers still to come.
        wait_until(lambda: set(delivered_ids(out)) >= expected_ids(backlog), timeout_s=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)

    assert set(delivered_ids(out)) == expected_ids(backlog)


def scrape_ok(port: int, path: str) -> int | None:
    try:
        return scrape(port, path).status_code
    except httpx.HTTPError:
        return None


@pytest.mark.slow
def test_demo_exits_0_with_every_kind_delivered():
    result = run_relayd("demo", "--duration", "10", timeout_s=60, env={"COLUMNS": "200"})

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    summary = result.stdout[result.stdout.index("relayd demo summary") :]
    for kind in ("spawn", "outbox", "timer"):
        row = next(line for line in summary.splitlines() if f" {kind} " in line)
        committed, delivered = (int(cell) for cell in row.replace("│", " ").split()[1:3])
        assert committed > 0
        assert delivered == committed
    assert "every committed entry that came due was delivered" in result.stdout
