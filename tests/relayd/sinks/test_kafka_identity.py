"""Cloud identity of the kafka sink: OAUTHBEARER with OIDC client credentials, and AWS MSK IAM.

The broker is tansu with ``--authentication``: it takes the SASL handshake for OAUTHBEARER and
reads the client's token, but refuses the tokens made here (it does not validate tokens from a
configurable issuer). So what is shown here ends at the wire: the grant made at a local token
endpoint (aiohttp on loopback) with the client id, the secret from its file and the scope; the
token it answered sent to the broker in the SASL exchange (read off a relay in front of it); the
MSK IAM token a presigned URL for ``kafka-cluster:Connect`` that expires in 15 minutes, sent the
same way. That a cloud broker accepts them is shown only against the cloud (docs/brokers.md).
"""

from __future__ import annotations

import base64
import contextlib
import logging
import socket
import socketserver
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest
from aiohttp import web
from structlog.testing import capture_logs
from support.kafka import KafkaBroker, start_kafka
from support.moto import AWS_ENV
from support.redis_server import free_port
from support.waiting import until

from relayd.config.settings import load_settings
from relayd.envelope.batch import Batch
from relayd.errors import ConfigError
from relayd.security.material import Fixed
from relayd.sinks import Retry, SinkOptions, parse_sink_spec
from relayd.sinks.kafka.config import msk_region, producer_config
from relayd.sinks.kafka.msk_iam import PLACEHOLDER, TokenCallback
from relayd.sinks.kafka.options import KafkaOptions
from relayd.sinks.kafka.sink import KafkaSink

from .conftest import outbox

pytestmark = pytest.mark.slow

SECRET = "oidc-client-secret-7f3a"


class _CapturingRelay(socketserver.ThreadingTCPServer):
    """A TCP relay to the broker that keeps every byte the client sent."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, broker_port: int) -> None:
        self.broker_port = broker_port
        self.sent = bytearray()
        self._lock = threading.Lock()
        super().__init__(("127.0.0.1", port), _RelayConnection)

    def keep(self, data: bytes) -> None:
        with self._lock:
            self.sent += data


class _RelayConnection(socketserver.BaseRequestHandler):
    server: _CapturingRelay

    def handle(self) -> None:
        client: socket.socket = self.request
        with socket.create_connection(("127.0.0.1", self.server.broker_port)) as broker:
            threading.Thread(target=_pipe, args=(broker, client, None), daemon=True).start()
            _pipe(client, broker, self.server)


def _pipe(source: socket.socket, target: socket.socket, relay: _CapturingRelay | None) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            if relay is not None:
                relay.keep(data)
            target.sendall(data)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


@pytest.fixture
def auth_broker() -> Iterator[tuple[KafkaBroker, _CapturingRelay]]:
    """tansu requiring SASL, behind a relay it advertises (so every connection passes the relay)."""
    relay_port = free_port()
    broker_port = free_port()
    broker = start_kafka(port=broker_port, advertised_port=relay_port, authentication=True)
    relay = _CapturingRelay(relay_port, broker_port)
    thread = threading.Thread(target=relay.serve_forever, daemon=True)
    thread.start()
    try:
        yield broker, relay
    finally:
        relay.shutdown()
        relay.server_close()
        broker.stop()


def _jwt(claims: dict[str, Any]) -> str:
    """An unsigned JWT (librdkafka reads ``exp`` and ``sub`` from the token; it checks no signature)."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(value)).decode().rstrip("=")

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.c2ln"


class TokenEndpoint:
    """An OIDC token endpoint on loopback counting client credentials grants."""

    def __init__(self) -> None:
        self.grants: list[dict[str, str]] = []
        self.token = _jwt({"sub": "relayd", "iat": int(time.time()), "exp": int(time.time()) + 3600})
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        grant = {key: str(value) for key, value in form.items()}
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Basic "):  # librdkafka sends the client id and secret as HTTP Basic
            client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            grant |= {"client_id": client_id, "client_secret": secret}
        self.grants.append(grant)
        return web.json_response({"access_token": self.token, "token_type": "bearer", "expires_in": 3600})


@pytest.fixture
async def token_endpoint() -> AsyncIterator[TokenEndpoint]:
    endpoint = TokenEndpoint()
    app = web.Application()
    app.router.add_post("/oauth2/token", endpoint.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    endpoint.url = f"http://127.0.0.1:{port}/oauth2/token"
    try:
        yield endpoint
    finally:
        await runner.cleanup()


def _oidc_options(url: str, secret: str = SECRET) -> SinkOptions:
    return SinkOptions(
        own=KafkaOptions(
            sasl_mechanism="OAUTHBEARER",
            oauth_token_url=url,
            oauth_client_id="relayd-producer",
            oauth_client_secret=Fixed(secret),
            oauth_scope="kafka.produce",
        )
    )


async def test_oidc_client_credentials_grant_and_the_token_sent_to_the_broker_no_secret_shown(
    auth_broker: tuple[KafkaBroker, _CapturingRelay],
    token_endpoint: TokenEndpoint,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """librdkafka makes the grant at the local endpoint with the id, secret and scope, and hands
    the token to the broker (``auth=Bearer TOKEN`` in the SASL exchange). tansu refuses it: the
    entry is Retry, the sink not ready; the secret is in no log line, reason or error."""
    broker, relay = auth_broker
    spec = parse_sink_spec(f"kafka:{broker.bootstrap}?topic=events&timeout_s=2")
    sink = KafkaSink(spec, _oidc_options(token_endpoint.url))
    caplog.set_level(logging.DEBUG)
    with capture_logs() as logs:
        await sink.start()
        try:
            await until(lambda: b"auth=Bearer " + token_endpoint.token.encode() in relay.sent, timeout_s=30)
            outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a")]))
            reason = sink.not_ready_reason() or ""
        finally:
            await sink.close()

    assert len(token_endpoint.grants) == 1  # one token for its lifetime (an hour)
    grant = token_endpoint.grants[0]
    assert grant["grant_type"] == "client_credentials"
    assert (grant["client_id"], grant["client_secret"]) == ("relayd-producer", SECRET)
    assert grant["scope"] == "kafka.produce"
    assert isinstance(outcomes[0], Retry)
    assert reason
    shown = " ".join([reason, outcomes[0].error, caplog.text, repr(logs), repr(sink._made_with)])
    assert "librdkafka" in caplog.text or "SASL" in caplog.text  # librdkafka's lines were captured
    assert SECRET not in shown


def test_the_oidc_secret_file_is_watched_and_registered_for_redaction(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")

    settings = load_settings(
        kafka_sasl_mechanism="OAUTHBEARER",
        kafka_oauth_token_url="https://idp.example/oauth2/token",
        kafka_oauth_client_id="relayd",
        kafka_oauth_client_secret_file=path,
    )
    own = settings.own_options(KafkaOptions)

    assert own.oauth_client_secret is not None
    assert own.oauth_client_secret.value == SECRET
    assert settings.watched("--kafka-oauth-client-secret-file") is own.oauth_client_secret
    assert SECRET in settings.secrets()
    assert SECRET not in repr(own)
    config = producer_config(parse_sink_spec("kafka:k.example:9093?topic=e&tls=true"), SinkOptions(own=own))
    assert config["sasl.oauthbearer.client.secret"] == SECRET
    assert (config["sasl.mechanism"], config["sasl.oauthbearer.method"]) == ("OAUTHBEARER", "oidc")
    assert config["security.protocol"] == "sasl_ssl"


def _decoded(token: str) -> Any:
    return urlsplit(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode())


async def test_msk_iam_token_is_a_presigned_connect_url_that_expires_in_15_minutes_and_reaches_the_broker(
    auth_broker: tuple[KafkaBroker, _CapturingRelay], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)
    broker, relay = auth_broker
    callback = TokenCallback("eu-west-1")

    token, expiry = callback()

    url = _decoded(token)
    query = {key: values[0] for key, values in parse_qs(url.query).items()}
    assert (url.scheme, url.hostname) == ("https", "kafka.eu-west-1.amazonaws.com")
    assert query["Action"] == "kafka-cluster:Connect"
    assert query["X-Amz-Expires"] == "900"
    assert query["X-Amz-Credential"].startswith("testing/")
    assert query["X-Amz-Credential"].endswith("/eu-west-1/kafka-cluster/aws4_request")
    assert query["X-Amz-Security-Token"] == "testing"
    assert "X-Amz-Signature" in query
    assert abs(expiry - (time.time() + 900)) < 60
    assert callback.failure is None

    spec = parse_sink_spec(f"kafka:{broker.bootstrap}?topic=events&timeout_s=2")
    sink = KafkaSink(spec, SinkOptions(own=KafkaOptions(sasl_mechanism="AWS_MSK_IAM")))
    await sink.start()
    try:
        await until(lambda: b"auth=Bearer " in relay.sent, timeout_s=30)
    finally:
        await sink.close()
    sent = bytes(relay.sent)
    start = sent.index(b"auth=Bearer ") + len(b"auth=Bearer ")
    on_wire = sent[start:].split(b"\x01", 1)[0].decode()
    assert _decoded(on_wire).hostname == "kafka.us-east-1.amazonaws.com"  # AWS_REGION
    assert "Action=kafka-cluster%3AConnect" in _decoded(on_wire).query


def test_msk_iam_without_credentials_hands_a_placeholder_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    callback = TokenCallback("us-east-1")

    token, expiry = callback()

    assert token == PLACEHOLDER
    assert expiry < time.time() + 30
    assert (callback.failure or "").startswith("kafka: no AWS MSK IAM token (")


def test_msk_region_comes_from_the_broker_host_then_the_environment() -> None:
    provisioned = parse_sink_spec("kafka:b-1.c1.abc.c2.kafka.ap-south-1.amazonaws.com:9098?topic=e")
    serverless = parse_sink_spec("kafka:boot-x.c3.kafka-serverless.us-west-2.amazonaws.com:9098?topic=e")
    other = parse_sink_spec("kafka:k1.example:9098?topic=e")

    assert msk_region(provisioned, {}) == "ap-south-1"
    assert msk_region(serverless, {}) == "us-west-2"
    assert msk_region(other, {"AWS_DEFAULT_REGION": "eu-central-1"}) == "eu-central-1"
    assert msk_region(other, {}) is None


@pytest.mark.parametrize(
    ("own", "message"),
    [
        (
            KafkaOptions(sasl_mechanism="OAUTHBEARER", username=Fixed("u"), password=Fixed("p")),
            "OAUTHBEARER takes no --kafka-username-file",
        ),
        (
            KafkaOptions(sasl_mechanism="AWS_MSK_IAM", username=Fixed("u"), password=Fixed("p")),
            "AWS_MSK_IAM takes no --kafka-username-file",
        ),
        (KafkaOptions(oauth_token_url="https://idp.example/t"), "needs --kafka-sasl-mechanism OAUTHBEARER"),
        (
            KafkaOptions(sasl_mechanism="AWS_MSK_IAM", oauth_client_id="x"),
            "--kafka-oauth-client-id needs --kafka-sasl-mechanism OAUTHBEARER",
        ),
        (KafkaOptions(sasl_mechanism="OAUTHBEARER", oauth_client_id="x"), "OAUTHBEARER needs"),
        (
            KafkaOptions(
                sasl_mechanism="OAUTHBEARER",
                oauth_token_url="http://idp.example/t",
                oauth_client_id="x",
                oauth_client_secret=Fixed(SECRET),
            ),
            "plaintext",
        ),
        (
            KafkaOptions(
                sasl_mechanism="OAUTHBEARER",
                oauth_token_url="https://id:pw@idp.example/t",
                oauth_client_id="x",
                oauth_client_secret=Fixed(SECRET),
            ),
            "no credentials in --kafka-oauth-token-url",
        ),
    ],
    ids=[
        "oidc-and-password",
        "msk-and-password",
        "oauth-without-mechanism",
        "oauth-with-msk",
        "oidc-missing",
        "oidc-plaintext-endpoint",
        "oidc-url-credentials",
    ],
)
def test_conflicting_sasl_options_are_one_config_error(own: KafkaOptions, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        producer_config(parse_sink_spec("kafka:k.example:9093?topic=e&tls=true"), SinkOptions(own=own))

    assert "\n" not in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.usefixtures("restore_logging")
def test_conflicting_sasl_flags_stop_relayd_with_one_line_and_exit_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from relayd.cli.app import app

    password = tmp_path / "password"
    password.write_text("pw\n")
    secret = tmp_path / "secret"
    secret.write_text(SECRET + "\n")
    flags = [
        "--kafka-sasl-mechanism", "OAUTHBEARER",
        "--kafka-oauth-token-url", "https://idp.example/oauth2/token",
        "--kafka-oauth-client-id", "relayd",
        "--kafka-oauth-client-secret-file", str(secret),
        "--kafka-username-file", str(password),
        "--kafka-password-file", str(password),
    ]  # fmt: skip

    result = CliRunner().invoke(
        app,
        [
            "sweep",
            "--once",
            "--sink",
            "kafka:127.0.0.1:9092?topic=e",
            "--redis-url",
            "redis://127.0.0.1:1",
            *flags,
        ],
        env={"RELAYD_LOG_FORMAT": "json"},
    )

    assert result.exit_code == 2
    assert "OAUTHBEARER takes no --kafka-username-file" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert SECRET not in result.output


async def test_a_rotated_oidc_secret_file_makes_the_next_grant_with_the_new_secret(
    auth_broker: tuple[KafkaBroker, _CapturingRelay], token_endpoint: TokenEndpoint, tmp_path: Path
) -> None:
    """The secret file is watched: once it changed, the next batch is produced by a new producer,
    whose grant carries the new secret (the old producer's token is not asked for again)."""
    from support.secret_files import SecretDir

    from relayd.security.material import secret_file

    broker, _relay = auth_broker
    secrets = SecretDir(tmp_path / "secrets", "kubelet")
    secrets.write({"secret": "first-secret\n"})
    watched = secret_file("--kafka-oauth-client-secret-file", secrets.path("secret"))
    own = KafkaOptions(
        sasl_mechanism="OAUTHBEARER",
        oauth_token_url=token_endpoint.url,
        oauth_client_id="relayd-producer",
        oauth_client_secret=watched,
    )
    sink = KafkaSink(
        parse_sink_spec(f"kafka:{broker.bootstrap}?topic=events&timeout_s=1"), SinkOptions(own=own)
    )
    await sink.start()
    try:
        await until(lambda: len(token_endpoint.grants) == 1, timeout_s=30)
        secrets.write({"secret": "second-secret\n"})
        assert watched.check() == "reloaded"
        await sink.deliver(Batch.of([outbox("p", 1, "a")]))
        await until(lambda: len(token_endpoint.grants) == 2, timeout_s=30)
    finally:
        await sink.close()

    assert [grant["client_secret"] for grant in token_endpoint.grants] == ["first-secret", "second-secret"]
