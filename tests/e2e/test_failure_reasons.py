"""Why deliveries are retried shows at the default log level: ``relayd sweep`` as a process
against a real receiver answering 503 (and, separately, a port nobody listens on) logs one
``delivery_failed`` line per failing target with its ``target_id``, the entry id, the reason,
the attempt and the next retry, however often that target is retried within the interval."""

from __future__ import annotations

import socket
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.http_server import Reply, ScriptedServer, serve
from support.processes import end_process
from support.waiting import wait_until

from store import Event, Execution, RedisStore
from tests.e2e.conftest import relayd_argv, relayd_env

TARGETS = ("billing", "mailer", "search")


@pytest.fixture
def refusing() -> Iterator[ScriptedServer]:
    """A receiver answering 503 to everything."""
    with serve(lambda body, nth: Reply(status=503)) as server:
        yield server


def _attempts(server: ScriptedServer) -> Counter[str]:
    """The requests ``server`` has had, per target."""
    return Counter(request.body["target_id"] for request in list(server.requests))


def _commit(client: Any, prefix: str) -> list[int]:
    store = RedisStore(client, prefix=prefix)
    emits = [(target, Event(id=f"e-{target}", kind="ping", data={})) for target in TARGETS]
    return store.commit(Execution(id="exe-1", definition_id="reasons.flow"), emits)


def _failures(log: Path) -> list[dict[str, Any]]:
    lines = [orjson.loads(line) for line in log.read_bytes().splitlines() if line.startswith(b"{")]
    return [line for line in lines if line["event"] == "delivery_failed"]


def _sweep(redis_url: str, prefix: str, url: str, log: Path):
    argv = relayd_argv(
        "sweep", "--redis-url", redis_url, "--prefix", prefix, "--sink", f"webhook:{url}",
        "--retry-base", "0.05", "--retry-cap", "0.2", "--max-attempts", "1000", "--poll-interval", "0.1",
        "--metrics-addr", "127.0.0.1:0",
    )  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=out, env=relayd_env())


def test_a_503_names_each_failing_target_once_per_interval(
    redis_server, refusing: ScriptedServer, prefix: str, tmp_path: Path
) -> None:
    client = redis_server.client()
    seqs = _commit(client, prefix)
    log = tmp_path / "relay.log"
    relay = _sweep(redis_server.url, prefix, refusing.url, log)
    try:
        wait_until(
            lambda: all(_attempts(refusing)[t] >= 3 for t in TARGETS), 60, "three attempts at every target"
        )
        failures = _failures(log)
    finally:
        end_process(relay)
        client.close()

    assert sorted(f["target_id"] for f in failures) == sorted(TARGETS), failures
    for line in failures:
        assert line["level"] == "warning"
        assert line["error"] == "http 503"
        assert line["id"] in {f"{prefix}:outbox:{seq}" for seq in seqs}
        assert line["kind"] == "outbox"
        assert line["attempt"] >= 1
        assert line["retry_in_s"] >= 0


def test_a_refused_connection_says_so(redis_server, prefix: str, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]  # bound, never listening: connections are refused
        client = redis_server.client()
        _commit(client, prefix)
        log = tmp_path / "relay.log"
        relay = _sweep(redis_server.url, prefix, f"http://127.0.0.1:{closed_port}/hook", log)
        try:
            wait_until(lambda: len(_failures(log)) == len(TARGETS), 60, "a line per target")
            failures = _failures(log)
        finally:
            end_process(relay)
            client.close()

    assert {f["error"] for f in failures} == {"webhook connection error (Connection refused)"}
