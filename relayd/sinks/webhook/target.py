"""Parse and check the ``webhook:URL`` sink target.

Pure: no I/O and no HTTP client import, so a spec is checked before anything connects. The
grammar (docs/sinks.md)::

    webhook:URL                                     POST each envelope (http or https)

The URL is kept whole, its query included: the sink posts to it as written. Whether plaintext
may carry the request's credentials is the sink's check (``relayd.sinks.webhook.transport``),
since it depends on the options.
"""

from __future__ import annotations

from typing import Final

from relayd.config.redis_url import redact_url
from relayd.errors import ConfigError
from relayd.sinks.target_rules import url_parts

EXAMPLE: Final = "webhook:https://host/path"
HTTP_SCHEMES: Final = frozenset({"http", "https"})


def parse_webhook_target(text: str) -> str:
    """Check what follows ``webhook:`` and return it: the URL the sink posts to.

    Raises:
        ConfigError: one line saying what is wrong (an URL's password is never shown).
    """
    scheme = _url_scheme(text)
    if scheme not in HTTP_SCHEMES:
        raise ConfigError(f"sink 'webhook' needs an http:// or https:// URL, got scheme {scheme!r}")
    return text


def _url_scheme(url: str) -> str:
    """The scheme of ``url`` once it is known to be a well-formed URL with a host."""
    if not url:
        raise ConfigError(f"sink 'webhook' needs a URL: {EXAMPLE!r}")
    parts = url_parts(url, "sink 'webhook': malformed URL ({error})")
    if not parts.scheme or (not parts.hostname and parts.scheme != "unix"):
        raise ConfigError(f"sink 'webhook': malformed URL {redact_url(url)!r}; expected e.g. {EXAMPLE!r}")
    return parts.scheme
