"""Whether a webhook's URL and headers may be used: credentials never over plaintext.

The plaintext rule is ``relayd.redis_url.plaintext_refusal`` (the one rule for every
connection relayd opens): ``https://`` always may; ``http://`` to loopback may; ``http://``
elsewhere needs ``--allow-plaintext`` and never carries credentials, whether in the URL's user
info or in a credential header of ``--webhook-headers-file``. URL credentials and an
``Authorization`` header together are refused too: the HTTP client would refuse every request.
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
    parts = urlsplit(url)
    names = {name.lower() for name in header_names}
    url_credentials = parts.username is not None or parts.password is not None
    if url_credentials and "authorization" in names:
        raise ConfigError(
            "sink 'webhook': credentials in the URL and an Authorization header in "
            "--webhook-headers-file; keep one"
        )
    refusal = plaintext_refusal(
        [parts.hostname or ""],
        tls=parts.scheme.lower() == "https",
        credentials=url_credentials or bool(names & CREDENTIAL_HEADERS),
        allow_plaintext=allow_plaintext,
        service="webhook",
        secure="https://",
    )
    if refusal is not None:
        raise ConfigError(f"sink 'webhook': {refusal}")
