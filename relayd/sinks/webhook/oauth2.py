"""OAuth2 client credentials (RFC 6749 §4.4) for the webhook sink: one bearer token, cached.

``OAuth2Tokens.token()`` hands out the current access token, asking the token endpoint for a new
one when there is none or when ``LIFETIME_USED`` of its ``expires_in`` has passed (a token
without ``expires_in`` is kept until a receiver refuses it). Callers that need a token at once
wait for the one refresh in flight: a lock lets one grant go at a time, and whoever waited
takes its token. ``invalidate(token)`` drops a token a receiver answered 401 to, once: a second
caller holding the same refused token finds the next one already there.

The grant is ``POST`` ``grant_type=client_credentials`` with ``scope`` and ``audience`` when set;
the client authenticates with HTTP Basic (``basic``, the RFC's default: id and secret
form-encoded, then base64) or with ``client_id`` and ``client_secret`` in the form (``post``).
The id and secret are read from their watched files at each grant, so a rotated secret is used
by the next one. A grant that fails raises ``TokenUnavailable``, whose text names the failure
(a connection error, an HTTP status with a redacted excerpt, an answer without a bearer token)
and never the secret, the token or the endpoint's URL.

The request itself is the caller's (``PostForm``: the sink's HTTP session, its TLS context and
proxy); the clock is a parameter.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import quote_plus

from relayd.security.material import Material
from relayd.sinks.webhook.http_excerpt import body_excerpt

#: Share of a token's ``expires_in`` after which the next request gets a new token (the rest
#: covers the clock skew between relayd and the endpoint and a request in flight at expiry).
LIFETIME_USED: Final = 0.8

#: Sends one form to the token endpoint: (url, form fields, headers) → (status, body).
#: Raises ``TokenUnavailable`` when no answer came (the caller words the connection error).
PostForm = Callable[[str, dict[str, str], dict[str, str]], Awaitable[tuple[int, bytes]]]


class TokenUnavailable(Exception):
    """The token endpoint gave no usable token; ``str()`` says why, without a secret."""


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    """What one grant asks for, and with which client."""

    token_url: str
    client_id: Material[str]
    client_secret: Material[str]
    scope: str | None = None
    audience: str | None = None
    client_auth: Literal["basic", "post"] = "basic"


def grant_request(client: ClientCredentials) -> tuple[dict[str, str], dict[str, str]]:
    """The form fields and headers of one client-credentials grant, from the files' current values."""
    form = {"grant_type": "client_credentials"}
    if client.scope:
        form["scope"] = client.scope
    if client.audience:
        form["audience"] = client.audience
    headers = {"Accept": "application/json"}
    client_id, client_secret = client.client_id.value, client.client_secret.value
    if client.client_auth == "post":
        form |= {"client_id": client_id, "client_secret": client_secret}
    else:
        pair = f"{quote_plus(client_id)}:{quote_plus(client_secret)}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    return form, headers


def parse_token_answer(status: int, body: bytes) -> tuple[str, float | None]:
    """The access token and its lifetime in seconds (None: not given) from the endpoint's answer.

    Raises:
        TokenUnavailable: an error status, or an answer that holds no bearer token.
    """
    if not 200 <= status < 300:
        excerpt = body_excerpt(body)
        raise TokenUnavailable(f"http {status}: {excerpt}" if excerpt else f"http {status}")
    try:
        answer = json.loads(body)
    except ValueError:
        raise TokenUnavailable("the answer is not JSON") from None
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token or not token.isprintable():
        raise TokenUnavailable("the answer holds no access_token")
    token_type = answer.get("token_type", "Bearer")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise TokenUnavailable("the answer's token_type is not Bearer")
    expires_in = answer.get("expires_in")
    if isinstance(expires_in, str) and expires_in.isdigit():
        expires_in = int(expires_in)  # some endpoints send it as a string
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float) or expires_in <= 0:
        return token, None
    return token, float(expires_in)


class OAuth2Tokens:
    """The cached token of one client; see the module docstring."""

    def __init__(
        self, client: ClientCredentials, post_form: PostForm, monotonic: Callable[[], float]
    ) -> None:
        self._client = client
        self._post_form = post_form
        self._monotonic = monotonic
        self._token: str | None = None
        #: Monotonic seconds after which the token is renewed (None: kept until refused).
        self._renew_at_s: float | None = None
        self._lock = asyncio.Lock()
        #: Grants made (successful or not), for tests and the benchmark.
        self.grants = 0

    async def token(self) -> str:
        """The current token, fetched first when there is none or it is due for renewal.

        Raises:
            TokenUnavailable: the endpoint gave none.
        """
        token = self._fresh()
        if token is not None:
            return token
        async with self._lock:
            token = self._fresh()  # another caller may have fetched one while this one waited
            if token is not None:
                return token
            return await self._grant()

    def fresh(self) -> str | None:
        """The current token when it needs no grant (the hot path: no await), else None."""
        return self._fresh()

    def invalidate(self, token: str) -> None:
        """Forget ``token`` (a receiver refused it) unless a newer one has replaced it already."""
        if token == self._token:
            self._token = None

    def _fresh(self) -> str | None:
        if self._token is None:
            return None
        if self._renew_at_s is not None and self._monotonic() >= self._renew_at_s:
            return None
        return self._token

    async def _grant(self) -> str:
        form, headers = grant_request(self._client)
        self.grants += 1
        started_s = self._monotonic()
        status, body = await self._post_form(self._client.token_url, form, headers)
        token, lifetime_s = parse_token_answer(status, body)
        self._token = token
        self._renew_at_s = None if lifetime_s is None else started_s + LIFETIME_USED * lifetime_s
        return token
