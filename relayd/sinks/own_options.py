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

Light on purpose: the CLI imports these modules to build its flags, never a client library.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

#: The ``--help`` panels a sink option may be shown in (the CLI's own names for them).
SINKS: Final = "Sinks"
SECURITY: Final = "Credentials and TLS"
#: What the help of a watched secret file says about how it is read (docs/sinks.md, "Secret files").
STRIPPED_WATCHED: Final = "surrounding whitespace stripped; re-read when it changes"

#: Reads an option's file into a watched file (``relayd.security.material``), or only checks it (None):
#: ``reader(option, path, values)``, ``values`` the loaded options by field name.
FileReader = Callable[[str, Path, dict[str, Any]], Any]


def option(
    default: Any,
    help_text: str,
    *,
    panel: str = SINKS,
    reads: FileReader | None = None,
    secret: bool = False,
    constraints: dict[str, float] | None = None,
    **extra: str,
) -> Any:
    """A dataclass field that is an option: its default, its help, and how its file is read.

    ``reads`` makes a file option watched (the file read at start-up and again when it
    changes); ``secret`` keeps what it holds out of every log line; ``constraints`` are
    pydantic's numeric bounds (``gt``, ``ge``, ``le``), checked when the option is loaded.
    ``extra`` is the sink's own metadata (the kafka sink's ``librdkafka`` setting name).
    """
    metadata = {"help": help_text, "panel": panel, "reads": reads, "secret": secret}
    return dataclasses.field(
        default=default, metadata={**extra, **metadata, "constraints": constraints or {}}
    )


def content_of(field_name: str, view: Callable[[Any, dict[str, Any]], Any] | None = None) -> Any:
    """A dataclass field holding what the file of option ``field_name`` holds now (None: not set).

    ``view(watched, values)`` makes what the sink reads of the watched file (the signing keys of
    a secrets file, under the scheme ``values`` names); without it, the watched file itself.
    """
    metadata = {"content_of": field_name, "view": view}
    return dataclasses.field(default=None, repr=False, compare=False, metadata=metadata)


def declared(cls: type) -> Iterator[dataclasses.Field[Any]]:
    """The fields of ``cls`` that are options, in declaration order."""
    return (field for field in dataclasses.fields(cls) if "help" in field.metadata)


def contents(cls: type) -> Iterator[dataclasses.Field[Any]]:
    """The fields of ``cls`` that carry a file's content (``content_of``)."""
    return (field for field in dataclasses.fields(cls) if "content_of" in field.metadata)


def option_name(cls: type, field_name: str) -> str:
    """The option's name: ``kafka_ca_file`` for field ``ca_file`` of prefix ``kafka``."""
    prefix = str(getattr(cls, "prefix", "")).replace("-", "_")
    return f"{prefix}_{field_name}" if prefix else field_name


def flag(cls: type, field_name: str) -> str:
    """The command-line flag: ``--kafka-ca-file``."""
    return "--" + option_name(cls, field_name).replace("_", "-")


def plugin_flag(cls: type, field_name: str) -> str:
    """A plugin's option as the operator sets it, for messages, ``/readyz`` and the metric's label."""
    return f"--sink-option {getattr(cls, 'prefix', '')}.{field_name}"


def envvar(cls: type, field_name: str) -> str:
    """The environment variable: ``RELAYD_KAFKA_CA_FILE``."""
    return "RELAYD_" + option_name(cls, field_name).upper()


def watched(read: Callable[[str, Path], Any]) -> FileReader:
    """A ``FileReader`` of a ``relayd.security.material`` reader (``secret_file``, ``pem_file``, …)."""
    return lambda option, path, _values: read(option, path)


def readable_file(option: str, path: Path, _values: dict[str, Any]) -> None:
    """A file option read by the sink's own client (not watched): it must exist when relayd starts."""
    if not path.is_file():
        raise ValueError(f"{option}: {str(path)!r} is not a readable file")
