"""A real ``relayd sweep`` subprocess for the deploy tests: what the rules, the dashboard and the
image's HEALTHCHECK are checked against.

Real Redis only: the subject is what the relayd process exports over HTTP, which does not
depend on the Redis backend (and a subprocess cannot reach fakeredis's in-process server).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from support.ports import free_port
from support.seeding import Entries


def _seed(client: Any, prefix: str, now_s: float) -> None:
    """Leave one entry of each kind plus a malformed outbox entry, the way an engine's commit would.

    Written in the shapes of docs/internals.md#key-space (``support.seeding``), not through the
    store's commit.
    """
    entries = Entries(client.pipeline(transaction=False), prefix)
    entries.outbox(1, "exe-1", "ev-1").raw_outbox("2", "not json").counters(outbox=2)
    entries.spawn(1, "exe-1", "exe-1.child", "root").counters(spawns=1)
    entries.timer("exe-1", "root.waiting", now_s - 5.0)
    entries.pipe.execute()


def _families(text: str) -> list[Metric]:
    return list(text_string_to_metric_families(text))


def _settled(families: list[Metric]) -> bool:
    """The seeded entries have gone through: a delivery of each kind and one dead letter."""
    delivered_kinds = {
        s.labels.get("kind")
        for f in families
        for s in f.samples
        if s.name == "relayd_delivered_total" and s.value >= 1
    }
    dead = sum(s.value for f in families for s in f.samples if s.name == "relayd_dead_lettered_total")
    return len(delivered_kinds) >= 3 and dead >= 1


@pytest.fixture(scope="session")
def running_relayd(
    redis_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, list[Metric]]]:
    """Start ``relayd sweep`` against the real Redis, let it relay a seeded backlog, scrape it.

    Yields its metrics port (it keeps running until the session ends) and the scrape.
    """
    prefix = "deploy" + uuid.uuid4().hex[:10]
    _seed(redis_server.client(), prefix, time.time())
    port = free_port()
    log_path = tmp_path_factory.mktemp("relayd") / "relayd.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
    argv = [sys.executable, "-m", "relayd", "sweep", "--redis-url", redis_server.url, "--prefix", prefix]
    argv += ["--sink", "log", "--metrics-addr", f"127.0.0.1:{port}", "--log-format", "json"]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        families: list[Metric] = []
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2.0)
            except httpx.TransportError:
                response = None
            if response is not None and response.status_code == 200:
                families = _families(response.text)
                if _settled(families):
                    break
            time.sleep(0.2)
        if not _settled(families):
            state = "exited with " + str(proc.returncode) if proc.poll() is not None else "still running"
            pytest.fail(
                f"relayd ({state}) did not relay the seeded backlog and serve it on /metrics within 30 s:\n"
                + log_path.read_text(errors="replace")[-3000:]
            )
        yield port, families
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def relayd_metrics_port(running_relayd: tuple[int, list[Metric]]) -> int:
    """The port on 127.0.0.1 where the running relayd serves /metrics, /healthz, /readyz."""
    return running_relayd[0]


@pytest.fixture
def relayd_families(running_relayd: tuple[int, list[Metric]]) -> list[Metric]:
    """The running relayd's /metrics once it relayed the seeded backlog, parsed."""
    return running_relayd[1]
