"""How a sink declares its own options: a dataclass beside it, from which flags and variables are built.

A sink family (``relayd/sinks/kafka/options.py``) or a plugin declares one frozen dataclass with
a class attribute ``prefix`` and fields made by ``option``: field ``ca_file`` of prefix
``kafka`` is the flag ``--kafka-ca-file`` and the variable ``RELAYD_KAFKA_CA_FILE``, with the
field's default, help text and ``--help`` panel. A field made by ``content_of`` is no option:
it carries what the file of another field holds now (a ``relayd.security.material.Material`` re-read
when the file changes), filled in when the configuration is loaded; tests give it directly.

The sink names the class as its ``options_class`` and reads it with
``SinkOptions.own_options(cls)``: a sink gets the common options and its own, nothing of
another sink's. The built-in families are listed in ``relayd.sinks.families``; their options
are command-line flags. A plugin's are set with ``--sink-option NAME.KEY=VALUE`` or
``RELAYD_<NAME>_<KEY>`` (docs/sinks.md).

An option is declared as every option of relayd is (``relayd.options``, re-exported here); what
is a sink's own is ``content_of`` and the names of a plugin's options. Light on purpose: the CLI
imports these modules to build its flags, never a client library.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# How any option is declared and named (``relayd.options``), as a sink's options module uses it.
from relayd.options import (
    SECURITY,
    SINKS,
    STRIPPED_WATCHED,
    FileReader,
    declared,
    envvar,
    flag,
    option,
    option_name,
)

__all__ = [
    "SECURITY",
    "SINKS",
    "STRIPPED_WATCHED",
    "FileReader",
    "content_of",
    "contents",
    "declared",
    "envvar",
    "flag",
    "option",
    "option_name",
    "plugin_flag",
    "readable_file",
    "watched",
]


def content_of(field_name: str, view: Callable[[Any, dict[str, Any]], Any] | None = None) -> Any:
    """A dataclass field holding what the file of option ``field_name`` holds now (None: not set).

    ``view(watched, values)`` makes what the sink reads of the watched file (the signing keys of
    a secrets file, under the scheme ``values`` names); without it, the watched file itself.
    """
    metadata = {"content_of": field_name, "view": view}
    return dataclasses.field(default=None, repr=False, compare=False, metadata=metadata)


def contents(cls: type) -> Iterator[dataclasses.Field[Any]]:
    """The fields of ``cls`` that carry a file's content (``content_of``)."""
    return (field for field in dataclasses.fields(cls) if "content_of" in field.metadata)


def plugin_flag(cls: type, field_name: str) -> str:
    """A plugin's option as the operator sets it, for messages, ``/readyz`` and the metric's label."""
    return f"--sink-option {getattr(cls, 'prefix', '')}.{field_name}"


def watched(read: Callable[[str, Path], Any]) -> FileReader:
    """A ``FileReader`` of a ``relayd.security.material`` reader (``secret_file``, ``pem_file``, …)."""
    return lambda option, path, _values: read(option, path)


def readable_file(option: str, path: Path, _values: dict[str, Any]) -> None:
    """A file option read by the sink's own client (not watched): it must exist when relayd starts."""
    if not path.is_file():
        raise ValueError(f"{option}: {str(path)!r} is not a readable file")
