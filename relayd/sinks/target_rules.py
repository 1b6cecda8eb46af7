"""The rules every sink family's target parser shares: one home for each.

Pure: no I/O and no client library, so each family's ``target.py`` checks a spec before anything
connects (and without the family's optional extra installed). What is here:

- ``sink_params``: split a target at its first ``?`` into what it names and its parameters,
  refusing an unknown parameter in one line (plugins may use it too; ``relayd.sinks.spec``
  exports it as well).
- ``split_redis_target`` and ``check_redis_form``: a Redis URL target that keeps its own query,
  the parameters the sink takes for itself split off, and its form checked.
- ``timeout_param`` (``timeout_s``, default ``DEFAULT_TIMEOUT_S``), ``seconds_param`` and
  ``positive_int_param``: the numeric parameters.
- ``placeholder_sample``: a routing template with every placeholder filled, to check its fixed text.
- ``check_plaintext``: README.md#security on a sink's connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit

from relayd.config.redis_url import REDIS_SCHEMES as _OWN_REDIS_SCHEMES
from relayd.config.redis_url import plaintext_refusal
from relayd.errors import ConfigError
from relayd.sinks.routing import PLACEHOLDERS
from store import parse_url

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "REDIS_SCHEMES",
    "TIMEOUT_MOST_S",
    "check_plaintext",
    "check_redis_form",
    "placeholder_sample",
    "positive_int_param",
    "seconds_param",
    "sink_params",
    "split_redis_target",
    "timeout_param",
]

#: Destination Redis URL schemes: relayd's own (``relayd.config.redis_url``) and local sockets.
REDIS_SCHEMES: Final = frozenset({*_OWN_REDIS_SCHEMES, "unix"})
#: Seconds a sink waits for its confirmations (or one request) unless the spec says ``timeout_s``.
DEFAULT_TIMEOUT_S: Final = 30.0
#: The most seconds ``timeout_s`` may be unless the family sets its own bound.
TIMEOUT_MOST_S: Final = 3600.0
#: What fills a placeholder in a sampled template: legal in any name, long enough for the
#: shortest name a family accepts.
_SAMPLE_FILL: Final = "xxx"


def url_parts(url: str, malformed: str) -> SplitResult:
    """``urlsplit(url)``, its port checked too (``urlsplit`` checks it only when it is read).

    Raises:
        ConfigError: ``malformed``, with ``{error}`` in it replaced by what is wrong.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - read to be checked
    except ValueError as exc:
        raise ConfigError(malformed.format(error=exc)) from None
    return parts


def sink_params(text: str, sink: str, known: Sequence[str], *, note: str = "") -> tuple[str, dict[str, str]]:
    """Split a sink's target at its first ``?`` into what it names and its parameters.

    The one way every sink reads ``NAME?key=value&…``: a parameter the sink does not know is
    refused with one line listing those it does (``note`` adds a hint to that line).

    Raises:
        ConfigError: an unknown parameter.
    """
    base, _, query = text.partition("?")
    params: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in known:
            hint = f"; {note}" if note else ""
            raise ConfigError(
                f"sink {sink!r}: unknown parameter {key[:40]!r} (known: {', '.join(known)}{hint})"
            )
        params[key] = value
    return base, params


def split_redis_target(
    text: str, sink: str, names: Sequence[str], example: str
) -> tuple[str, dict[str, str]]:
    """Split ``text`` into a Redis URL (keeping its own query) and this sink's parameters ``names``.

    Unlike ``sink_params`` a parameter the sink does not take stays in the URL, for the Redis
    client to read.

    Raises:
        ConfigError: no URL, a scheme that is not Redis's, or a malformed Redis URL.
    """
    if not text:
        raise ConfigError(f"sink {sink!r} needs a URL: {example!r}")
    base, _, query = text.partition("?")
    scheme = base.partition("://")[0].lower()
    if scheme not in REDIS_SCHEMES:
        raise ConfigError(f"sink {sink!r} needs a redis:// or rediss:// URL, got scheme {scheme[:20]!r}")
    check_redis_form(base, sink)
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in names:
            ours[key] = value
        else:
            theirs.append((key, value))
    url = f"{base}?{urlencode(theirs)}" if theirs else base
    return url, ours


def check_redis_form(url: str, sink: str) -> None:
    """Raise ConfigError unless ``url`` is a well-formed Redis URL (a unix socket passes)."""
    if url.partition("://")[0].lower() == "unix":
        return
    try:
        parse_url(url)
    except ValueError as exc:
        raise ConfigError(f"sink {sink!r}: {exc}") from None


def timeout_param(
    params: dict[str, str], sink: str, *, most: float = TIMEOUT_MOST_S, bounds: str | None = None
) -> float:
    """The ``timeout_s`` parameter: seconds, more than 0 and at most ``most``; ``DEFAULT_TIMEOUT_S``
    when absent. ``bounds`` words the range in the refusal (default `` in (0, MOST]``).

    Raises:
        ConfigError: not a number in that range.
    """
    text = params.get("timeout_s")
    if text is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= most:
        shown = f" in (0, {most:g}]" if bounds is None else bounds
        raise ConfigError(f"sink {sink!r}: timeout_s must be a number of seconds{shown}")
    return value


def seconds_param(value: str, sink: str, name: str, most: float) -> float:
    """Parameter ``name``: seconds from 0 to ``most``.

    Raises:
        ConfigError: not a number in that range.
    """
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= most:
        raise ConfigError(f"sink {sink!r}: {name} must be seconds from 0 to {most:g}, got {value[:20]!r}")
    return seconds


def positive_int_param(value: str, sink: str, name: str) -> int:
    """Parameter ``name``: a positive integer written in digits.

    Raises:
        ConfigError: anything else.
    """
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"sink {sink!r}: {name} must be a positive integer, got {value[:20]!r}")
    return int(value)


def placeholder_sample(template: str) -> str:
    """``template`` with every placeholder (``relayd.sinks.routing``) replaced by a legal token,
    to check the template's fixed text against a family's naming rule."""
    for placeholder in PLACEHOLDERS:
        template = template.replace(placeholder, _SAMPLE_FILL)
    return template


def check_plaintext(
    hosts: Sequence[str],
    sink: str,
    *,
    tls: bool,
    credentials: bool,
    allow_plaintext: bool,
    secure: str = "TLS",
) -> None:
    """Enforce README.md#security (``relayd.config.redis_url.plaintext_refusal``) on a sink's connection.

    Raises:
        ConfigError: plaintext with credentials, or to a non-loopback host without permission.
    """
    refusal = plaintext_refusal(
        hosts, tls=tls, credentials=credentials, allow_plaintext=allow_plaintext, service=sink, secure=secure
    )
    if refusal is not None:
        raise ConfigError(f"sink {sink!r}: {refusal}")
