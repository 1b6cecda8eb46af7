"""Whether a webhook's URL and headers may be used: credentials never over plaintext.

The plaintext rule is ``relayd.config.redis_url.plaintext_refusal`` (the one rule for every
connection relayd opens): ``https://`` always may; ``http://`` to loopback may; ``http://``
elsewhere needs ``--allow-plaintext``. Unlike Redis's, a webhook's credentials (the URL's user
info, a credential header of ``--webhook-headers-file``, an OAuth2 token) may then go over
``http://`` too: ``--allow-plaintext`` is the operator's word that a service mesh encrypts the
hop, and the sink names the host in one warning line at start-up. The same holds for the
token endpoint (the client secret) and the proxy (its password). URL credentials, an
``Authorization`` header and an OAuth2 token are refused in pairs too: the HTTP client would
refuse every request, or one would silently replace the other.
At start-up a refusal stops relayd (exit 2); a rotated headers file that breaks the rule is
refused batch by batch instead (nothing is sent, every entry is retried) until it is fixed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from relayd.config.redis_url import is_loopback, plaintext_refusal
from relayd.errors import ConfigError

#: Header names (lower case) whose values are credentials: never sent over plaintext.
CREDENTIAL_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-auth-token"}
)


def check_webhook_transport(
    url: str, header_names: Iterable[str], *, allow_plaintext: bool, oauth2: bool = False
) -> None:
    """Refuse a webhook configuration that would leak credentials or fail every request.

    Raises:
        ConfigError: one line naming the rule broken; it never shows a credential.
    """
    refusal = webhook_transport_refusal(url, header_names, allow_plaintext=allow_plaintext, oauth2=oauth2)
    if refusal is not None:
        raise ConfigError(f"sink 'webhook': {refusal}")


def webhook_transport_refusal(
    url: str, header_names: Iterable[str], *, allow_plaintext: bool, oauth2: bool = False
) -> str | None:
    """Why this URL and these headers (and an OAuth2 token, with ``oauth2``) may not be used
    together, or None when they may."""
    parts = urlsplit(url)
    names = {name.lower() for name in header_names}
    url_credentials = parts.username is not None or parts.password is not None
    if url_credentials and "authorization" in names:
        return "credentials in the URL and an Authorization header in --webhook-headers-file; keep one"
    if oauth2 and "authorization" in names:
        return "--webhook-oauth2-token-url and an Authorization header in --webhook-headers-file; keep one"
    if oauth2 and url_credentials:
        return "--webhook-oauth2-token-url and credentials in the URL; keep one"
    credentials = carries_credentials(url, names, oauth2=oauth2)
    return credentials_refusal(url, credentials=credentials, allow_plaintext=allow_plaintext)


def carries_credentials(url: str, header_names: Iterable[str], *, oauth2: bool = False) -> bool:
    """Whether requests to ``url`` carry credentials: user info, a credential header, a token."""
    parts = urlsplit(url)
    names = {name.lower() for name in header_names}
    return (
        parts.username is not None or parts.password is not None or oauth2 or bool(names & CREDENTIAL_HEADERS)
    )


def credentials_refusal(
    url: str, *, credentials: bool, allow_plaintext: bool, service: str = "webhook"
) -> str | None:
    """The plaintext rule for one ``http(s)://`` URL relayd sends to, credentials or not.

    ``--allow-plaintext`` lets credentials go over ``http://`` too (a mesh sidecar encrypts the
    hop); without it they are refused as Redis's are.
    """
    parts = urlsplit(url)
    refusal = plaintext_refusal(
        [parts.hostname or ""],
        tls=parts.scheme.lower() == "https",
        credentials=credentials and not allow_plaintext,
        allow_plaintext=allow_plaintext,
        service=service,
        secure="https://",
    )
    if refusal is not None and credentials:
        return f"{refusal} (or --allow-plaintext where a service mesh encrypts the hop)"
    return refusal


def plaintext_credentials_host(url: str, *, credentials: bool) -> str | None:
    """The host credentials go to over plaintext (allowed by ``--allow-plaintext``), or None."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not credentials or parts.scheme.lower() == "https" or is_loopback(host):
        return None
    return host
