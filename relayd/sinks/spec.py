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

This module splits off the sink's name and parses the forms without a package of their own
(the no-argument sinks, ``jsonl`` and ``python``). A family with a package owns its target's
grammar in ``relayd.sinks.<family>.target``; the families checked here (``webhook``,
``redis-stream``, ``harel``, ``pubsub``) have theirs imported when a spec names them, so this
module loads no sink's code and no client library. The other families (``kafka``, ``nats``,
``amqp``, the AWS ones) parse their target in their factory, with the options it depends on.
The rules the target parsers share are ``relayd.sinks.target_rules``'s.

Error messages never echo a URL's password: URLs are shown through ``redact_url``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import parse_qsl

from relayd.config.redis_url import check_redis_url, redact_url
from relayd.errors import ConfigError
from relayd.sinks.target_rules import REDIS_SCHEMES, sink_params

__all__ = ["REDIS_SCHEMES", "SinkSpec", "check_redis_url", "parse_sink_spec", "redact_url", "sink_params"]

_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
_DOTTED: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


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
    from relayd.sinks.webhook.target import parse_webhook_target

    return SinkSpec("webhook", parse_webhook_target(rest))


def _parse_redis_stream(rest: str, has_colon: bool) -> SinkSpec:
    from relayd.sinks.redis_stream.target import parse_redis_stream_target

    url, params = parse_redis_stream_target(rest)
    return SinkSpec("redis-stream", url, params)


def _parse_harel(rest: str, has_colon: bool) -> SinkSpec:
    from relayd.sinks.harel.target import parse_harel_target

    url, params = parse_harel_target(rest)
    return SinkSpec("harel", url, params)


def _parse_pubsub(rest: str, has_colon: bool) -> SinkSpec:
    from relayd.sinks.gcp.target import parse_pubsub_target

    parse_pubsub_target(rest)  # a bad topic name stops relayd before anything starts
    return SinkSpec("pubsub", rest)


def _parse_python(rest: str, has_colon: bool) -> SinkSpec:
    path, _, query = rest.partition("?")
    module, sep, attr = path.partition(":")
    if not (sep and _DOTTED.fullmatch(module) and _DOTTED.fullmatch(attr)):
        raise ConfigError(f"sink 'python' needs 'python:package.module:factory', got {path[:80]!r}")
    return SinkSpec("python", path, dict(parse_qsl(query, keep_blank_values=True)))


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
