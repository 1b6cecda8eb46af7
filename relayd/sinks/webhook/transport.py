"""Whether a webhook's URL and headers may be used: credentials never over plaintext.

The plaintext rule is ``relayd.redis_url.plaintext_refusal`` (the one rule for every
connection relayd opens): ``https://`` always may; ``http://`` to loopback may; ``http://``
elsewhere needs ``--allow-plaintext`` and never carries credentials, whether in the URL's user
info or in a credential header of ``--webhook-headers-file``. URL credentials and an
``Authorization`` header together are refused too: the HTTP client would refuse every request.
At start-up a refusal stops relayd (exit 2); a rotated headers file that breaks the rule is
refused batch by batch instead (nothing is sent, every entry is retried) until it is fixed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from relayd.errors import ConfigError
from relayd.redis_url import plaintext_refusal

#: Header names (lower case) whose values are credentials: never sent over plaintext.
CREDENTIAL_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-auth-token"}
)


def check_webhook_transport(url: str, header_names: Iterable[str], *, allow_plaintext: bool) -> None:
    """Refuse a webhook configuration that would leak credentials or fail every request.

    Raises:
        ConfigError: one line naming the rule broken; it never shows a credential.
    """
    refusal = webhook_transport_refusal(url, header_names, allow_plaintext=allow_plaintext)
    if refusal is not None:
        raise ConfigError(f"sink 'webhook': {refusal}")


def webhook_transport_refusal(url: str, header_names: Iterable[str], *, allow_plaintext: bool) -> str | None:
    """Why this URL and these headers may not be used together, or None when they may."""
    parts = urlsplit(url)
    names = {name.lower() for name in header_names}
    url_credentials = parts.username is not None or parts.password is not None
    if url_credentials and "authorization" in names:
        return "credentials in the URL and an Authorization header in --webhook-headers-file; keep one"
    return plaintext_refusal(
        [parts.hostname or ""],
        tls=parts.scheme.lower() == "https",
        credentials=url_credentials or bool(names & CREDENTIAL_HEADERS),
        allow_plaintext=allow_plaintext,
        service="webhook",
        secure="https://",
    )
