"""relayd's optional extras: how a sink imports its client library, and the one line when it cannot.

Every sink that needs an extra (kafka, nats, amqp, aws) imports it through ``import_extra`` when
it is built, so naming a sink whose extra is missing fails at start-up with ``missing_extra``'s
one line, worded once for all of them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from relayd.errors import ConfigError


def install_command(extra: str) -> str:
    """The pip command for ``extra``, from an index and from a source checkout.

    >>> install_command("kafka")
    "pip install 'relayd[kafka]' (from a checkout: pip install '.[kafka]')"
    """
    return f"pip install 'relayd[{extra}]' (from a checkout: pip install '.[{extra}]')"


def missing_extra(sink: str, extra: str, *, needs: str | None = None) -> str:
    """The one line for sink ``sink`` when ``extra`` is not installed (``needs``: what it lacks).

    >>> missing_extra("amqp", "amqp", needs="aiormq")
    "sink 'amqp' needs aiormq: pip install 'relayd[amqp]' (from a checkout: pip install '.[amqp]')"
    """
    return f"sink {sink!r} needs {needs or f'the {extra} extra'}: {install_command(extra)}"


def import_extra(sink: str, extra: str, *modules: str, needs: str | None = None) -> tuple[ModuleType, ...]:
    """Import ``modules`` in order, or raise ``ConfigError`` with ``missing_extra``'s line."""
    try:
        return tuple(importlib.import_module(name) for name in modules)
    except ImportError:
        raise ConfigError(missing_extra(sink, extra, needs=needs)) from None
