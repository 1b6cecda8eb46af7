"""A real ``relayd sweep`` with the kafka sink on OAUTHBEARER (OIDC client credentials): the grant
made with the secret from its file, and that secret in no log line, metric or ``/readyz`` answer
while the broker refuses the token (tansu with ``--authentication``: docs/brokers.md)."""

from __future__ import annotations

import base64
import signal
import time
from pathlib import Path

import httpx
import orjson
import pytest
from aiohttp import web
from support.http_receiver import serve_in_thread
from support.kafka import start_kafka
from support.ports import free_port
from support.waiting import wait_until

from store import Event, Execution, RedisStore, Status
from tests.e2e.conftest import start_relayd

pytestmark = pytest.mark.slow

SECRET = "e2e-oidc-secret-5d21c9"


def _jwt() -> str:
    now = int(time.time())

    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(value)).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part({'sub': 'relayd', 'iat': now, 'exp': now + 3600})}.c2ln"


def test_the_oidc_client_secret_is_used_and_never_shown(redis_server, prefix: str, tmp_path: Path) -> None:
    store = RedisStore(redis_server.client(), prefix=prefix)
    for n in range(3):
        store.commit(
            Execution(definition_id="d", status=Status.RUNNING), [(f"t-{n}", Event(kind="K", data={}))]
        )
    secret_file = tmp_path / "client-secret"
    secret_file.write_text(SECRET + "\n")
    grants: list[str] = []

    async def token(request: web.Request) -> web.Response:
        grants.append(base64.b64decode(request.headers["Authorization"][6:]).decode())
        return web.json_response({"access_token": _jwt(), "token_type": "bearer", "expires_in": 3600})

    broker = start_kafka(authentication=True)
    port = free_port()
    stderr_path = tmp_path / "stderr"
    try:
        with serve_in_thread(token, "/token") as token_url, stderr_path.open("w") as stderr:
            proc = start_relayd(
                "sweep", "--redis-url", redis_server.url, "--prefix", prefix,
                "--sink", f"kafka:{broker.bootstrap}?topic=events&timeout_s=2",
                "--kafka-sasl-mechanism", "OAUTHBEARER",
                "--kafka-oauth-token-url", token_url,
                "--kafka-oauth-client-id", "relayd-e2e",
                "--kafka-oauth-client-secret-file", str(secret_file),
                "--kafka-oauth-scope", "kafka",
                "--metrics-addr", f"127.0.0.1:{port}",
                stderr=stderr,
            )  # fmt: skip
            try:

                def refused() -> httpx.Response | None:
                    try:
                        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2)
                    except httpx.HTTPError:
                        return None
                    return ready if grants and ready.status_code == 503 and "kafka" in ready.text else None

                ready = wait_until(refused, timeout_s=60)
                metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
    finally:
        broker.stop()

    logged = stderr_path.read_text()
    assert grants[0] == f"relayd-e2e:{SECRET}"  # the grant carried the secret from its file
    assert "SASL" in logged  # librdkafka's refusal was logged
    for shown in (logged, ready.text, metrics):
        assert SECRET not in shown
