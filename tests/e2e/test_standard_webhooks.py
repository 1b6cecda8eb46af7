"""Standard Webhooks from a running ``relayd sweep``, verified by libraries no one here wrote.

A local aiohttp receiver checks every request with the ``standardwebhooks`` package and with
``svix``'s verifier, each holding only the secrets the receiver knows now, and answers 401 when
either refuses. The signing secret is rotated with an overlap (the file holds old and new, the
receiver moves to the new one, then the old line goes): no request is ever refused. A 503
answered to a first attempt is redelivered with the same ``webhook-id``; a 410 dead-letters the
entry with the reason "endpoint gone".
"""

from __future__ import annotations

import base64
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
import standardwebhooks
import svix.webhooks
from aiohttp import web
from support.http_receiver import serve_in_thread
from support.redis_server import RedisServer
from support.seeding import Entries, commit_outbox
from support.sweeper_process import SweepProcess
from support.waiting import wait_until

pytestmark = [pytest.mark.slow]

PREFIX = "stdwh"
TIMEOUT_S = 60.0
OLD = "whsec_" + base64.b64encode(b"old-key-of-twenty-four-b").decode()
NEW = "whsec_" + base64.b64encode(b"new-key-of-twenty-four-b").decode()


@dataclass
class Receiver:
    """Verifies with both libraries and the secrets it knows now; scripted statuses by event id."""

    secrets: set[str]
    statuses: dict[str, list[int]] = field(default_factory=dict)  # event id -> statuses to answer first
    accepted: list[tuple[str, int]] = field(default_factory=list)  # (webhook-id, signatures offered)
    refused: list[str] = field(default_factory=list)
    seen_ids: dict[str, list[str]] = field(default_factory=dict)  # envelope id -> webhook-ids sent
    lock: threading.Lock = field(default_factory=threading.Lock)

    def verified(self, headers: dict[str, str], body: bytes) -> bool:
        with self.lock:
            secrets = set(self.secrets)
        for secret in secrets:
            try:
                standardwebhooks.Webhook(secret).verify(body, headers)
                svix.webhooks.Webhook(secret).verify(body, headers)
            except (standardwebhooks.WebhookVerificationError, svix.webhooks.WebhookVerificationError):
                continue
            return True
        return False

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = dict(request.headers)
        envelope_id = orjson.loads(body)["id"]
        with self.lock:
            self.seen_ids.setdefault(envelope_id, []).append(headers["webhook-id"])
            scripted = self.statuses.get(envelope_id)
            status = scripted.pop(0) if scripted else None
        if status is not None:
            return web.Response(status=status)
        ok = self.verified(headers, body)
        with self.lock:
            if ok:
                self.accepted.append((headers["webhook-id"], len(headers["webhook-signature"].split(" "))))
            else:
                self.refused.append(envelope_id)
        return web.Response(status=204 if ok else 401)

    def accepted_ids(self) -> set[str]:
        with self.lock:
            return {webhook_id for webhook_id, _ in self.accepted}

    def know(self, *secrets: str) -> None:
        with self.lock:
            self.secrets = set(secrets)


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    """The receiver on a free loopback port, served by aiohttp on its own thread's event loop."""
    state = Receiver(secrets={OLD})
    with serve_in_thread(state.handle) as url:
        yield state, url


def start_sweep(
    redis_server: RedisServer, prefix: str, url: str, tmp_path: Path
) -> tuple[SweepProcess, Path]:
    """``relayd sweep`` to the receiver at ``url``, signing with the file it returns (``OLD`` now)."""
    signing = tmp_path / "signing"
    signing.write_text(OLD + "\n")
    args = [
        "--redis-url", redis_server.url, "--prefix", prefix, "--sink", f"webhook:{url}",
        "--webhook-secret-file", str(signing), "--retry-base", "0.1",
    ]  # fmt: skip
    return SweepProcess(args, tmp_path / "relay.log"), signing


def reloads(relay: SweepProcess) -> int:
    return sum(1 for e in relay.events("secret_reloaded") if e["option"] == "--webhook-secret-file")


def test_every_request_verifies_with_both_libraries_through_a_rotation(
    redis_server: RedisServer, receiver: tuple[Receiver, str], tmp_path: Path
) -> None:
    """Old secret, then old and new while the receiver knows only the new one, then the new alone."""
    state, url = receiver
    prefix = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    admin = redis_server.client()
    relay, signing = start_sweep(redis_server, prefix, url, tmp_path)
    try:
        first = commit_outbox(admin, prefix, range(1, 41))
        wait_until(lambda: first <= state.accepted_ids(), TIMEOUT_S, "the first batch")

        signing.write_text(f"{OLD}\n{NEW}\n")
        wait_until(lambda: reloads(relay) == 1, TIMEOUT_S, "the reload")
        state.know(NEW)
        second = commit_outbox(admin, prefix, range(41, 81))
        wait_until(lambda: second <= state.accepted_ids(), TIMEOUT_S, "the second batch")

        signing.write_text(NEW + "\n")
        wait_until(lambda: reloads(relay) == 2, TIMEOUT_S, "the second reload")
        third = commit_outbox(admin, prefix, range(81, 121))
        wait_until(lambda: third <= state.accepted_ids(), TIMEOUT_S, "the third batch")
    finally:
        code = relay.stop()
        admin.close()

    assert state.refused == []
    signatures = dict(state.accepted)
    assert sorted(webhook_id for webhook_id, _ in state.accepted) == sorted(first | second | third)
    assert ({signatures[i] for i in first}, {signatures[i] for i in second}) == ({1}, {2})
    assert {signatures[i] for i in third} == {1}
    log = relay.log_text()
    assert OLD not in log
    assert NEW not in log
    assert code == 0, log[-2000:]


def test_a_redelivery_keeps_its_webhook_id_and_410_dead_letters_as_endpoint_gone(
    redis_server: RedisServer, receiver: tuple[Receiver, str], tmp_path: Path
) -> None:
    """503 then 204: one webhook-id for both attempts; 410: dead-lettered, reason 'endpoint gone'."""
    state, url = receiver
    prefix = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    retried, gone = f"{prefix}:outbox:1", f"{prefix}:outbox:2"
    state.statuses = {retried: [503], gone: [410]}
    admin = redis_server.client()
    relay, _ = start_sweep(redis_server, prefix, url, tmp_path)
    try:
        pipe = admin.pipeline(transaction=True)
        Entries(pipe, prefix).outbox(1, "exe-a", "ev-1").outbox(2, "exe-b", "ev-2").counters(outbox=2)
        pipe.execute()
        wait_until(lambda: retried in state.accepted_ids(), TIMEOUT_S, "the redelivery")
        wait_until(lambda: admin.hlen(f"{prefix}:relay:dead:outbox") == 1, TIMEOUT_S, "the dead letter")
    finally:
        relay.stop()
        dead = admin.hgetall(f"{prefix}:relay:dead:outbox")
        admin.close()

    assert state.seen_ids[retried] == [retried, retried]
    assert state.seen_ids[gone] == [gone]
    assert b"endpoint gone" in b"".join(dead.values()), dead
