"""The ``webhook`` sink: POST each envelope as JSON to one URL, signed, with bounded concurrency.

Every request is ``POST <URL>`` with the envelope's ``relayd/1`` JSON as the body and headers

    Content-Type: application/json
    Idempotency-Key: <envelope id>          stable across redeliveries: dedupe on it
    X-Relayd-Timestamp: <unix seconds>      only with a signing secret (--webhook-secret-file)
    X-Relayd-Signature: v1=<hex digest>     only with a signing secret

The signature is ``hex(HMAC-SHA256(secret, f"{timestamp}.".encode() + body))``, over the raw
body bytes exactly as received. A receiver verifies it, and rejects stale timestamps to stop
replays, like this::

    import hashlib, hmac, time

    def verify(secret: bytes, headers, body: bytes, tolerance_s: int = 300) -> bool:
        timestamp = headers["X-Relayd-Timestamp"]
        expected = "v1=" + hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
        fresh = abs(time.time() - int(timestamp)) <= tolerance_s
        return fresh and hmac.compare_digest(expected, headers["X-Relayd-Signature"])

Outcomes: 2xx → Delivered; 408, 425, 429, 5xx, timeouts and connection errors → Retry
(``Retry-After`` in seconds or as an HTTP-date is honoured); any other status → Permanent
``"http <status>"``. Redirects are not followed.

Order: within a batch, envelopes of one ``ordering_key`` are sent one after another and a
failure holds back the rest of that key (``relayd.sinks.per_key``); different keys go
concurrently, at most ``options.webhook_concurrency`` requests at a time over one pooled client.
``ready()`` is false after a batch in which no request got any HTTP answer, until one does.
Neither the URL nor the secret appears in any log line or error text.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import httpx

from relayd.envelope import Envelope
from relayd.errors import ConfigError, SinkError
from relayd.sinks.base import Outcome, Retry, SinkOptions
from relayd.sinks.http_policy import classify_status, sign
from relayd.sinks.per_key import deliver_per_key
from relayd.sinks.spec import SinkSpec


class WebhookSink:
    """POST envelopes to ``spec.target``; see the module docstring for the wire contract."""

    name = "webhook"

    def __init__(
        self,
        spec: SinkSpec,
        options: SinkOptions,
        *,
        clock: Callable[[], float] = time.time,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not spec.target.startswith(("http://", "https://")):
            raise ConfigError("sink 'webhook' needs an http:// or https:// URL")
        if options.webhook_concurrency < 1 or options.webhook_timeout_s <= 0:
            raise ConfigError("sink 'webhook': concurrency must be >= 1 and the timeout > 0")
        self._url = spec.target
        self._secret = options.webhook_secret
        self._timeout_s = options.webhook_timeout_s
        self._concurrency = options.webhook_concurrency
        self._clock = clock
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._slots = asyncio.Semaphore(self._concurrency)
        self._answered = True

    async def start(self) -> None:
        limits = httpx.Limits(max_connections=self._concurrency, max_keepalive_connections=self._concurrency)
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(self._timeout_s),
            limits=limits,
            follow_redirects=False,
            transport=self._transport,
        )

    async def deliver(self, batch: Sequence[Envelope]) -> Sequence[Outcome]:
        client = self._client
        if client is None:
            raise SinkError("sink 'webhook' delivered to before start()")
        answered = 0

        async def send_one(envelope: Envelope) -> Outcome:
            nonlocal answered
            async with self._slots:
                try:
                    response = await client.post(
                        self._url, content=envelope.to_json(), headers=self._headers(envelope)
                    )
                except httpx.TimeoutException as exc:
                    return Retry(error=f"webhook timeout ({type(exc).__name__})")
                except httpx.TransportError as exc:
                    # the exception text may name the host; the type is enough to act on
                    return Retry(error=f"webhook connection error ({type(exc).__name__})")
            answered += 1
            return classify_status(response.status_code, response.headers.get("retry-after"), self._clock())

        outcomes = await deliver_per_key(batch, send_one)
        if batch:
            self._answered = answered > 0
        return outcomes

    def _headers(self, envelope: Envelope) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Idempotency-Key": envelope.id}
        if self._secret is not None:
            timestamp_s = int(self._clock())
            headers["X-Relayd-Timestamp"] = str(timestamp_s)
            headers["X-Relayd-Signature"] = sign(self._secret, timestamp_s, envelope.to_json())
        return headers

    def ready(self) -> bool:
        return self._answered

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
