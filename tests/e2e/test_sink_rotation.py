"""Sink credentials rotated under a running ``relayd sweep``, with no restart.

The webhook: a local aiohttp receiver verifies the signature (and a bearer token from the
headers file) of every request and answers 401 to any it cannot verify; the signing secret is
rotated with an overlap (the file holds old and new, the receiver moves to the new one, then
the old line goes), so no request is ever refused. The amqp sink: the broker user's password
is changed on a real RabbitMQ, the password file replaced and the connections closed; the next
batch still arrives. Before relayd watched its files, the secret file's second line was part
of one secret and the password was read once: both sinks failed after the rotation.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from aiohttp import web
from support.http_receiver import serve_in_thread
from support.rabbitmq import RabbitServer, declare, drain
from support.redis_server import RedisServer
from support.secret_files import MODES, Mode, SecretDir
from support.seeding import commit_outbox
from support.sweeper_process import SweepProcess
from support.waiting import wait_until

pytestmark = [pytest.mark.slow]

PREFIX = "srot"
TIMEOUT_S = 60.0
TOLERANCE_S = 300


@dataclass
class Receiver:
    """A webhook receiver that knows ``secrets`` and ``tokens`` now (a test changes them)."""

    secrets: set[bytes]
    tokens: set[str]
    accepted: list[tuple[str, int]] = field(default_factory=list)  # (id, signatures offered)
    refused: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def verify(self, headers: dict[str, str], body: bytes) -> bool:
        timestamp = headers.get("X-Relayd-Timestamp", "")
        if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > TOLERANCE_S:
            return False
        offered = headers.get("X-Relayd-Signature", "").split(" ")
        scheme, _, token = headers.get("Authorization", "").partition(" ")
        with self.lock:
            secrets, tokens = set(self.secrets), set(self.tokens)
        signed = any(
            hmac.compare_digest(
                "v1=" + hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest(),
                signature,
            )
            for secret in secrets
            for signature in offered
        )
        return signed and scheme == "Bearer" and token in tokens

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        entry_id = orjson.loads(body)["id"]
        ok = self.verify(dict(request.headers), body)
        with self.lock:
            if ok:
                self.accepted.append((entry_id, len(request.headers["X-Relayd-Signature"].split(" "))))
            else:
                self.refused.append(entry_id)
        return web.Response(status=200 if ok else 401)

    def accepted_ids(self) -> set[str]:
        with self.lock:
            return {entry_id for entry_id, _ in self.accepted}

    def switch(self, *, secrets: set[bytes] | None = None, tokens: set[str] | None = None) -> None:
        with self.lock:
            self.secrets = secrets if secrets is not None else self.secrets
            self.tokens = tokens if tokens is not None else self.tokens


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    """The receiver on a free loopback port, served by aiohttp on its own thread's event loop."""
    state = Receiver(secrets={b"old-secret-1"}, tokens={"token-1"})
    with serve_in_thread(state.handle) as url:
        yield state, url


def reloads_of(relay: SweepProcess, option: str) -> int:
    return sum(1 for event in relay.events("secret_reloaded") if event["option"] == option)


@pytest.mark.parametrize("mode", MODES)
def test_a_webhook_secret_rotated_with_an_overlap_is_never_refused(
    redis_server: RedisServer, receiver: tuple[Receiver, str], tmp_path: Path, mode: Mode
) -> None:
    state, url = receiver
    prefix = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    admin = redis_server.client()
    secrets = SecretDir(tmp_path / "secret", mode)
    secrets.write({"signing": "old-secret-1\n", "headers": "Authorization: Bearer token-1\n"})
    args = [
        "--redis-url", redis_server.url, "--prefix", prefix, "--sink", f"webhook:{url}",
        "--webhook-signature", "relayd", "--webhook-secret-file", str(secrets.path("signing")),
        "--webhook-headers-file", str(secrets.path("headers")),
    ]  # fmt: skip
    relay = SweepProcess(args, tmp_path / "relay.log")
    try:
        first = commit_outbox(admin, prefix, range(1, 51))
        wait_until(lambda: first <= state.accepted_ids(), TIMEOUT_S, "the first batch")

        # 1. the overlap: relayd signs with both, then the receiver knows only the new secret
        secrets.write({"signing": "old-secret-1\nnew-secret-2\n"})
        wait_until(lambda: reloads_of(relay, "--webhook-secret-file") == 1, TIMEOUT_S, "the reload")
        state.switch(secrets={b"new-secret-2"})
        second = commit_outbox(admin, prefix, range(51, 101))
        wait_until(lambda: second <= state.accepted_ids(), TIMEOUT_S, "the second batch")

        # 2. the old secret goes; the bearer token rotates the same way (receiver takes both a while)
        state.switch(tokens={"token-1", "token-2"})
        secrets.write({"signing": "new-secret-2\n", "headers": "Authorization: Bearer token-2\n"})
        wait_until(lambda: reloads_of(relay, "--webhook-secret-file") == 2, TIMEOUT_S, "the second reload")
        wait_until(lambda: reloads_of(relay, "--webhook-headers-file") == 1, TIMEOUT_S, "the headers reload")
        state.switch(tokens={"token-2"})
        third = commit_outbox(admin, prefix, range(101, 151))
        wait_until(lambda: third <= state.accepted_ids(), TIMEOUT_S, "the third batch")
    finally:
        code = relay.stop()
        admin.close()

    assert state.refused == []
    signatures = dict(state.accepted)
    assert sorted(entry_id for entry_id, _ in state.accepted) == sorted(first | second | third)
    assert {signatures[i] for i in first} == {1}
    assert {signatures[i] for i in second} == {2}  # old and new, space-separated
    assert {signatures[i] for i in third} == {1}
    log = relay.log_text()
    for value in ("old-secret-1", "new-secret-2", "token-1", "token-2"):
        assert value not in log
    assert code == 0, log[-2000:]


def test_a_broker_password_rotation_is_followed_by_the_same_process(
    redis_server: RedisServer, rabbitmq_server: RabbitServer, tmp_path: Path
) -> None:
    user = f"relay-{uuid.uuid4().hex[:8]}"
    stem = uuid.uuid4().hex[:10]
    exchange, queue = f"x-{stem}", f"q-{stem}"
    prefix = f"{PREFIX}-{stem}"
    rabbitmq_server.ctl("add_user", user, "old-broker-pw")
    rabbitmq_server.ctl("set_permissions", "-p", "/", user, ".*", ".*", ".*")
    asyncio.run(declare(rabbitmq_server.url, exchange, {queue: "#"}))
    secrets = SecretDir(tmp_path / "secret", "kubelet")
    secrets.write({"amqp-password": "old-broker-pw\n"})
    admin = redis_server.client()
    spec = f"amqp:amqp://{user}@127.0.0.1:{rabbitmq_server.port}/?exchange={exchange}&routing_key=ev.{{kind}}"
    args = [
        "--redis-url", redis_server.url, "--prefix", prefix, "--sink", spec,
        "--amqp-password-file", str(secrets.path("amqp-password")),
    ]  # fmt: skip
    relay = SweepProcess(args, tmp_path / "relay.log")
    received: list[str] = []

    def arrived(wanted: set[str]) -> bool:
        assert relay.running, relay.log_text()[-3000:]
        received.extend(m.message_id or "" for m in asyncio.run(drain(rabbitmq_server.url, queue)))
        return wanted <= set(received)

    try:
        first = commit_outbox(admin, prefix, range(1, 51))
        wait_until(lambda: arrived(first), TIMEOUT_S, "the first batch", poll_s=0.3)

        rabbitmq_server.ctl("change_password", user, "new-broker-pw")
        secrets.write({"amqp-password": "new-broker-pw\n"})
        wait_until(lambda: reloads_of(relay, "--amqp-password-file") == 1, TIMEOUT_S, "the reload")
        rabbitmq_server.ctl("close_all_connections", "password rotated")
        second = commit_outbox(admin, prefix, range(51, 251))
        wait_until(lambda: arrived(second), TIMEOUT_S, "the second batch", poll_s=0.3)
    finally:
        code = relay.stop()
        admin.close()
        rabbitmq_server.ctl("delete_user", user)

    assert set(received) == first | second
    assert len(received) == len(first | second)  # nothing twice: the cut came between batches
    log = relay.log_text()
    assert "old-broker-pw" not in log
    assert "new-broker-pw" not in log
    assert code == 0, log[-2000:]
