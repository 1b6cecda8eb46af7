"""Configure structlog for the relayd process: JSON lines or console output, secrets redacted.

Called by the CLI only (libraries never configure logging). Logs go to stderr so that
``jsonl:-`` can own stdout; the format defaults to JSON lines unless that stream is a terminal.
Redaction runs twice: on every value of the event dict before rendering, and on the rendered
line itself, so a secret cannot leak through an exception text or a nested value.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any, Final, TextIO

import orjson
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from relayd.config.redis_url import redact_url

#: What a redacted value is replaced with.
REDACTED: Final = "***"
#: Longest text a log line carries per value (characters): a longer one keeps its head and tail
#: around a note of how much was cut, so a huge stored value cannot make a huge line.
MAX_VALUE_CHARS: Final = 4096

#: The field names log lines use; listed for documentation and tests.
FIELDS: Final = (
    "prefix",
    "kind",
    "id",
    "seq",
    "target_id",
    "attempt",
    "outcome",
    "error",
    "count",
    "duration_s",
    "sink",
)

_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class Redactor:
    """Replace configured secret values and URL ``user:pass@`` parts with ``***``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first so a secret that contains another is replaced whole.
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def learn(self, secrets: Iterable[str]) -> None:
        """Redact these values too (a secret file was re-read and holds new ones)."""
        self.secrets = sorted({*self.secrets, *(s for s in secrets if s)}, key=len, reverse=True)

    def redact(self, value: str) -> str:
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return redact_url(value)

    def text(self, value: str) -> str:
        # Redacted whole, then cut: a cut first could split a URL's credentials off their "@".
        return truncate(self.redact(value))

    def value(self, value: object) -> object:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bytes):
            return self.text(value.decode("utf-8", "replace"))
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        if isinstance(value, int | float | bool) or value is None:
            return value
        return self.text(str(value))

    def __call__(self, _logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
        return {key: self.value(v) for key, v in event_dict.items()}

    def wrap(self, renderer: Processor) -> Processor:
        """A renderer whose output line is redacted once more, whole."""

        def render(logger: WrappedLogger, name: str, event_dict: EventDict) -> str:
            line = renderer(logger, name, event_dict)
            text = line.decode() if isinstance(line, bytes | bytearray) else str(line)
            return self.redact(text)

        return render


def truncate(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """``text`` if at most ``limit`` characters, else its head and tail around ``…[N chars cut]…``."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}…[{len(text) - 2 * keep} chars cut]…{text[-keep:]}"


def _printable(value: object) -> object:
    """``value`` with every string made encodable (an escaped undecodable byte shown as ``\\udcNN``)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {str(_printable(k)): _printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_printable(v) for v in value]
    return value


def _json_dumps(obj: MutableMapping[str, Any], **_kw: Any) -> str:
    try:
        return orjson.dumps(obj, default=str).decode()
    except TypeError:  # a str holding a lone surrogate (bytes read with surrogateescape)
        return orjson.dumps(_printable(obj), default=str).decode()


#: The redactor of the configured logging, which ``redact_also`` teaches new secrets.
_active: list[Redactor] = []


def redact_also(secrets: Iterable[str]) -> None:
    """Redact these values from now on as well (new material of a rotated secret file)."""
    for redactor in _active:
        redactor.learn(secrets)


def configure_logging(
    *,
    log_format: str | None,
    log_level: str = "info",
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
) -> None:
    """Set structlog (and stdlib logging, for redis-py and friends) up for this process.

    Args:
        log_format: ``json``, ``console``, or None for json unless ``stream`` is a terminal.
        secrets: every configured secret value; each is replaced by ``***`` wherever it appears.
        stream: where lines go; stderr by default.
    """
    out = stream if stream is not None else sys.stderr
    fmt = log_format or ("console" if out.isatty() else "json")
    redactor = Redactor(secrets)
    _active[:] = [redactor]
    level = _LEVELS[log_level]
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Processor
    if fmt == "json":
        shared.append(structlog.processors.format_exc_info)
        renderer = structlog.processors.JSONRenderer(serializer=_json_dumps)
    else:
        # Plain tracebacks: a rich one prints locals, which may hold secrets the redactor never saw.
        renderer = structlog.dev.ConsoleRenderer(
            colors=out.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
    shared.append(redactor)
    structlog.configure(
        processors=[*shared, redactor.wrap(renderer)],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    # Route stdlib logging (redis-py, httpx) through the same chain so it is redacted too.
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                redactor.wrap(renderer),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    # Libraries are noisy at info (httpx logs every request); their warnings still show.
    root.setLevel(max(level, logging.WARNING))
