"""A sink family's package names its sink classes without loading them.

A family's ``__init__`` stays light: the CLI reads the family's options (``options.py``) without
loading the sink or its client library. ``relayd.sinks.kafka.KafkaSink`` (and an entry point
that names it so, as an older install recorded) still resolves: the class is loaded from the
family's ``sink`` module on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def sink_classes(package: str, *names: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that loads ``names`` from ``package.sink``."""

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(f"{package}.sink"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
