"""``relayd sweep`` as a process, delivering to an ``https://`` receiver through a CONNECT proxy
with a password, with an OAuth2 token from a local endpoint: every entry delivered or
dead-lettered, one grant, and no secret (client secret, token, proxy password) in a log line,
``/metrics``, ``/readyz``, ``status`` or a dead-letter reason. Bad networking options exit 2 with
one line."""

from __future__ import annotations

import datetime as dt
import signal
import ssl
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import orjson
import pytest
from aiohttp import web
from support.forward_proxy import ConnectProxy
from support.http_receiver import serve_in_thread
from support.ports import free_port
from support.tls import make_pki
from support.waiting import wait_until

from store import Event, Execution, Keyspace, RedisStore
from tests.e2e.conftest import run_relayd, start_relayd

CLIENT_SECRET = "client-s3cret-e2e"
TOKEN = "granted-t0ken-e2e"
PROXY_PASSWORD = "proxy-pa55-e2e"
SECRETS = (CLIENT_SECRET, TOKEN, PROXY_PASSWORD)


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_oauth2_through_a_proxy_delivers_and_shows_no_secret(
    redis_server, prefix: str, tmp_path: Path
) -> None:
    client = redis_server.client()
    RedisStore(client, prefix=prefix).commit(
        Execution(id="exe-1", definition_id="net.flow"),
        [("ok", Event(id="e-1", kind="ping", data={})), ("bad", Event(id="e-2", kind="ping", data={}))],
    )
    pki = make_pki(tmp_path, now=dt.datetime.now(dt.UTC))
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(pki.server_cert, pki.server_key)
    grants: list[str] = []
    authorizations: list[str] = []

    async def token_endpoint(request: web.Request) -> web.Response:
        grants.append(request.headers.get("Authorization", ""))
        return web.json_response({"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600})

    async def receiver(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        authorizations.append(request.headers.get("Authorization", ""))
        if body["target_id"] == "bad":  # an answer echoing the credential it got
            return web.json_response({"error": "rejected", "authorization": authorizations[-1]}, status=422)
        return web.Response(status=204)

    port = free_port()
    with (
        ConnectProxy(credentials=("relayd", PROXY_PASSWORD)) as proxy,
        serve_in_thread(token_endpoint, "/token") as token_url,
        serve_in_thread(receiver, ssl_context=server_tls) as hook,
    ):
        common = ["--redis-url", redis_server.url, "--prefix", prefix]
        daemon = start_relayd(
            "sweep", "--log-level", "debug", "--sink", f"webhook:{hook}", *common,
            "--metrics-addr", f"127.0.0.1:{port}",
            "--webhook-ca-file", str(pki.ca_cert),
            "--webhook-oauth2-token-url", token_url.replace("127.0.0.1", "localhost"),
            "--webhook-oauth2-client-id-file", write(tmp_path / "id", "relayd\n"),
            "--webhook-oauth2-client-secret-file", write(tmp_path / "secret", CLIENT_SECRET + "\n"),
            "--webhook-proxy-url", proxy.url,
            "--webhook-proxy-username-file", write(tmp_path / "proxy-user", "relayd"),
            "--webhook-proxy-password-file", write(tmp_path / "proxy-password", PROXY_PASSWORD),
            "--webhook-no-proxy", "localhost",
        )  # fmt: skip
        try:
            wait_until(lambda: client.hlen(Keyspace(prefix).outbox) == 0, what="both entries settled")
            metrics = wait_until(lambda: scrape(port, "/metrics"), what="the metrics endpoint")
            ready = scrape(port, "/readyz")
        finally:
            daemon.send_signal(signal.SIGTERM)
            _, stderr = daemon.communicate(timeout=30)
        listed = run_relayd("dlq", "list", "--json", *common)
        status = run_relayd("status", *common)
    client.close()

    assert daemon.returncode == 0, stderr[-2000:]
    assert len(grants) == 1
    assert sorted(authorizations) == [f"Bearer {TOKEN}"] * 2
    # the receiver was reached through the proxy (tunnels to its host only); the token endpoint,
    # on the no-proxy host, was not (no tunnel, no plain request)
    assert set(proxy.tunnels) == {urlsplit(hook).netloc}
    assert proxy.forwarded == []
    letters = orjson.loads(listed.stdout)
    assert [letter["reason"][:8] for letter in letters] == ["http 422"]
    assert "relayd_delivered_total" in metrics
    shown = {
        "log": stderr,
        "metrics": metrics,
        "readyz": ready,
        "dlq": listed.stdout,
        "status": status.stdout,
    }
    for secret in SECRETS:
        for where, text in shown.items():
            assert secret not in text, where


def scrape(port: int, path: str) -> str:
    try:
        return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=5).text
    except httpx.HTTPError:
        return ""


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (
            ["--webhook-oauth2-token-url", "https://idp.example.com/token"],
            "needs --webhook-oauth2-client-id-file",
        ),
        (["--webhook-proxy-url", "http://relayd:pa55w0rd@proxy.example.com:3128"], "holds credentials"),
        (["--webhook-no-proxy", "example.com"], "need --webhook-proxy-url"),
    ],
    ids=["token url alone", "proxy url with credentials", "no-proxy alone"],
)
def test_bad_network_options_exit_2_with_one_line(
    redis_server, prefix: str, flags: list[str], says: str
) -> None:
    result = run_relayd(
        "sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix,
        "--sink", "webhook:https://hooks.example.com/h", *flags,
    )  # fmt: skip

    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert says in lines[0]
    assert "pa55w0rd" not in result.stderr


def test_oauth2_beside_an_authorization_header_exits_2(redis_server, prefix: str, tmp_path: Path) -> None:
    result = run_relayd(
        "sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix,
        "--sink", "webhook:https://hooks.example.com/h",
        "--webhook-headers-file", write(tmp_path / "headers", "Authorization: Bearer static-s3cret\n"),
        "--webhook-oauth2-token-url", "https://idp.example.com/token",
        "--webhook-oauth2-client-id-file", write(tmp_path / "id", "relayd"),
        "--webhook-oauth2-client-secret-file", write(tmp_path / "secret", CLIENT_SECRET),
    )  # fmt: skip

    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "keep one" in lines[0]
    assert "static-s3cret" not in result.stderr
    assert CLIENT_SECRET not in result.stderr
