"""Parse a sink spec string (``jsonl:PATH``, ``webhook:URL``, …) into a ``SinkSpec``.

Pure: no I/O, no imports of redis, aiohttp or structlog. The grammar (docs/sinks.md):

    log                                             structlog line per envelope
    null                                            delivers and discards (benchmarks)
    jsonl:PATH                                      append JSON lines; ``jsonl:-`` is stdout
    webhook:URL                                     POST each envelope (http or https)
    redis-stream:REDIS_URL?stream=NAME[&maxlen=N]   XADD to a stream; ``{target}`` routes per target
    harel:REDIS_URL[?store=URL&definitions=DIR&…]   publish into harel's own transport
    python:package.module:factory[?k=v&…]           any factory found by dotted path
    <name>[:<rest>]                                 a sink registered under entry points ``relayd.sinks``

Error messages never echo a URL's password: URLs are shown through ``redact_url``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import parse_qsl, urlencode, urlsplit

from relayd.config.redis_url import REDIS_SCHEMES as _OWN_REDIS_SCHEMES
from relayd.config.redis_url import check_redis_url, redact_url
from relayd.errors import ConfigError
from store import parse_url

__all__ = ["REDIS_SCHEMES", "SinkSpec", "check_redis_url", "parse_sink_spec", "redact_url", "sink_params"]

_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
_DOTTED: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
#: Destination Redis URL schemes: relayd's own (``relayd.config.redis_url``) and local sockets.
REDIS_SCHEMES: Final = frozenset({*_OWN_REDIS_SCHEMES, "unix"})
HTTP_SCHEMES: Final = frozenset({"http", "https"})
#: Query parameters the redis-stream sink takes for itself; the rest stay in the Redis URL.
_STREAM_PARAMS: Final = ("stream", "maxlen")
_HAREL_PARAMS: Final = (
    "store", "definitions", "handoff_delay", "timer_grace", "timer_hold", "max_connections"
)  # fmt: skip
#: The harel sink's parameters in seconds, and the most each may be.
_HAREL_SECONDS: Final = {"handoff_delay": 600.0, "timer_grace": 600.0, "timer_hold": 3600.0}


@dataclass(frozen=True, slots=True, repr=False)
class SinkSpec:
    """A parsed sink spec.

    ``scheme`` selects the factory (an entry-point name or ``python``); ``target`` is what
    follows the first ``:`` minus the parameters the sink takes for itself (a path, a URL,
    ``package.module:factory``); ``params`` are those parameters. Entry-point plugins get the
    raw rest in ``target`` and parse it themselves.
    """

    scheme: str
    target: str = ""
    params: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        """The spec as an operator wrote it, with any URL password replaced by ``***``."""
        text = self.scheme if not self.target else f"{self.scheme}:{redact_url(self.target)}"
        if self.params:
            shown = "&".join(f"{k}={redact_url(v)}" for k, v in self.params.items())
            text += ("&" if "?" in self.target else "?") + shown
        return text

    def __repr__(self) -> str:
        # a repr lands in tracebacks and logs: it must not carry a password either
        return f"SinkSpec({str(self)!r})"


_Parser = Callable[[str, bool], SinkSpec]


def parse_sink_spec(text: str) -> SinkSpec:
    """Parse ``text`` into a ``SinkSpec``.

    Raises:
        ConfigError: one line saying what is wrong (an URL's password is never shown).
    """
    text = text.strip()
    if not text:
        raise ConfigError("empty sink spec; expected e.g. 'log', 'jsonl:PATH' or 'webhook:URL'")
    scheme, sep, rest = text.partition(":")
    if not _NAME.fullmatch(scheme):
        raise ConfigError(f"sink spec must start with a sink name, got {scheme[:40]!r}")
    parser = _PARSERS.get(scheme)
    if parser is not None:
        return parser(rest, bool(sep))
    return SinkSpec(scheme, rest)


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


def _no_argument(name: str) -> _Parser:
    def parse(rest: str, has_colon: bool) -> SinkSpec:
        if has_colon:
            raise ConfigError(f"sink {name!r} takes no argument (use {name!r} alone)")
        return SinkSpec(name)

    return parse


def _parse_jsonl(rest: str, has_colon: bool) -> SinkSpec:
    if not rest:
        raise ConfigError("sink 'jsonl' needs a path: 'jsonl:PATH' (or 'jsonl:-' for stdout)")
    return SinkSpec("jsonl", rest)


def _parse_webhook(rest: str, has_colon: bool) -> SinkSpec:
    parts = _split_url(rest, "webhook", "webhook:https://host/path")
    if parts.scheme not in HTTP_SCHEMES:
        raise ConfigError(f"sink 'webhook' needs an http:// or https:// URL, got scheme {parts.scheme!r}")
    return SinkSpec("webhook", rest)


def _parse_pubsub(rest: str, has_colon: bool) -> SinkSpec:
    from relayd.sinks.gcp.target import parse_pubsub_target  # pure; it reads its query with sink_params

    parse_pubsub_target(rest)  # a bad topic name stops relayd before anything starts
    return SinkSpec("pubsub", rest)


def _parse_redis_stream(rest: str, has_colon: bool) -> SinkSpec:
    url, params = _take_params(rest, "redis-stream", _STREAM_PARAMS, "redis-stream:redis://host?stream=NAME")
    stream = params.get("stream", "")
    if not stream:
        raise ConfigError("sink 'redis-stream' needs a stream name: 'redis-stream:REDIS_URL?stream=NAME'")
    if "maxlen" in params:
        _positive_int(params["maxlen"], "redis-stream", "maxlen")
    return SinkSpec("redis-stream", url, params)


def _parse_harel(rest: str, has_colon: bool) -> SinkSpec:
    url, params = _take_params(rest, "harel", _HAREL_PARAMS, "harel:redis://host:6379/0")
    if "store" in params:
        if params["store"].partition("://")[0].lower() not in REDIS_SCHEMES:
            raise ConfigError("sink 'harel' needs a redis:// or rediss:// store URL")
        _check_redis_form(params["store"], "harel")
    if "max_connections" in params:
        _positive_int(params["max_connections"], "harel", "max_connections")
    for name, most in _HAREL_SECONDS.items():
        if name in params:
            _seconds(params[name], "harel", name, most)
    if params.get("definitions") == "":
        raise ConfigError("sink 'harel': definitions needs a directory (harel's HAREL_DEFINITIONS_DIR)")
    return SinkSpec("harel", url, params)


def _parse_python(rest: str, has_colon: bool) -> SinkSpec:
    path, _, query = rest.partition("?")
    module, sep, attr = path.partition(":")
    if not (sep and _DOTTED.fullmatch(module) and _DOTTED.fullmatch(attr)):
        raise ConfigError(f"sink 'python' needs 'python:package.module:factory', got {path[:80]!r}")
    return SinkSpec("python", path, dict(parse_qsl(query, keep_blank_values=True)))


def _split_url(url: str, sink: str, example: str) -> _Url:
    if not url:
        raise ConfigError(f"sink {sink!r} needs a URL: {example!r}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - urlsplit validates the port only when it is read
    except ValueError as exc:
        raise ConfigError(f"sink {sink!r}: malformed URL ({exc})") from None
    if not parts.scheme or (not parts.hostname and parts.scheme != "unix"):
        raise ConfigError(f"sink {sink!r}: malformed URL {redact_url(url)!r}; expected e.g. {example!r}")
    return _Url(parts.scheme, parts.hostname or "", parts.query)


def _take_params(rest: str, sink: str, names: tuple[str, ...], example: str) -> tuple[str, dict[str, str]]:
    """Split ``rest`` into a Redis URL (keeping its own query) and this sink's parameters."""
    if not rest:
        raise ConfigError(f"sink {sink!r} needs a URL: {example!r}")
    base, _, query = rest.partition("?")
    scheme = base.partition("://")[0].lower()
    if scheme not in REDIS_SCHEMES:
        raise ConfigError(f"sink {sink!r} needs a redis:// or rediss:// URL, got scheme {scheme[:20]!r}")
    _check_redis_form(base, sink)
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in names:
            ours[key] = value
        else:
            theirs.append((key, value))
    url = f"{base}?{urlencode(theirs)}" if theirs else base
    return url, ours


def _check_redis_form(url: str, sink: str) -> None:
    """Raise ConfigError unless ``url`` is a well-formed Redis URL (a unix socket passes)."""
    if url.partition("://")[0].lower() == "unix":
        return
    try:
        parse_url(url)
    except ValueError as exc:
        raise ConfigError(f"sink {sink!r}: {exc}") from None


def _seconds(value: str, sink: str, name: str, most: float) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= most:
        raise ConfigError(f"sink {sink!r}: {name} must be seconds from 0 to {most:g}, got {value[:20]!r}")
    return seconds


def _positive_int(value: str, sink: str, name: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"sink {sink!r}: {name} must be a positive integer, got {value[:20]!r}")
    return int(value)


@dataclass(frozen=True, slots=True)
class _Url:
    scheme: str
    host: str
    query: str


_PARSERS: Final[dict[str, _Parser]] = {
    "log": _no_argument("log"),
    "null": _no_argument("null"),
    "jsonl": _parse_jsonl,
    "webhook": _parse_webhook,
    "redis-stream": _parse_redis_stream,
    "harel": _parse_harel,
    "python": _parse_python,
    "pubsub": _parse_pubsub,
}
