"""Parse a sink spec string (``jsonl:PATH``, ``webhook:URL``, …) into a ``SinkSpec``.

Pure: no I/O, no imports of redis, aiohttp or structlog. The grammar (DESIGN §5):

    log                                             structlog line per envelope
    null                                            delivers and discards (benchmarks)
    jsonl:PATH                                      append JSON lines; ``jsonl:-`` is stdout
    webhook:URL                                     POST each envelope (http or https)
    redis-stream:REDIS_URL?stream=NAME[&maxlen=N]   XADD to a stream; ``{target}`` routes per target
    harel:REDIS_URL[?store=URL&max_connections=N]   publish into harel's own transport
    python:package.module:factory[?k=v&…]           any factory found by dotted path
    <name>[:<rest>]                                 a sink registered under entry points ``relayd.sinks``

Error messages never echo a URL's password: URLs are shown through ``redact_url``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from relayd.errors import ConfigError

_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
_DOTTED: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
REDIS_SCHEMES: Final = frozenset({"redis", "rediss", "unix", "redis+cluster", "rediss+cluster"})
HTTP_SCHEMES: Final = frozenset({"http", "https"})
#: Query parameters the redis-stream sink takes for itself; the rest stay in the Redis URL.
_STREAM_PARAMS: Final = ("stream", "maxlen")
_HAREL_PARAMS: Final = ("store", "max_connections")


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


def redact_url(url: str) -> str:
    """Return ``url`` with the password (if any) replaced by ``***``; other text unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    netloc = f"{user}:***@{host}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


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
        _split_url(params["store"], "harel", "harel:redis://host?store=redis://other")
        if urlsplit(params["store"]).scheme not in REDIS_SCHEMES:
            raise ConfigError("sink 'harel' needs a redis:// or rediss:// store URL")
    if "max_connections" in params:
        _positive_int(params["max_connections"], "harel", "max_connections")
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
    parts = _split_url(rest, sink, example)
    if parts.scheme not in REDIS_SCHEMES:
        raise ConfigError(f"sink {sink!r} needs a redis:// or rediss:// URL, got scheme {parts.scheme!r}")
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in names:
            ours[key] = value
        else:
            theirs.append((key, value))
    split = urlsplit(rest)
    url = urlunsplit((split.scheme, split.netloc, split.path, urlencode(theirs), split.fragment))
    return url, ours


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
}


def check_redis_url(url: str, sink: str, *, allow_plaintext: bool) -> None:
    """Enforce DESIGN §7 on a destination Redis URL.

    ``rediss://`` is always fine (it verifies the server). Plaintext (``redis://``) to a host
    that is not loopback needs ``allow_plaintext``, and is refused outright when the URL
    carries credentials. Unix sockets are local. Cluster URLs are rejected by the caller.

    Raises:
        ConfigError: the URL breaks the policy (its password is never shown).
    """
    parts = urlsplit(url)
    if any(key.lower().startswith("ssl") for key, _ in parse_qsl(parts.query)):
        # verification is not negotiable (DESIGN §7); the CA comes from --redis-ca-file
        raise ConfigError(f"sink {sink!r}: TLS options in the URL are not accepted; use --redis-ca-file")
    if parts.scheme.startswith("rediss") or parts.scheme == "unix":
        return
    host = (parts.hostname or "").lower()
    if _is_loopback(host):
        return
    if parts.password is not None or parts.username:
        raise ConfigError(f"sink {sink!r}: credentials over plaintext to {host!r} are refused; use rediss://")
    if not allow_plaintext:
        raise ConfigError(
            f"sink {sink!r}: plaintext Redis to non-loopback host {host!r} needs --allow-plaintext "
            "(or use rediss://)"
        )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
