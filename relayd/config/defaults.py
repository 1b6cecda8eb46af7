"""Every core option's default, gathered from the classes that declare them (``relayd.config.core``).

For the tests and the documentation: ``Settings`` and the CLI read the classes themselves.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import fields
from typing import Any, Final

from relayd.config.core import CORE_OPTIONS
from relayd.options import declared, option_name


def _gathered() -> type:
    """A frozen dataclass with a field per core option: its type and default."""
    gathered: list[tuple[str, Any, Any]] = []
    for cls in CORE_OPTIONS:
        hints = typing.get_type_hints(cls)
        for item in declared(cls):
            gathered.append(
                (option_name(cls, item.name), hints[item.name], dataclasses.field(default=item.default))
            )
    return dataclasses.make_dataclass("Defaults", gathered, frozen=True)


#: The defaults of ``relayd.config.settings.Settings``, field by field (None: not set).
Defaults: Final[Any] = _gathered()
DEFAULTS: Final[Any] = Defaults()

#: Every core option's name (``Settings`` declares the same fields; the CLI forwards only these).
OPTION_NAMES: Final = frozenset(field.name for field in fields(Defaults))
