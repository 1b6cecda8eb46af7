"""The console as an operator meets it in the first week, on real redis-servers and a real
``relayd console`` process: every page as the least-privilege user ``relayd acl`` makes, a clear
503 while Redis is down that recovers by itself, HTTP failures grouped by status with a redacted
excerpt of the receiver's answer, and a warning when nothing relays a prefix or timers are late."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx
import orjson
import pytest
import redis.asyncio as aioredis
from support.console import start_console
from support.redis_server import RedisServer, start_redis_server
from support.waiting import wait_until

from relayd.state.audit import AuditRecord, read_actions, record_action
from relayd.state.keys import RelayKeys
from store import Event, Execution, Keyspace, RedisStore, TimerOp
from tests.e2e.conftest import run_relayd
from tests.e2e.test_acl import PASSWORD, PREFIX, TOLERATED, USER, create_user, denials

pytestmark = pytest.mark.slow

PAGES = ("/", "/dead-letters", "/groups", "/timers", "/timers?execution=exe-1", "/audit")


@pytest.fixture
def server() -> Iterator[RedisServer]:
    running = start_redis_server("--notify-keyspace-events", "Khz")
    yield running
    running.cleanup()


def _get(url: str) -> httpx.Response:
    return httpx.get(url, timeout=30)


def _seed(client, prefix: str, *, overdue_s: float = 5.0) -> None:
    store = RedisStore(client, prefix=prefix)
    exe = Execution(id="exe-1", definition_id="ops.flow")
    timer = TimerOp(action="schedule", path="wait", fire_at=time.time() - overdue_s)
    store.commit(exe, [("t-1", Event(id="e-1", kind="ping", data={}))], timers=[timer])
    seq = client.incr(Keyspace(prefix).outbox_seq)
    client.hset(Keyspace(prefix).outbox, str(seq), b"not json")  # a dead letter once swept


def test_every_page_works_as_the_acl_user(server: RedisServer, tmp_path: Path) -> None:
    admin = server.client()
    user_file, password_file = tmp_path / "user", tmp_path / "password"
    user_file.write_text(USER + "\n")
    password_file.write_text(PASSWORD + "\n")
    create_user(server, {"user": user_file, "password": password_file})
    _seed(admin, PREFIX)
    swept = run_relayd("sweep", "--once", "--redis-url", server.url, "--prefix", PREFIX, "--sink", "null")
    assert swept.returncode == 1, swept.stderr  # the malformed entry was dead-lettered
    letter_id = next(iter(admin.hkeys(RelayKeys(Keyspace(PREFIX)).dead("outbox")))).decode()
    admin.acl_log_reset()
    as_user = ("--redis-username-file", str(user_file), "--redis-password-file", str(password_file))
    console = start_console(server.url, [PREFIX], *as_user)
    try:
        answers = {page: _get(console.url + page) for page in (*PAGES, f"/dead-letter?id={letter_id}")}
    finally:
        console.stop()
    asyncio.run(_audit_as_user(server))

    assert {page: r.status_code for page, r in answers.items()} == dict.fromkeys(answers, 200)
    assert letter_id in answers["/dead-letters"].text
    assert denials(admin) <= TOLERATED
    admin.close()


async def _audit_as_user(server: RedisServer) -> None:
    """What the console writes for an action (the audit record) is allowed to the user too."""
    client = aioredis.Redis(port=server.port, username=USER, password=PASSWORD)
    record = AuditRecord(at=time.time(), action="purge", filter={}, count=0, command="relayd dlq purge")
    await record_action(client, Keyspace(PREFIX), record)
    assert [r.action for r in await read_actions(client, Keyspace(PREFIX))] == ["purge"]
    await client.aclose()


def test_redis_down_is_a_503_page_with_the_reason_and_the_console_recovers(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()
    console = start_console(server.url, ["ops"])
    try:
        before = _get(console.url + "/dead-letters")
        server.stop()
        down = {page: _get(console.url + page) for page in PAGES}
        server.start()
        wait_until(lambda: _get(console.url + "/dead-letters").status_code == 200, 60, "the console back")
    finally:
        console.stop()
        server.cleanup()

    assert before.status_code == 200
    for page, response in down.items():
        assert response.status_code == 503, (page, response.text[:500])
        assert "Redis is unreachable (ConnectionError)" in response.text, page
        assert response.headers["retry-after"] == "5"
        assert 'http-equiv="refresh"' in response.text
        assert "Internal Server Error" not in response.text


class Refusing(ThreadingHTTPServer):
    """Answers each target with its own status and a JSON body that carries a secret."""

    daemon_threads = True
    STATUSES: ClassVar[dict[str, int]] = {"auth": 401, "gone": 404, "invalid": 422}

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: Refusing

    def do_POST(self) -> None:
        envelope = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status = self.server.STATUSES[envelope["target_id"]]
        body = orjson.dumps({"error": f"refused {envelope['target_id']}", "api_key": "sk-live-123456"})
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def test_groups_keep_http_statuses_apart_with_a_redacted_excerpt(redis_server, prefix: str) -> None:
    receiver = Refusing()
    thread = threading.Thread(target=receiver.serve_forever, daemon=True)
    thread.start()
    client = redis_server.client()
    store = RedisStore(client, prefix=prefix)
    emits = [
        (target, Event(id=f"e-{target}-{n}", kind="ping", data={}))
        for target in Refusing.STATUSES
        for n in range(2)
    ]
    store.commit(Execution(id="exe-1", definition_id="ops.flow"), emits)
    url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    swept = run_relayd(
        "sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix, "--sink", f"webhook:{url}"
    )
    console = start_console(redis_server.url, [prefix])
    try:
        groups = _get(f"{console.url}/groups?prefix={prefix}")
    finally:
        console.stop()
        receiver.shutdown()
        receiver.server_close()
        client.close()

    assert swept.returncode == 1, swept.stderr  # all six dead-lettered (4xx are permanent)
    assert groups.status_code == 200
    for status in (401, 404, 422):
        assert f"http {status}" in groups.text
    assert "http &lt;n&gt;" not in groups.text
    assert "refused invalid" in groups.text  # the receiver's own words, kept with the dead letter
    assert "sk-live-123456" not in groups.text
    assert "***" in groups.text


def test_the_overview_warns_when_nothing_relays_and_timers_are_overdue(redis_server, prefix: str) -> None:
    client = redis_server.client()
    _seed(client, prefix, overdue_s=600)
    console = start_console(redis_server.url, [prefix])
    try:
        unattended = _get(f"{console.url}/?prefix={prefix}")
        client.set(RelayKeys(Keyspace(prefix)).lease, "relay-host/42/abcd", px=60_000)
        client.zremrangebyscore(Keyspace(prefix).timers, "-inf", "+inf")
        attended = wait_until(
            lambda: (r := _get(f"{console.url}/?prefix={prefix}")) and "data-warning" not in r.text and r,
            30,
            "the warnings to clear",
        )
    finally:
        console.stop()
        client.close()

    assert "no relay holds the lease" in unattended.text
    assert (
        "timers overdue: 1 due, the oldest 60" in unattended.text
        or "timers overdue: 1 due" in unattended.text
    )
    assert "relay-host/42" in attended.text
