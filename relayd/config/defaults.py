"""Every core option's default: the options still declared here, and those of ``relayd.config.core``.

``Undeclared`` holds the options not yet declared beside the code that reads them (importing
nothing, so ``relayd --help`` reads them without ``Settings``); ``Defaults`` gathers every core
option, declared or not, field by field, for ``Settings`` and the tests.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final, Literal

from relayd.config.core import CORE_OPTIONS
from relayd.options import declared, option_name


@dataclass(frozen=True, slots=True)
class Undeclared:
    """The defaults of the options ``Settings`` declares itself, field by field (None: not set).

    A sink's own options are not here: their defaults are the fields of its options class
    (``relayd.sinks.own_options``); nor are the core options of ``relayd.config.core``.
    """

    redis_url: str = "redis://127.0.0.1:6379/0"
    prefix: tuple[str, ...] = ("stm",)
    # No default sink: relaying into the log by accident acks the backlog (``--sink log`` asks for it).
    sink: str | None = None
    outbox_sink: str | None = None
    spawn_sink: str | None = None
    timer_sink: str | None = None
    # Loopback by default: metrics and health reveal backlog sizes; containers set 0.0.0.0:9464.
    metrics_addr: str = "127.0.0.1:9464"
    log_format: Literal["json", "console"] | None = None  # None: json unless the log stream is a tty
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # A sink call this long past its sink's own timeout is hung: /healthz 503 (relayd.observability.inflight).
    hung_sink_grace: float = 30.0
    redis_username_file: Path | None = None
    redis_password_file: Path | None = None
    sentinel_username_file: Path | None = None
    sentinel_password_file: Path | None = None
    redis_ca_file: Path | None = None
    redis_cert_file: Path | None = None
    redis_key_file: Path | None = None
    allow_plaintext: bool = False
    format: Literal["relayd", "cloudevents"] = "relayd"
    cloudevents_mode: Literal["binary", "structured"] = "binary"
    cloudevents_source: str = "relayd://{prefix}"
    console_addr: str = "127.0.0.1:9465"
    console_token_file: Path | None = None
    allow_actions: bool = False
    console_replay_rate: float = 100.0
    # Where operational events go (relayd.observability.events): any sink spec; None: nowhere.
    events_sink: str | None = None


UNDECLARED: Final = Undeclared()


def _gathered() -> type:
    """A frozen dataclass with a field per core option: its type and default."""
    gathered: list[tuple[str, Any, Any]] = []
    for cls in (*CORE_OPTIONS, Undeclared):
        hints = typing.get_type_hints(cls)
        items = declared(cls) if cls is not Undeclared else fields(cls)
        for item in items:
            name = option_name(cls, item.name) if cls is not Undeclared else item.name
            gathered.append((name, hints[item.name], dataclasses.field(default=item.default)))
    return dataclasses.make_dataclass("Defaults", gathered, frozen=True)


#: The defaults of ``relayd.config.settings.Settings``, field by field (None: not set).
Defaults: Final[Any] = _gathered()
DEFAULTS: Final[Any] = Defaults()

#: Every core option's name (``Settings`` declares the same fields; the CLI forwards only these).
OPTION_NAMES: Final = frozenset(field.name for field in fields(Defaults))
