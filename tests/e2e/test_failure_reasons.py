"""Why deliveries are retried shows at the default log level: ``relayd sweep`` as a process
against a real receiver answering 503 (and, separately, a port nobody listens on) logs one
``delivery_failed`` line per failing target with its ``target_id``, the entry id, the reason,
the attempt and the next retry, however often that target is retried within the interval."""

from __future__ import annotations

import socket
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.processes import end_process
from support.waiting import wait_until

from store import Event, Execution, RedisStore
from tests.e2e.conftest import relayd_argv, relayd_env

TARGETS = ("billing", "mailer", "search")


class Refusing(ThreadingHTTPServer):
    """Answers 503 to everything, counting requests per target."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.per_target: Counter[str] = Counter()


class _Handler(BaseHTTPRequestHandler):
    server: Refusing

    def do_POST(self) -> None:
        body = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.per_target[body["target_id"]] += 1
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def refusing() -> Iterator[Refusing]:
    server = Refusing()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


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
    redis_server, refusing: Refusing, prefix: str, tmp_path: Path
) -> None:
    client = redis_server.client()
    seqs = _commit(client, prefix)
    log = tmp_path / "relay.log"
    relay = _sweep(redis_server.url, prefix, f"http://127.0.0.1:{refusing.server_address[1]}/hook", log)
    try:
        wait_until(
            lambda: all(refusing.per_target[t] >= 3 for t in TARGETS), 60, "three attempts at every target"
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
