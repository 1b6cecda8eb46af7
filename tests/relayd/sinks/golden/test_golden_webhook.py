"""Golden bytes of the webhook sink, captured at the wire: a bare HTTP server on 127.0.0.1 records
each request's line, header lines (as received, in order) and body bytes, per mode that changes
them: signatures (Standard Webhooks HMAC and ed25519, relayd's own), batches, gzip, extra headers,
an OAuth2 token (its grant request too), a forward proxy, CloudEvents binary, structured and
batched."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import orjson
import pytest

from relayd import __version__

from .conftest import check, deliver_all, deliveries, open_sink, payload

#: Standard Webhooks secrets: two HMAC keys (a rotation's overlap), and an ed25519 seed (RFC 8032's
#: first test key).
WHSEC_OLD: Final = "whsec_" + base64.b64encode(b"golden-old-key-" * 2).decode()
WHSEC_NEW: Final = "whsec_" + base64.b64encode(b"golden-new-key-" * 2).decode()
WHSK: Final = (
    "whsk_"
    + base64.b64encode(
        bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    ).decode()
)
#: Lines of ``--webhook-secret-file`` under ``--webhook-signature relayd`` (any text).
RELAYD_SECRETS: Final = "golden relayd secret\nand a second one\n"
#: Lines of ``--webhook-headers-file``.
EXTRA_HEADERS: Final = "# extra headers\nAuthorization: Bearer golden-token\nX-Tenant: acme\n"
#: What the receiver's token endpoint grants.
TOKEN_ANSWER: Final = orjson.dumps(
    {"access_token": "golden-access-token", "token_type": "Bearer", "expires_in": 3600}
)
#: The URL of the receiver itself in ``MODES``, filled in per run (its port is picked then).
HERE: Final = "{here}"

#: Each mode's flags (as ``load_settings`` names them). A flag ending in ``_file`` is given the
#: text of its file, which the test writes; ``{here}`` is the receiver's own URL.
MODES: Final[dict[str, dict[str, Any]]] = {
    "webhook": {},
    "webhook-batch": {"webhook_batch": 3},
    "webhook-standard-signatures": {"webhook_secret_file": f"{WHSEC_OLD}\n{WHSEC_NEW}\n"},
    "webhook-ed25519": {"webhook_secret_file": f"{WHSK}\n{WHSEC_NEW}\n"},
    "webhook-relayd-signature": {"webhook_signature": "relayd", "webhook_secret_file": RELAYD_SECRETS},
    "webhook-gzip": {"webhook_gzip": True, "webhook_secret_file": f"{WHSEC_NEW}\n"},
    "webhook-headers-file": {"webhook_headers_file": EXTRA_HEADERS},
    "webhook-oauth2": {
        "webhook_oauth2_token_url": f"{HERE}/token",
        "webhook_oauth2_client_id_file": "golden-client\n",
        "webhook_oauth2_client_secret_file": "golden-client-secret\n",
        "webhook_oauth2_scope": "events:write",
        "webhook_oauth2_audience": "https://hooks.example",
    },
    "webhook-proxy": {
        "allow_plaintext": True,  # http:// to a host that is not loopback, through the proxy
        "webhook_proxy_url": HERE,
        "webhook_proxy_username_file": "golden-proxy-user\n",
        "webhook_proxy_password_file": "golden-proxy-password\n",
    },
    "webhook-cloudevents-binary": {"format": "cloudevents", "cloudevents_mode": "binary"},
    "webhook-cloudevents-structured": {"format": "cloudevents", "cloudevents_mode": "structured"},
    "webhook-cloudevents-batch": {
        "format": "cloudevents",
        "webhook_batch": 3,
        "webhook_secret_file": f"{WHSEC_NEW}\n",
    },
}
#: Where the webhook sends: the receiver itself, or (through the proxy, which the receiver plays)
#: a host that is never looked up.
TARGETS: Final = {"webhook-proxy": "http://hooks.golden.test/hook"}


class Receiver:
    """A bare HTTP/1.1 server on 127.0.0.1 reading each request's bytes off the socket as they
    came (an HTTP server library would decode them first: aiohttp's gunzips a body), answering
    on a kept-alive connection: a token at ``/token``, else 200.

    Normalised, each in place (the line's name and position stay recorded): the receiver's own
    port, picked per run; the ``User-Agent``'s relayd version, which a release changes; and the
    value of ``Accept-Encoding``, which aiohttp sets (not the sink) from the compression
    libraries installed. Every other byte is kept.
    """

    def __init__(self) -> None:
        self.port = 0
        self.requests: list[dict[str, Any]] = []

    def _normalised(self, line: str) -> str:
        line = line.replace(f"127.0.0.1:{self.port}", "127.0.0.1:<port>")
        name = line.partition(": ")[0]
        if name.lower() == "user-agent":
            return line.replace(f"relayd/{__version__}", "relayd/<version>")
        if name.lower() == "accept-encoding":
            return f"{name}: <aiohttp's default>"
        return line

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while head := await _read_head(reader):
                request_line, *lines = head.decode("latin-1").split("\r\n")
                fields = {name.lower(): value for name, _, value in (line.partition(": ") for line in lines)}
                body = await reader.readexactly(int(fields.get("content-length", "0")))
                sent: dict[str, Any] = {
                    "request": self._normalised(request_line),
                    "headers": [self._normalised(line) for line in lines],
                    "body": payload(body),
                }
                if fields.get("content-encoding") == "gzip":  # for the reader; the bytes are "body"
                    sent["body gunzipped"] = payload(gzip.decompress(body))
                self.requests.append(sent)
                answer = TOKEN_ANSWER if request_line.split()[1] == "/token" else b""
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
                writer.write(b"Content-Length: %d\r\n\r\n%b" % (len(answer), answer))
                await writer.drain()
        finally:
            writer.close()

    def take(self) -> list[dict[str, Any]]:
        """The requests since the last call, sorted by their id header (a token grant first):
        requests of different keys or lanes go concurrently, so their arrival order is not fixed."""
        taken, self.requests = self.requests, []
        return sorted(taken, key=_request_id)


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    """A request's line and headers without the blank line; empty when the client closed."""
    try:
        return (await reader.readuntil(b"\r\n\r\n"))[:-4]
    except asyncio.IncompleteReadError:
        return b""


def _request_id(request: dict[str, Any]) -> str:
    prefix = "idempotency-key: "
    return next((line[len(prefix) :] for line in request["headers"] if line.lower().startswith(prefix)), "")


@contextlib.asynccontextmanager
async def receiving() -> AsyncIterator[tuple[Receiver, str]]:
    """A receiver, and its URL (``http://127.0.0.1:PORT``)."""
    receiver = Receiver()
    server = await asyncio.start_server(receiver.serve, "127.0.0.1", 0)
    receiver.port = server.sockets[0].getsockname()[1]
    try:
        yield receiver, f"http://127.0.0.1:{receiver.port}"
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("case", list(MODES))
async def test_webhook_sends_the_recorded_requests(case: str, tmp_path: Path) -> None:
    sent = []
    async with receiving() as (receiver, here):
        flags = {flag: _filled(value, here) for flag, value in MODES[case].items()}
        for flag in [flag for flag in flags if flag.endswith("_file")]:
            path = tmp_path / flag
            path.write_text(flags[flag])
            flags[flag] = path
        target = TARGETS.get(case, f"{here}/hook")
        sink = await open_sink(f"webhook:{target}", **flags)
        try:
            for name, batch in deliveries():
                await deliver_all(sink, [(name, batch)])
                sent.append({"delivery": name, "requests": receiver.take()})
        finally:
            await sink.close()

    spec = "webhook:" + TARGETS.get(case, "http://127.0.0.1:<port>/hook")
    recorded_flags = {flag: _filled(value, "http://127.0.0.1:<port>") for flag, value in MODES[case].items()}
    check(case, {"sink": spec, "flags": recorded_flags, "sent": sent})


def _filled(value: object, here: str) -> object:
    return value.replace(HERE, here) if isinstance(value, str) else value
