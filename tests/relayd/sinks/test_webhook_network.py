"""The webhook sink in real networks, against real servers on 127.0.0.1: a receiver that asks for
a client certificate, an OAuth2 token endpoint, a forward proxy (CONNECT)."""

from __future__ import annotations

import base64
import datetime as dt
import shutil
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from support.forward_proxy import ConnectProxy
from support.http_receiver import serve_on_this_loop
from support.tls import Pki, make_pki, old_and_new_pki

from relayd.engine.breaker import delivery_signal
from relayd.envelope.batch import Batch
from relayd.errors import ConfigError
from relayd.security.material import Fixed, pem_file
from relayd.security.watch import MaterialWatch
from relayd.sinks import DELIVERED, Outcome, Retry, SinkOptions, SinkSpec
from relayd.sinks.webhook.oauth2 import LIFETIME_USED
from relayd.sinks.webhook.options import WebhookOptions
from relayd.sinks.webhook.sink import WebhookSink

from .conftest import outbox

CLIENT_ID = "relayd-client"
CLIENT_SECRET = "client-s3cret-value"
PROXY_PASSWORD = "proxy-pa55word"
#: The token endpoint's ``expires_in``, in seconds.
LIFETIME_S = 100


class FakeMonotonic:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now_s = 1_000.0

    def __call__(self) -> float:
        return self.now_s


def make_sink(url: str, monotonic: FakeMonotonic | None = None, **options: Any) -> WebhookSink:
    """A webhook sink; ``options`` named as ``WebhookOptions`` fields are its own, the rest common."""
    own_names = {item.name for item in fields(WebhookOptions)}
    own = WebhookOptions(**{name: value for name, value in options.items() if name in own_names})
    common = {name: value for name, value in options.items() if name not in own_names}
    return WebhookSink(
        SinkSpec("webhook", url), SinkOptions(own=own, **common), monotonic=monotonic or FakeMonotonic()
    )


def batch_of(first_seq: int, count: int) -> Batch:
    """``count`` envelopes of as many keys: the sink sends them concurrently."""
    return Batch.of([outbox("p", seq, f"t{seq}") for seq in range(first_seq, first_seq + count)])


def server_context(pki: Pki, *, client_ca: Path | None = None) -> ssl.SSLContext:
    """The receiver's TLS context; with ``client_ca`` it asks for a client certificate from that CA."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=client_ca)
    return context


@dataclass
class Receiver:
    """What an aiohttp receiver saw."""

    authorizations: list[str | None] = field(default_factory=list)
    #: Bearer tokens it accepts (None: any request).
    valid_tokens: set[str] | None = None

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        authorization = request.headers.get("Authorization")
        self.authorizations.append(authorization)
        if self.valid_tokens is not None and authorization not in {f"Bearer {t}" for t in self.valid_tokens}:
            return web.Response(status=401)
        return web.Response(status=204)


@dataclass
class TokenEndpoint:
    """An OAuth2 token endpoint: client credentials checked, one new token per grant."""

    receiver: Receiver
    client_auth: str = "basic"
    status: int = 200
    forms: list[dict[str, str]] = field(default_factory=list)

    @property
    def grants(self) -> int:
        return len(self.forms)

    async def handle(self, request: web.Request) -> web.Response:
        form = {key: str(value) for key, value in (await request.post()).items()}
        self.forms.append(form)
        if self.status != 200:
            # an error answer that echoes the secret: the sink's error text must not
            return web.json_response(
                {"error": "server_error", "client_secret": CLIENT_SECRET}, status=self.status
            )
        if self.client_auth == "basic":
            expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
            authorized = request.headers.get("Authorization") == f"Basic {expected}"
        else:
            authorized = form.get("client_id") == CLIENT_ID and form.get("client_secret") == CLIENT_SECRET
        if not authorized or form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "invalid_client"}, status=401)
        token = f"token-{self.grants}"
        assert self.receiver.valid_tokens is not None
        self.receiver.valid_tokens.add(token)
        return web.json_response({"access_token": token, "token_type": "Bearer", "expires_in": LIFETIME_S})


@asynccontextmanager
async def oauth2_servers(
    client_auth: str = "basic",
) -> AsyncIterator[tuple[Receiver, TokenEndpoint, str, str]]:
    """A receiver accepting the tokens a token endpoint grants: (receiver, endpoint, hook URL, token URL)."""
    receiver = Receiver(valid_tokens=set())
    endpoint = TokenEndpoint(receiver, client_auth=client_auth)
    async with (
        serve_on_this_loop(receiver.handle) as hook,
        serve_on_this_loop(endpoint.handle, "/token") as token,
    ):
        yield receiver, endpoint, hook, token


def oauth2_options(token_url: str, **more: Any) -> dict[str, Any]:
    return {
        "oauth2_token_url": token_url,
        "oauth2_client_id": Fixed(CLIENT_ID),
        "oauth2_client_secret": Fixed(CLIENT_SECRET),
        **more,
    }


# -- client certificates -------------------------------------------------------------------


async def test_a_receiver_asking_for_a_client_certificate_refuses_none_and_takes_a_rotated_one(
    tmp_path: Path,
) -> None:
    """The receiver trusts client certificates of CA a only. Without a certificate, and with one of
    CA b, every request fails (retried, never dead-lettered); once the files are rewritten with
    CA a's certificate and key, the next batch is delivered over a new context."""
    pki, other = old_and_new_pki(tmp_path)
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    shutil.copy(other.client_cert, cert)
    shutil.copy(other.client_key, key)
    watched_cert = pem_file("--webhook-cert-file", cert)
    watched_key = pem_file("--webhook-key-file", key)
    watch = MaterialWatch([watched_cert, watched_key])
    receiver = Receiver()
    async with serve_on_this_loop(
        receiver.handle, ssl_context=server_context(pki, client_ca=pki.ca_cert)
    ) as url:
        anonymous = make_sink(url, ca=Fixed(pki.ca_cert.read_bytes()))
        await anonymous.start()
        without = await anonymous.deliver(batch_of(1, 2))
        await anonymous.close()
        sink = make_sink(url, ca=Fixed(pki.ca_cert.read_bytes()), cert=watched_cert, key=watched_key)
        await sink.start()
        wrong_ca = await sink.deliver(batch_of(1, 2))
        shutil.copy(pki.client_key, key)  # the key first: the new pair does not load until both match
        watch.check_now()
        shutil.copy(pki.client_cert, cert)
        watch.check_now()
        rotated = await sink.deliver(batch_of(1, 2))
        await sink.close()

    assert all(isinstance(outcome, Retry) for outcome in [*without, *wrong_ca])
    assert list(rotated) == [DELIVERED, DELIVERED]
    assert len(receiver.authorizations) == 2  # only the rotated batch got through the handshake


async def test_a_certificate_without_its_key_or_with_another_key_is_one_config_error(tmp_path: Path) -> None:
    pki, other = old_and_new_pki(tmp_path)
    mismatched = make_sink(
        "https://127.0.0.1:9/h",
        cert=pem_file("--webhook-cert-file", pki.client_cert),
        key=pem_file("--webhook-key-file", other.client_key),
    )

    with pytest.raises(ConfigError, match="--webhook-cert-file and --webhook-key-file go together"):
        make_sink("https://127.0.0.1:9/h", cert=pem_file("--webhook-cert-file", pki.client_cert))
    with pytest.raises(ConfigError, match="--webhook-cert-file/--webhook-key-file does not load"):
        await mismatched.start()


# -- OAuth2 --------------------------------------------------------------------------------


async def test_one_grant_per_token_lifetime_over_many_deliveries() -> None:
    """Sixty deliveries in six concurrent batches take one token; past ``LIFETIME_USED`` of its
    lifetime the next batch's ten concurrent requests share exactly one new grant."""
    clock = FakeMonotonic()
    async with oauth2_servers() as (receiver, endpoint, hook, token_url):
        sink = make_sink(
            hook, clock, **oauth2_options(token_url, oauth2_scope="events:write", oauth2_audience="hooks")
        )
        await sink.start()
        outcomes: list[Outcome] = []
        for first in range(1, 61, 10):
            outcomes += await sink.deliver(batch_of(first, 10))
        grants_in_lifetime = endpoint.grants
        clock.now_s += LIFETIME_USED * LIFETIME_S - 1
        outcomes += await sink.deliver(batch_of(61, 10))
        grants_before_renewal = endpoint.grants
        clock.now_s += 1
        outcomes += await sink.deliver(batch_of(71, 10))
        await sink.close()

    assert outcomes == [DELIVERED] * 80
    assert grants_in_lifetime == 1
    assert grants_before_renewal == 1
    assert endpoint.grants == 2
    assert endpoint.forms[0] == {
        "grant_type": "client_credentials",
        "scope": "events:write",
        "audience": "hooks",
    }
    assert receiver.authorizations[:70] == ["Bearer token-1"] * 70
    assert receiver.authorizations[70:] == ["Bearer token-2"] * 10


async def test_a_401_renews_the_token_once_and_resends_within_the_attempt() -> None:
    """The receiver revokes the token: ten concurrent requests each get a 401, one grant follows,
    and every request is sent again with the new token and delivered, no entry retried."""
    async with oauth2_servers() as (receiver, endpoint, hook, token_url):
        sink = make_sink(hook, **oauth2_options(token_url))
        await sink.start()
        first = await sink.deliver(batch_of(1, 10))
        assert receiver.valid_tokens is not None
        receiver.valid_tokens.clear()
        second = await sink.deliver(batch_of(11, 10))
        await sink.close()

    assert list(first) == [DELIVERED] * 10
    assert list(second) == [DELIVERED] * 10
    assert endpoint.grants == 2
    assert receiver.authorizations[10:20] == ["Bearer token-1"] * 10
    assert receiver.authorizations[20:] == ["Bearer token-2"] * 10


async def test_a_token_refused_again_after_renewal_is_retried_not_dead_lettered() -> None:
    """A receiver that refuses every token: one renewal per request at most, then Retry."""
    async with oauth2_servers() as (_receiver, endpoint, _hook, token_url):
        refusing = Receiver(valid_tokens={"never-granted"})
        async with serve_on_this_loop(refusing.handle) as refusing_hook:
            sink = make_sink(refusing_hook, **oauth2_options(token_url))
            await sink.start()
            outcomes = await sink.deliver(batch_of(1, 1))
            await sink.close()

    assert outcomes == [Retry(error="webhook http 401 to a newly granted oauth2 token")]
    assert endpoint.grants == 2
    assert len(refusing.authorizations) == 2


async def test_client_secret_post_sends_the_client_in_the_form() -> None:
    async with oauth2_servers(client_auth="post") as (_receiver, endpoint, hook, token_url):
        sink = make_sink(hook, **oauth2_options(token_url, oauth2_client_auth="post"))
        await sink.start()
        outcomes = await sink.deliver(batch_of(1, 1))
        await sink.close()

    assert list(outcomes) == [DELIVERED]
    assert endpoint.forms[0]["client_id"] == CLIENT_ID


@pytest.mark.parametrize("failure", ["http 500", "refused"])
async def test_a_failing_token_endpoint_is_the_sink_down_not_a_poisoned_entry(failure: str) -> None:
    """Every entry is retried with the same error, nothing reaches the receiver, the sink is not
    ready, and the breaker reads the delivery as a failure of every key (an outage)."""
    async with oauth2_servers() as (receiver, endpoint, hook, token_url):
        endpoint.status = 500
        url = token_url if failure == "http 500" else "http://127.0.0.1:9/token"
        sink = make_sink(hook, **oauth2_options(url))
        await sink.start()
        batch = batch_of(1, 6)
        outcomes = await sink.deliver(batch)
        reason = sink.not_ready_reason()
        await sink.close()

    signal = delivery_signal(batch.keys(), batch.ids(), outcomes)
    assert len(outcomes) == 6
    assert all(
        isinstance(outcome, Retry) and "oauth2 token endpoint" in outcome.error for outcome in outcomes
    )
    assert not signal.succeeded
    assert signal.failed == 6
    assert reason is not None
    assert "oauth2 token endpoint" in reason
    assert receiver.authorizations == []
    for text in [reason, *(str(outcome) for outcome in outcomes)]:
        assert CLIENT_SECRET not in text


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"headers": Fixed((("Authorization", "Bearer x"),))}, "keep one"),
        ({"oauth2_client_secret": None}, "needs --webhook-oauth2-client-id-file"),
        ({"oauth2_token_url": "http://idp.example.com/token"}, "credentials over plaintext"),
    ],
    ids=["authorization header", "no secret file", "plaintext token url"],
)
def test_conflicting_oauth2_options_are_one_config_error(options: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says) as refused:
        make_sink(
            "https://hooks.example.com/h", **{**oauth2_options("https://idp.example.com/token"), **options}
        )

    assert CLIENT_SECRET not in str(refused.value)
    assert "\n" not in str(refused.value)


# -- forward proxy -------------------------------------------------------------------------


def proxy_options(proxy: ConnectProxy, password: str = PROXY_PASSWORD, **more: Any) -> dict[str, Any]:
    return {
        "proxy_url": proxy.url,
        "proxy_username": Fixed("relayd"),
        "proxy_password": Fixed(password),
        **more,
    }


async def test_https_through_the_proxy_is_tunnelled_and_verified_end_to_end(tmp_path: Path) -> None:
    """Requests go through one CONNECT tunnel per connection; inside it the receiver's certificate
    is checked against the sink's CA: a sink trusting another CA gets no answer."""
    pki, other = old_and_new_pki(tmp_path)
    receiver = Receiver()
    with ConnectProxy(credentials=("relayd", PROXY_PASSWORD)) as proxy:
        async with serve_on_this_loop(receiver.handle, ssl_context=server_context(pki)) as url:
            sink = make_sink(url, ca=Fixed(pki.ca_cert.read_bytes()), **proxy_options(proxy))
            await sink.start()
            delivered = await sink.deliver(batch_of(1, 3))
            await sink.close()
            untrusting = make_sink(url, ca=Fixed(other.ca_cert.read_bytes()), **proxy_options(proxy))
            await untrusting.start()
            refused = await untrusting.deliver(batch_of(1, 1))
            await untrusting.close()

    port = url.split(":")[2].split("/")[0]
    assert list(delivered) == [DELIVERED] * 3
    assert len(receiver.authorizations) == 3
    assert proxy.tunnels
    assert set(proxy.tunnels) == {f"127.0.0.1:{port}"}
    assert isinstance(refused[0], Retry)
    assert "proxy" not in refused[0].error  # the proxy did its part; the receiver's certificate failed


async def test_a_407_and_a_refused_proxy_are_the_sink_down_and_say_proxy(tmp_path: Path) -> None:
    """A wrong proxy password: every entry retried, the error names the proxy, the breaker reads
    an outage; a proxy that refuses connections likewise. Nothing is dead-lettered."""
    pki = make_pki(tmp_path, now=dt.datetime.now(dt.UTC))
    receiver = Receiver()
    with ConnectProxy(credentials=("relayd", PROXY_PASSWORD)) as proxy:
        async with serve_on_this_loop(receiver.handle, ssl_context=server_context(pki)) as url:
            wrong = make_sink(url, ca=Fixed(pki.ca_cert.read_bytes()), **proxy_options(proxy, "wrong-pa55"))
            await wrong.start()
            batch = batch_of(1, 4)
            refused = await wrong.deliver(batch)
            await wrong.close()
            gone = make_sink(url, ca=Fixed(pki.ca_cert.read_bytes()), proxy_url="http://127.0.0.1:9")
            await gone.start()
            unreachable = await gone.deliver(batch)
            await gone.close()

    assert proxy.refused >= 1
    assert receiver.authorizations == []
    for outcomes in (refused, unreachable):
        assert all(isinstance(outcome, Retry) and "proxy" in outcome.error for outcome in outcomes), outcomes
        assert not delivery_signal(batch.keys(), batch.ids(), outcomes).succeeded
        assert all(PROXY_PASSWORD not in outcome.error for outcome in outcomes if isinstance(outcome, Retry))
    assert "407" in refused[0].error  # type: ignore[union-attr]


async def test_plain_http_goes_through_the_proxy_and_its_407_is_an_outage_that_says_proxy() -> None:
    """An ``http://`` receiver and token endpoint are reached through the proxy in absolute form;
    with a wrong proxy password the proxy's 407 answers retry every entry, naming the proxy, for
    the receiver and for the token endpoint alike."""
    async with oauth2_servers() as (receiver, endpoint, hook, token_url):
        with ConnectProxy(credentials=("relayd", PROXY_PASSWORD)) as proxy:
            outcomes: dict[str, list[Outcome]] = {}
            for name, password, oauth2 in [
                ("delivered", PROXY_PASSWORD, True),
                ("hook refused", "wrong-pa55", False),
                ("token refused", "wrong-pa55", True),
            ]:
                more = oauth2_options(token_url) if oauth2 else {}
                sink = make_sink(hook, **proxy_options(proxy, password), **more)
                await sink.start()
                outcomes[name] = list(await sink.deliver(batch_of(1, 2)))
                await sink.close()

    assert outcomes["delivered"] == [DELIVERED] * 2
    assert proxy.forwarded.count(token_url) == 1
    assert proxy.forwarded.count(hook) == 2
    assert endpoint.grants == 1
    assert len(receiver.authorizations) == 2  # nothing got past the proxy with the wrong password
    for name, says in [("hook refused", "webhook proxy"), ("token refused", "oauth2 token endpoint: proxy")]:
        assert all(isinstance(outcome, Retry) and says in outcome.error for outcome in outcomes[name]), (
            outcomes
        )
        assert all("407" in outcome.error for outcome in outcomes[name] if isinstance(outcome, Retry))


async def test_a_no_proxy_host_and_the_proxy_variables_bypass_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--webhook-no-proxy 127.0.0.1`` sends straight to the receiver; ``HTTPS_PROXY`` and
    ``HTTP_PROXY`` alone are not read: the proxy sees no tunnel either way."""
    pki = make_pki(tmp_path, now=dt.datetime.now(dt.UTC))
    receiver = Receiver()
    with ConnectProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        async with serve_on_this_loop(receiver.handle, ssl_context=server_context(pki)) as url:
            ca = Fixed(pki.ca_cert.read_bytes())
            bypassing = make_sink(url, ca=ca, proxy_url=proxy.url, no_proxy="hooks.example.com, 127.0.0.0/8")
            from_env = make_sink(url, ca=ca)
            outcomes: list[Outcome] = []
            for sink in (bypassing, from_env):
                await sink.start()
                outcomes += await sink.deliver(batch_of(1, 2))
                await sink.close()

    assert outcomes == [DELIVERED] * 4
    assert proxy.tunnels == []
    assert len(receiver.authorizations) == 4


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"proxy_url": "http://relayd:pa55@proxy.example.com:3128"}, "holds credentials"),
        ({"proxy_url": "socks5://proxy.example.com:1080"}, "must be http://HOST:PORT"),
        ({"proxy_url": "http://proxy.example.com"}, "must be http://HOST:PORT"),
        ({"no_proxy": "example.com"}, "need --webhook-proxy-url"),
        ({"proxy_url": "http://proxy.example.com:3128", "no_proxy": "bad host!"}, "--webhook-no-proxy"),
        (
            {
                "proxy_url": "http://proxy.example.com:3128",
                "proxy_username": Fixed("u"),
                "proxy_password": Fixed("pa55"),
            },
            "credentials over plaintext",
        ),
    ],
    ids=["credentials in url", "not http", "no port", "no-proxy alone", "bad no-proxy", "plaintext password"],
)
def test_bad_proxy_options_are_one_config_error(options: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says) as refused:
        make_sink("https://hooks.example.com/h", **options)

    assert "pa55" not in str(refused.value)
    assert "\n" not in str(refused.value)
