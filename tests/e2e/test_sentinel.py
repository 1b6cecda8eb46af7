"""relayd and the store through Redis Sentinel (``redis+sentinel://``), with passwords everywhere.

One deployment for the module (``support.sentinel``: a master, a replica, three sentinels):
the master and the sentinels each require their own password. The master's comes from the URL
or ``--redis-password-file``; the sentinels' only from ``--sentinel-password-file`` (the
store: ``sentinel_password=``). The failover itself is ``tests/faults/test_sentinel_failover.py``.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import random
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.health import readyz
from support.ledger import assert_ledger, ledger_from_jsonl
from support.ports import pick_ports
from support.processes import end_process
from support.sentinel import SentinelDeployment
from support.tls import make_pki
from support.workload import Workload, stored_ids

from store import AsyncRedisStore, RedisStore

pytestmark = [pytest.mark.slow]

MASTER_PASSWORD = "master-pw-5Qx"
SENTINEL_PASSWORD = "sentinel-pw-9Tz"
RUN_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def deployment() -> Iterator[SentinelDeployment]:
    with SentinelDeployment(master_password=MASTER_PASSWORD, sentinel_password=SENTINEL_PASSWORD) as running:
        yield running


@pytest.fixture
def secrets(tmp_path: Path) -> dict[str, Path]:
    master, sentinel = tmp_path / "redis-password", tmp_path / "sentinel-password"
    master.write_text(MASTER_PASSWORD + "\n")
    sentinel.write_text(SENTINEL_PASSWORD + "\n")
    return {"master": master, "sentinel": sentinel}


@pytest.fixture
def sentinel_prefix() -> str:
    return "sen" + uuid.uuid4().hex[:10]


def relayd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["relayd", *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )


def test_store_from_url_finds_the_master_through_the_sentinels_sync_and_async(
    deployment: SentinelDeployment, sentinel_prefix: str
) -> None:
    """What the sync store commits through the sentinels, the async one reads the same way."""
    url = deployment.url(credentials=f":{MASTER_PASSWORD}")
    store = RedisStore.from_url(url, sentinel_password=SENTINEL_PASSWORD, prefix=sentinel_prefix)
    committed = Workload(store, rate_per_s=1e9, timer_delay_s=(-5.0, 0.0)).run(20)

    async def read() -> int:
        reader = AsyncRedisStore.from_url(url, sentinel_password=SENTINEL_PASSWORD, prefix=sentinel_prefix)
        try:
            return len(await reader.pending_outbox())
        finally:
            await reader.client.aclose()

    outbox = asyncio.run(read())
    direct = deployment.master_client()

    assert outbox == len(committed.of_kind("outbox")) > 0
    assert stored_ids(direct, sentinel_prefix) == set(committed.committed)
    direct.close()
    store.client.close()


def test_sweep_once_and_status_through_the_sentinels_with_password_files(
    deployment: SentinelDeployment, sentinel_prefix: str, secrets: dict[str, Path], tmp_path: Path
) -> None:
    """Both passwords from files; everything delivered and acked; no password in any output."""
    direct = deployment.master_client()
    committed = Workload(
        RedisStore(direct, prefix=sentinel_prefix), rate_per_s=1e9, timer_delay_s=(-5.0, 0.0)
    )
    ledger_in = committed.run(60)
    out = tmp_path / "out.jsonl"
    connection = [
        "--redis-url", deployment.url(), "--prefix", sentinel_prefix,
        "--redis-password-file", str(secrets["master"]),
        "--sentinel-password-file", str(secrets["sentinel"]),
    ]  # fmt: skip

    status = relayd("status", "--json", *connection)
    swept = relayd("sweep", "--once", "--log-level", "debug", "--sink", f"jsonl:{out}", *connection)

    assert status.returncode == 0, status.stderr
    (report,) = json.loads(status.stdout)["prefixes"]
    assert sum(report["backlog"].values()) == len(ledger_in.committed)
    assert swept.returncode == 0, swept.stderr
    assert_ledger(ledger_from_jsonl("sentinel-sweep-once", ledger_in.committed, out), max_duplicates=0)
    assert stored_ids(direct, sentinel_prefix) == set()
    for text in (status.stdout, status.stderr, swept.stdout, swept.stderr):
        assert MASTER_PASSWORD not in text
        assert SENTINEL_PASSWORD not in text
    direct.close()


def test_a_wrong_sentinel_password_fails_at_once_with_exit_code_3(
    deployment: SentinelDeployment, tmp_path: Path
) -> None:
    """Every sentinel refuses the credentials: no retries, one line, exit 3, no password shown."""
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-sentinel-pw")

    result = relayd("status", "--redis-url", deployment.url(), "--sentinel-password-file", str(wrong))

    assert result.returncode == 3
    assert "rejected the credentials" in result.stderr
    assert "not-the-sentinel-pw" not in result.stderr
    assert "redis_unreachable" not in result.stderr  # no retry was logged


def test_redis_stream_sink_on_a_sentinel_destination(
    deployment: SentinelDeployment, sentinel_prefix: str, secrets: dict[str, Path]
) -> None:
    """The redis-stream sink finds its destination's master through the sentinels too."""
    direct = deployment.master_client()
    ledger_in = Workload(RedisStore(direct, prefix=sentinel_prefix), rate_per_s=1e9).run(30)
    stream = f"{sentinel_prefix}:events"
    sink = f"redis-stream:{deployment.url(credentials=f':{MASTER_PASSWORD}')}?stream={stream}"

    swept = relayd(
        "sweep", "--once", "--redis-url", deployment.url(), "--prefix", sentinel_prefix,
        "--redis-password-file", str(secrets["master"]), "--sentinel-password-file", str(secrets["sentinel"]),
        "--outbox-sink", sink, "--spawn-sink", sink, "--timer-sink", "log",
    )  # fmt: skip

    assert swept.returncode == 0, swept.stderr
    ids = {fields[b"id"].decode() for _, fields in direct.xrange(stream)}
    assert ids == {i for i in ledger_in.committed if not i.startswith("timeout:")}
    assert MASTER_PASSWORD not in swept.stderr
    direct.close()


def test_readyz_says_it_waits_for_the_sentinels_to_name_a_master(
    deployment: SentinelDeployment, secrets: dict[str, Path], tmp_path: Path
) -> None:
    """A service the sentinels do not know: the daemon keeps trying, /readyz says for what."""
    port = pick_ports(1, random.Random())[0]
    log = tmp_path / "relay.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [
                "relayd", "sweep", "--redis-url", deployment.url(service="nosuchmaster"), "--sink", "null",
                "--sentinel-password-file", str(secrets["sentinel"]),
                "--metrics-addr", f"127.0.0.1:{port}",
            ],
            stdout=sink,
            stderr=sink,
        )  # fmt: skip
    try:
        answer = _wait_for_readyz_mentioning("MasterNotFoundError", port, proc)
    finally:
        end_process(proc)

    status, body = answer
    assert status == 503
    assert "waiting for the sentinels to name a master for 'nosuchmaster'" in body
    assert SENTINEL_PASSWORD not in log.read_text()


def _wait_for_readyz_mentioning(text: str, port: int, proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, "relayd sweep exited"
        status, body = readyz(port)
        if text in body:
            return status, body
        time.sleep(0.1)
    raise AssertionError(f"/readyz never mentioned {text!r}")


def test_sweep_once_over_verified_tls_to_the_sentinels_and_the_master(tmp_path: Path) -> None:
    """``rediss+sentinel://``: TLS to the sentinels and to the master they name, both verified."""
    (tmp_path / "pki").mkdir()
    pki = make_pki(tmp_path / "pki", now=datetime.datetime.now(datetime.UTC))
    with SentinelDeployment(pki=pki) as tls_deployment:
        direct = tls_deployment.master_client()
        prefix = "sentls" + uuid.uuid4().hex[:8]
        ledger_in = Workload(
            RedisStore(direct, prefix=prefix), rate_per_s=1e9, timer_delay_s=(-5.0, 0.0)
        ).run(30)
        out = tmp_path / "out.jsonl"
        connection = ["--redis-url", tls_deployment.url(), "--prefix", prefix]

        trusted = relayd(
            "sweep", "--once", "--sink", f"jsonl:{out}", "--redis-ca-file", str(pki.ca_cert), *connection
        )
        untrusted = relayd("status", "--redis-ca-file", str(pki.wrong_ca_cert), *connection)

        assert tls_deployment.url().startswith("rediss+sentinel://")
        assert trusted.returncode == 0, trusted.stderr
        assert_ledger(ledger_from_jsonl("sentinel-tls", ledger_in.committed, out), max_duplicates=0)
        assert stored_ids(direct, prefix) == set()
        assert untrusted.returncode == 3
        direct.close()
