"""The ``webhook`` sink: POST each envelope as JSON to one URL, signed, with bounded concurrency.

Every request is ``POST <URL>`` with the envelope's ``relayd/1`` JSON as the body and headers

    Content-Type: application/json
    Idempotency-Key: <envelope id>          stable across redeliveries: dedupe on it
    <signing headers>                       by --webhook-signature, below
    Content-Encoding: gzip                  only with --webhook-gzip
    ce-<attribute>: <value>                 only with --format cloudevents (below)
    traceparent, tracestate                 the envelope's trace context (``trace_context``); a batch
                                            request's when all its envelopes share one
    <Name>: <value>                         each line of --webhook-headers-file (Authorization, ...)
    Authorization: Bearer <token>           only with --webhook-oauth2-token-url (below)

``--webhook-signature standard`` (the default) signs as Standard Webhooks does
(``relayd.sinks.webhook.standard_webhooks``): ``webhook-id`` (the envelope id, the same on every
redelivery), ``webhook-timestamp`` (unix seconds of this attempt) and, with a secret file of
``whsec_<base64>`` lines, ``webhook-signature: v1,<base64> [v1,<base64>]``, each
``base64(HMAC-SHA256(key, f"{id}.{timestamp}." + body))``; a receiver verifies with the
``standardwebhooks`` or ``svix`` package. ``--webhook-signature relayd`` sends, with a secret
file, ``X-Relayd-Timestamp`` and ``X-Relayd-Signature: v1=<hex> [v1=<hex>]``, each
``hex(HMAC-SHA256(secret, f"{timestamp}." + body))``. Either way a signature covers the JSON
body bytes (with ``--webhook-gzip``, the JSON before compression: decompress, then verify) and
the header carries one signature per line of the secret file, in the file's order, so a secret
is rotated with an overlap (old and new lines, then the new one alone) while the receiver moves
from the old secret to the new. The file is re-read when it changes (``relayd.security.material``). A
receiver accepts a request when one of the signatures matches its secret, and rejects stale
timestamps to stop replays, like this for the relayd scheme::

    import hashlib, hmac, time

    def verify(secret: bytes, headers, body: bytes, tolerance_s: int = 300) -> bool:
        timestamp = headers["X-Relayd-Timestamp"]
        expected = "v1=" + hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
        fresh = abs(time.time() - int(timestamp)) <= tolerance_s
        offered = headers["X-Relayd-Signature"].split(" ")
        return fresh and any(hmac.compare_digest(expected, signature) for signature in offered)

With ``--format cloudevents`` the body is the envelope as a CloudEvent
(``relayd.sinks.cloudevents``), in the HTTP binding's ``--cloudevents-mode``: ``binary`` sends the
event's data as the body (``Content-Type: application/json``) and each attribute as a
``ce-<name>`` header; ``structured`` sends the whole event as the body
(``Content-Type: application/cloudevents+json``). A ``traceparent`` the event carries is also
sent as the W3C ``traceparent`` header. Signatures cover the body as sent.

Outcomes: 2xx → Delivered; 408, 425, 429, 5xx, timeouts and connection errors → Retry
(``Retry-After`` in seconds or as an HTTP-date is honoured); 410 → Permanent ``"http 410
endpoint gone"``; any other status → Permanent ``"http <status>"``. Redirects are not followed.
Timeouts (``WebhookOptions``, the ``--webhook-*`` flags): ``timeout`` bounds a whole request,
``connect_timeout`` opening a connection and ``read_timeout`` each wait for the answer's next
bytes. TLS is always verified (``ca_file`` replaces the system trust store; a changed bundle
(``ca``) makes a new context, which new connections use from the next batch on: aiohttp keys its
pool by the context). A 401, 403 or 407 answer, a failed TLS handshake or a failed token
grant has every watched file read again at once (``options.check_material``), so new material is not left
waiting for the next periodic check.

Networks (docs/sinks.md): with ``oauth2_token_url`` each request carries a client-credentials
token (``relayd.sinks.webhook.oauth2``), cached for most of its lifetime; a 401 renews it and
sends the request once more within the same attempt, and a token endpoint that fails retries
every entry of the batch (the sink down, which the breaker counts, never a poisoned entry).
``cert`` and ``key`` are a client certificate presented to receivers that ask for one, re-read
like the CA bundle (``relayd.security.tls.WatchedCaContext``). ``proxy_url`` sends webhook and token
requests through a forward proxy (``relayd.sinks.webhook.proxy``: CONNECT for ``https://``,
verified end to end), except to the hosts of ``no_proxy``; a proxy that refuses or answers 407
retries every entry with an error that says "proxy". The standard proxy variables are not read
(``trust_env=False``). With ``--allow-plaintext`` credentials go over ``http://`` too (a service
mesh), and each such host is named in one warning line at start-up
(``relayd.sinks.webhook.transport``).

Order: within a batch, envelopes of one ordering key are sent one after another and a failure
holds back the rest of that key (``relayd.sinks.per_key``); different keys go concurrently, at
most ``concurrency`` requests at a time over one aiohttp keep-alive pool of as
many connections. No request starts once the replica's lease may have expired
(``relayd.sinks.sending``). The batch is read a column at a time (ids, keys, rendered bodies),
so an outbox window builds no envelope. ``ready()`` is false after a batch in which no request
got any HTTP answer, until one does. Neither the URL, the secret nor a header value appears in any
log line or error text.

aiohttp, not httpx: posting the same bodies to the same local server, aiohttp's client used a
fraction of the CPU per request of httpx's (``tests/benchmarks/bench_http_clients.py``).
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import os
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import aiohttp
import structlog
from aiohttp.abc import AbstractStreamWriter

from relayd import __version__
from relayd.envelope.batch import Batch
from relayd.errors import ConfigError, SinkError
from relayd.observability.inflight import progressed
from relayd.security.material import Fixed, Material
from relayd.security.tls import WatchedCaContext
from relayd.sinks import cloudevents, trace_context
from relayd.sinks.base import Outcome, ReadyByReason, Retry, SinkOptions
from relayd.sinks.per_key import HELD_BACK, deliver_in_key_order
from relayd.sinks.sending import NOT_SENT, may_send
from relayd.sinks.spec import SinkSpec
from relayd.sinks.webhook import batches as webhook_batches
from relayd.sinks.webhook.http_policy import about_content, classify_status, signature_headers
from relayd.sinks.webhook.oauth2 import ClientCredentials, OAuth2Tokens, PostForm, TokenUnavailable
from relayd.sinks.webhook.options import WebhookOptions
from relayd.sinks.webhook.proxy import NoProxy, check_proxy_url, parse_no_proxy
from relayd.sinks.webhook.transport import (
    carries_credentials,
    check_webhook_transport,
    credentials_refusal,
    plaintext_credentials_host,
    webhook_transport_refusal,
)

log = structlog.get_logger(__name__)

#: Sends one request: its body, its id and the headers of its format; returns its outcome and
#: whether the refusal may be about one entry of several (``http_policy.about_content``).
_Post = Callable[[bytes, str, dict[str, str]], Awaitable[tuple[Outcome, bool]]]

#: Gzip level for ``--webhook-gzip``: a middle level; small bodies gain little from the slowest ones.
GZIP_LEVEL: Final = 5
#: Statuses after which the watched files are read again at once: the receiver (or the proxy)
#: refused the credentials.
REFUSED_CREDENTIALS: Final = frozenset({401, 403, 407})
#: The receiver refused the request's credentials: with OAuth2, the token is renewed and the
#: request sent once more.
UNAUTHORIZED: Final = 401
#: The proxy asks for (other) credentials: the proxy is down for relayd, not the entry.
PROXY_AUTHENTICATION_REQUIRED: Final = 407


def connection_failure(exc: aiohttp.ClientError) -> str:
    """What went wrong, without the host: the OS error's own text (``Connection refused``) when
    there is one (its message may name the address), else the exception's type."""
    os_error = getattr(exc, "os_error", None)
    if isinstance(os_error, OSError) and os_error.errno:
        return os.strerror(os_error.errno)
    return type(exc).__name__


class _FencedBody(aiohttp.BytesPayload):
    """A request body that is not written once the replica's lease may have expired.

    aiohttp writes a request's headers and body from a task of its own, an event-loop turn after
    the request was started, so a process frozen in between would send it on resume although
    the check before it passed; this checks again where the bytes go out (headers included:
    aiohttp holds them back to send with the body). Raising makes aiohttp fail the request
    with a ``ClientConnectionError``.
    """

    async def write(self, writer: AbstractStreamWriter) -> None:  # aiohttp before 3.12 calls this
        if not may_send():
            raise _NotSentError(NOT_SENT)
        await super().write(writer)

    async def write_with_length(self, writer: AbstractStreamWriter, content_length: int | None) -> None:
        if not may_send():
            raise _NotSentError(NOT_SENT)
        await super().write_with_length(writer, content_length)


class _NotSentError(Exception):
    """The lease may have expired before this request's bytes went out."""


@dataclass(slots=True)
class _Sending:
    """What the requests of one batch share, and what their answers said."""

    session: aiohttp.ClientSession
    base_headers: dict[str, str]
    secrets: tuple[bytes, ...]
    context: ssl.SSLContext
    proxy: str | None
    proxy_headers: dict[str, str] | None
    #: Requests that got an HTTP answer.
    answered: int = 0
    #: Requests that went out (not those held back for the lease).
    tried: int = 0
    #: Whether an answer suggests the credentials or the TLS material changed.
    stale: bool = False


class WebhookSink(ReadyByReason):
    """POST envelopes to ``spec.target``; see the module docstring for the wire contract."""

    name = "webhook"
    options_class = WebhookOptions

    def __init__(
        self,
        spec: SinkSpec,
        options: SinkOptions,
        *,
        clock: Callable[[], float] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not spec.target.startswith(("http://", "https://")):
            raise ConfigError("sink 'webhook' needs an http:// or https:// URL")
        own = options.own_options(WebhookOptions)
        if own.concurrency < 1 or own.timeout <= 0:
            raise ConfigError("sink 'webhook': concurrency must be >= 1 and the timeout > 0")
        self._extra_headers: Material[tuple[tuple[str, str], ...]] = own.headers or Fixed(())
        header_names = [name for name, _ in self._extra_headers.value]
        oauth2 = own.oauth2_token_url is not None
        allow_plaintext = options.allow_plaintext
        check_webhook_transport(spec.target, header_names, allow_plaintext=allow_plaintext, oauth2=oauth2)
        self._allow_plaintext = allow_plaintext
        self._oauth2 = oauth2
        self._proxy_url, self._proxy_auth = _proxy(own, allow_plaintext=allow_plaintext)
        self._no_proxy = _no_proxy(own)
        self._tokens = _tokens(own, self._post_form, monotonic, allow_plaintext=allow_plaintext)
        _warn_plaintext_credentials(
            [
                (spec.target, carries_credentials(spec.target, header_names, oauth2=oauth2)),
                (own.oauth2_token_url or "", oauth2),
                (self._proxy_url or "", self._proxy_auth is not None),
            ]
        )
        self._checked_headers: tuple[tuple[str, str], ...] | None = None
        self._headers_refusal: str | None = None
        self._url = spec.target
        self._secrets: Material[tuple[bytes, ...]] | None = own.secrets
        self._signature = own.signature
        self._cloudevents = options.output_format == "cloudevents"
        self._cloudevents_mode = options.cloudevents_mode
        self._cloudevents_source = options.cloudevents_source
        self._concurrency = own.concurrency
        self._batch_size = own.batch
        #: the longest one request waits (``relayd.observability.inflight``: liveness allows this
        #: plus a grace)
        self.timeout_s = own.timeout
        self._timeout = aiohttp.ClientTimeout(
            total=own.timeout, sock_connect=own.connect_timeout, sock_read=own.read_timeout
        )
        self._gzip = own.gzip
        ca_file = str(own.ca_file) if own.ca_file is not None else None
        if (own.cert is None) != (own.key is None):
            raise ConfigError("sink 'webhook': --webhook-cert-file and --webhook-key-file go together")
        self._tls = WatchedCaContext(
            own.ca,
            ca_file,
            option="sink 'webhook': --webhook-ca-file",
            cert=own.cert,
            key=own.key,
            cert_option="sink 'webhook': --webhook-cert-file/--webhook-key-file",
        )
        self._fixed_headers = {"Content-Type": "application/json", "User-Agent": f"relayd/{__version__}"}
        if self._gzip:
            self._fixed_headers["Content-Encoding"] = "gzip"
        self._check_material = options.check_material
        self._clock = clock or options.clock or time.time  # the relay's: Redis's clock, not the host's
        self._session: aiohttp.ClientSession | None = None
        self._slots = asyncio.Semaphore(self._concurrency)
        self._not_ready: str | None = None

    async def start(self) -> None:
        context = self._tls.current()
        # One keep-alive connection per request in flight: the pool scales with the concurrency.
        connector = aiohttp.TCPConnector(
            limit=self._concurrency, limit_per_host=self._concurrency, ssl=context
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            skip_auto_headers=("User-Agent",),
            auto_decompress=False,
            # HTTP(S)_PROXY, NO_PROXY and ~/.netrc are not read: the proxy is --webhook-proxy-url
            trust_env=False,
        )

    async def _post_form(self, url: str, form: dict[str, str], headers: dict[str, str]) -> tuple[int, bytes]:
        """POST a form to the token endpoint over the sink's session: its TLS context and proxy."""
        session = self._session
        if session is None:
            raise TokenUnavailable("the sink is not started")
        proxy, proxy_headers, in_request = self._proxy_for(url)
        try:
            async with session.post(
                url,
                data=form,
                headers={"User-Agent": f"relayd/{__version__}", **headers, **in_request},
                allow_redirects=False,
                ssl=self._tls.current(),
                proxy=proxy,
                proxy_headers=proxy_headers,
            ) as answer:
                status, body = answer.status, await answer.read()
        except TimeoutError as exc:
            raise TokenUnavailable(f"timeout ({type(exc).__name__})") from None
        except aiohttp.ClientError as exc:
            raise TokenUnavailable(_client_error(exc)) from None
        if status == PROXY_AUTHENTICATION_REQUIRED:
            raise TokenUnavailable("proxy refused the request (http 407 proxy authentication required)")
        return status, body

    def _proxy_for(self, url: str) -> tuple[str | None, dict[str, str] | None, dict[str, str]]:
        """The proxy a request to ``url`` goes through (None: straight to its host), the headers
        of its ``CONNECT`` and those the request itself carries for the proxy.

        aiohttp sends ``proxy_headers`` with the ``CONNECT`` of an ``https://`` target only; a
        plain ``http://`` request goes to the proxy itself, so it carries ``Proxy-Authorization``.
        """
        parts = urlsplit(url)
        if self._proxy_url is None or self._no_proxy.bypasses(parts.hostname or ""):
            return None, None, {}
        credentials = self._proxy_auth.value if self._proxy_auth is not None else {}
        if parts.scheme.lower() == "https":
            return self._proxy_url, credentials or None, {}
        return self._proxy_url, None, credentials

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        session = self._session
        if session is None:
            raise SinkError("sink 'webhook' delivered to before start()")
        # the material current for this batch: a rotated file takes effect from the next one
        extra_headers = self._extra_headers.value
        refusal = self._refusal(extra_headers)
        if refusal is not None:  # a rotated headers file broke the plaintext rule: send nothing
            return [Retry(error=f"webhook {refusal}")] * len(batch)
        if self._tokens is not None and batch:
            try:
                await self._tokens.token()  # the endpoint down is the sink down: no entry is charged
            except TokenUnavailable as exc:
                self._not_ready = f"webhook oauth2 token endpoint failed: {exc}"
                if self._check_material is not None:
                    self._check_material()  # a rotated client secret may be waiting
                return [Retry(error=f"webhook oauth2 token endpoint: {exc}")] * len(batch)
        proxy, proxy_headers, in_request = self._proxy_for(self._url)
        sending = _Sending(
            session=session,
            base_headers={**self._fixed_headers, **dict(extra_headers), **in_request},
            secrets=self._secrets.value if self._secrets is not None else (),
            context=self._tls.current(),
            proxy=proxy,
            proxy_headers=proxy_headers,
        )

        async def post(body: bytes, message_id: str, format_headers: dict[str, str]) -> tuple[Outcome, bool]:
            return await self._post(sending, body, message_id, format_headers)

        if self._batch_size > 1:
            outcomes = await self._deliver_batched(batch, post)
        else:
            outcomes = await self._deliver_one_by_one(batch, post)
        if sending.tried:  # a batch left unsent for the lease says nothing about the receiver
            self._not_ready = (
                None if sending.answered > 0 else "webhook receiver gave no answer to the last batch"
            )
        if sending.stale and self._check_material is not None:
            self._check_material()
        return outcomes

    async def _post(
        self, sending: _Sending, body: bytes, message_id: str, format_headers: dict[str, str]
    ) -> tuple[Outcome, bool]:
        """Send one request and read its outcome, and whether a refusal may be about one entry of
        several; with OAuth2, a 401 renews the token and sends it once more, within the same
        attempt."""
        headers = sending.base_headers | {"Idempotency-Key": message_id} | format_headers
        headers |= signature_headers(self._signature, sending.secrets, message_id, int(self._clock()), body)
        data = gzip.compress(body, GZIP_LEVEL, mtime=0) if self._gzip else body
        tokens = self._tokens
        async with self._slots:
            if not may_send():  # a pause while this request waited for its slot
                return Retry(error=NOT_SENT), False
            token = None
            for renewed in (False, True):
                if tokens is not None:
                    try:
                        token = tokens.fresh() or await tokens.token()
                    except TokenUnavailable as exc:
                        return Retry(error=f"webhook oauth2 token endpoint: {exc}"), False
                    headers["Authorization"] = f"Bearer {token}"
                answer = await self._send(sending, data, headers)
                if not isinstance(answer, tuple):
                    return answer, False
                status, retry_after, answer_body = answer
                if token is None or status != UNAUTHORIZED or renewed:
                    break
                assert tokens is not None
                tokens.invalidate(token)  # refused: the next turn asks for a new one
        sending.answered += 1
        sending.stale |= status in REFUSED_CREDENTIALS
        if status == PROXY_AUTHENTICATION_REQUIRED:
            return Retry(
                error="webhook proxy refused the request (http 407 proxy authentication required)"
            ), False
        if status == UNAUTHORIZED and token is not None:
            return Retry(error="webhook http 401 to a newly granted oauth2 token"), False
        outcome = classify_status(status, retry_after, self._clock(), answer_body)
        return outcome, about_content(status, retry_after)

    async def _send(
        self, sending: _Sending, data: bytes, headers: dict[str, str]
    ) -> Outcome | tuple[int, str | None, bytes]:
        """One request: the answer's status, ``Retry-After`` and body, or the failure's outcome."""
        try:
            async with sending.session.post(
                self._url,
                data=_FencedBody(data),
                headers=headers,
                allow_redirects=False,
                ssl=sending.context,
                proxy=sending.proxy,
                proxy_headers=sending.proxy_headers,
            ) as answer:
                # read to the end: the connection goes back to the pool
                answer_body = await answer.read()
                sending.tried += 1
                return answer.status, answer.headers.get("Retry-After"), answer_body
        except TimeoutError as exc:
            sending.tried += 1
            return Retry(error=f"webhook timeout ({type(exc).__name__})")
        except aiohttp.ClientError as exc:
            if not may_send():  # ``_FencedBody`` stopped it before a byte went out
                return Retry(error=NOT_SENT)
            sending.tried += 1
            # a failed certificate check or a proxy's refusal: new material may be waiting
            sending.stale |= isinstance(exc, aiohttp.ClientSSLError | aiohttp.ClientHttpProxyError)
            return Retry(error="webhook " + _client_error(exc))
        finally:
            progressed()  # this request ended: the call's liveness deadline starts again

    async def _deliver_one_by_one(self, batch: Batch, post: _Post) -> list[Outcome]:
        """One request per envelope, in key order (``relayd.sinks.per_key``)."""
        ids = batch.ids()
        format_headers: list[dict[str, str]] = []
        if self._cloudevents:
            mode, source = self._cloudevents_mode, self._cloudevents_source
            bodies, format_headers = cloudevents.http_messages(batch, mode, source)
        else:
            bodies = batch.render()
            format_headers = trace_context.of_batch(batch)

        async def send_one(index: int) -> Outcome:
            headers = format_headers[index] if format_headers else {}
            outcome, _ = await post(bodies[index], ids[index], headers)
            return outcome

        return await deliver_in_key_order(batch.keys(), send_one)

    async def _deliver_batched(self, batch: Batch, post: _Post) -> list[Outcome]:
        """Requests of up to ``--webhook-batch`` envelopes, lane by lane (``webhook_batches``)."""
        ids = batch.ids()
        to_body: Callable[[Sequence[bytes]], bytes]
        if self._cloudevents:
            entries = cloudevents.structured_renderer("cloudevents", self._cloudevents_source)(batch)
            content = {"Content-Type": cloudevents.BATCH_CONTENT_TYPE}
            to_body = cloudevents.structured_array
        else:
            entries, content, to_body = batch.render(), {}, webhook_batches.envelopes_body
        outcomes: list[Outcome] = [Retry(error=HELD_BACK)] * len(batch)
        contexts = trace_context.of_batch(batch)

        async def send(indexes: list[int]) -> tuple[Outcome, bool]:
            body = to_body([entries[index] for index in indexes])
            request_id = webhook_batches.batch_id([ids[index] for index in indexes])
            headers = {**content, **trace_context.shared([contexts[index] for index in indexes])}
            return await post(body, request_id, headers)

        keys, size = batch.keys(), self._batch_size
        lanes = webhook_batches.lanes(keys, size, self._concurrency)
        await asyncio.gather(*(webhook_batches.send_lane(lane, keys, size, send, outcomes) for lane in lanes))
        return outcomes

    def not_ready_reason(self) -> str | None:
        return self._not_ready or self._tls.problem

    def _refusal(self, extra_headers: tuple[tuple[str, str], ...]) -> str | None:
        """Why these headers may not go to this URL (checked again only when the file changed)."""
        if extra_headers is not self._checked_headers:
            self._checked_headers = extra_headers
            self._headers_refusal = webhook_transport_refusal(
                self._url,
                [name for name, _ in extra_headers],
                allow_plaintext=self._allow_plaintext,
                oauth2=self._oauth2,
            )
        return self._headers_refusal

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


class _ProxyAuth:
    """The proxy's ``Proxy-Authorization`` header (Basic) from the current content of its two files."""

    __slots__ = ("_password", "_username")

    def __init__(self, username: Material[str], password: Material[str]) -> None:
        self._username, self._password = username, password

    @property
    def value(self) -> dict[str, str]:
        pair = f"{self._username.value}:{self._password.value}".encode()
        return {"Proxy-Authorization": "Basic " + base64.b64encode(pair).decode()}


def _proxy(own: WebhookOptions, *, allow_plaintext: bool) -> tuple[str | None, _ProxyAuth | None]:
    """The checked proxy URL and its credentials (``relayd.sinks.webhook.proxy``).

    Raises:
        ConfigError: a bad URL, credentials in it, or credential files without a URL or alone.
    """
    username, password = own.proxy_username, own.proxy_password
    if (username is None) != (password is None):
        raise ConfigError(
            "sink 'webhook': --webhook-proxy-username-file and --webhook-proxy-password-file go together"
        )
    if own.proxy_url is None:
        if username is not None or own.no_proxy is not None:
            raise ConfigError(
                "sink 'webhook': the proxy's files and --webhook-no-proxy need --webhook-proxy-url"
            )
        return None, None
    try:
        url = check_proxy_url(own.proxy_url)
    except ValueError as exc:
        raise ConfigError(f"sink 'webhook': {exc}") from None
    auth = _ProxyAuth(username, password) if username is not None and password is not None else None
    refusal = credentials_refusal(
        url, credentials=auth is not None, allow_plaintext=allow_plaintext, service="proxy"
    )
    if refusal is not None and auth is not None:
        raise ConfigError(f"sink 'webhook': --webhook-proxy-url: {refusal}")
    return url, auth


def _no_proxy(own: WebhookOptions) -> NoProxy:
    try:
        return parse_no_proxy(own.no_proxy)
    except ValueError as exc:
        raise ConfigError(f"sink 'webhook': {exc}") from None


def _tokens(
    own: WebhookOptions, post_form: PostForm, monotonic: Callable[[], float], *, allow_plaintext: bool
) -> OAuth2Tokens | None:
    """The OAuth2 token cache when ``--webhook-oauth2-token-url`` is given.

    Raises:
        ConfigError: the token URL without its client files, or the files without the URL.
    """
    client_id, client_secret = own.oauth2_client_id, own.oauth2_client_secret
    if own.oauth2_token_url is None:
        if client_id is not None or client_secret is not None or own.oauth2_scope or own.oauth2_audience:
            raise ConfigError(
                "sink 'webhook': the --webhook-oauth2-* options need --webhook-oauth2-token-url"
            )
        return None
    if client_id is None or client_secret is None:
        raise ConfigError(
            "sink 'webhook': --webhook-oauth2-token-url needs --webhook-oauth2-client-id-file "
            "and --webhook-oauth2-client-secret-file"
        )
    url = own.oauth2_token_url
    if not url.startswith(("http://", "https://")) or urlsplit(url).username is not None:
        raise ConfigError(
            "sink 'webhook': --webhook-oauth2-token-url must be an http(s):// URL without credentials"
        )
    refusal = credentials_refusal(
        url, credentials=True, allow_plaintext=allow_plaintext, service="oauth2 token"
    )
    if refusal is not None:
        raise ConfigError(f"sink 'webhook': --webhook-oauth2-token-url: {refusal}")
    client = ClientCredentials(
        url, client_id, client_secret, own.oauth2_scope, own.oauth2_audience, own.oauth2_client_auth
    )
    return OAuth2Tokens(client, post_form, monotonic)


def _warn_plaintext_credentials(urls: Sequence[tuple[str, bool]]) -> None:
    """One warning line per host credentials go to over ``http://`` (allowed: ``--allow-plaintext``)."""
    warned: set[str] = set()
    for url, credentials in urls:
        host = plaintext_credentials_host(url, credentials=credentials) if url else None
        if host is not None and host not in warned:
            warned.add(host)
            log.warning(
                "webhook_plaintext_credentials",
                host=host,
                error="credentials sent over plain http (--allow-plaintext)",
            )


def _client_error(exc: aiohttp.ClientError) -> str:
    """The error text of a request that got no answer; a proxy's failure says "proxy"."""
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return f"proxy refused the tunnel (http {exc.status})"
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        return f"proxy connection error ({connection_failure(exc)})"
    return f"connection error ({connection_failure(exc)})"
