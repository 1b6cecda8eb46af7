"""The core options' classes (``relayd.options``), each declared beside the code that reads it.

``Settings`` has a field per option of these classes, in this order; the CLI builds their
flags from the same classes, and ``relayd.config.defaults`` gathers their defaults. A new
option is a field in one of them; a new class of options is one line here. Only the small
declaring modules are imported.
"""

from __future__ import annotations

from typing import Final

from relayd.config.connection import RedisOptions
from relayd.console.options import ConsoleServeOptions
from relayd.engine.options import PacingOptions, TuningOptions
from relayd.observability.options import EventsOptions, LogOptions, ServeOptions
from relayd.sinks.options import FormatOptions, SinkChoice

#: The core options' classes, in the order ``Settings`` declares their fields.
CORE_OPTIONS: Final[tuple[type, ...]] = (
    RedisOptions,
    SinkChoice,
    TuningOptions,
    PacingOptions,
    LogOptions,
    ServeOptions,
    ConsoleServeOptions,
    FormatOptions,
    EventsOptions,
)
