"""How an option is declared: a field of a frozen dataclass beside the code that reads it.

Every option of relayd, core or a sink's own, is one field made by ``option`` in a dataclass
with a class attribute ``prefix`` (none for the core options): field ``ca_file`` of prefix
``kafka`` is the flag ``--kafka-ca-file`` and the variable ``RELAYD_KAFKA_CA_FILE``; field
``batch`` of a core class is ``--batch`` and ``RELAYD_BATCH``. From the field come the flag,
the variable, its ``--help`` text and panel, what ``--help`` shows as its default, and its
pydantic field (type, default and bounds) in ``relayd.config.settings.Settings`` or in a sink's
own model (``relayd.config.sink_settings``).

A class with a class attribute ``env_prefix`` instead holds a command's own options, read by
the command itself rather than by ``Settings``: field ``backlog`` of env_prefix ``bench`` is the
flag ``--backlog`` and the variable ``RELAYD_BENCH_BACKLOG`` (``relayd.bench.options``).

The core options' classes are listed in ``relayd.config.core``, the built-in sinks' in
``relayd.sinks.families``; a command takes them with ``relayd.cli.options``. Light on purpose:
the CLI imports the declaring modules to build its flags, never what reads them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, TypeVar

#: The ``--help`` panels an option may be shown in, in the order a command shows them (after its
#: arguments and its own options): where it connects first, then the rest.
REDIS: Final = "Redis"
CONSOLE: Final = "Console"
SINKS: Final = "Sinks"
TUNING: Final = "Tuning"
OBSERVE: Final = "Logs and metrics"
SECURITY: Final = "Credentials and TLS"
PANELS: Final = (REDIS, CONSOLE, SINKS, TUNING, OBSERVE, SECURITY)
#: What the help of a watched secret file says about how it is read (docs/sinks.md, "Secret files").
STRIPPED_WATCHED: Final = "surrounding whitespace stripped; re-read when it changes"

T = TypeVar("T")

#: Reads an option's file into a watched file (``relayd.security.material``), or only checks it (None):
#: ``reader(option, path, values)``, ``values`` the loaded options by field name.
FileReader = Callable[[str, Path, dict[str, Any]], Any]


def option(
    default: Any,
    help_text: str,
    *,
    panel: str | None = SINKS,
    flag: str | None = None,
    reads: FileReader | None = None,
    secret: bool = False,
    constraints: dict[str, float] | None = None,
    shown: str | None = None,
    negatable: bool = False,
    repeatable: bool = False,
    **extra: str,
) -> Any:
    """A dataclass field that is an option: its default, its help, and how its file is read.

    ``reads`` makes a file option watched (the file read at start-up and again when it
    changes); ``secret`` keeps what it holds out of every log line; ``constraints`` are
    pydantic's numeric bounds (``gt``, ``ge``, ``le``), checked when the option is loaded
    (a command's own, read ``direct``: a click range, ``ge`` and ``le`` only).
    ``shown`` is what ``--help`` shows as the default when it is not the default's text;
    ``negatable`` makes a switch ``--name/--no-name``; ``repeatable`` makes a tuple of text
    given once per flag (comma-separated in the variable). ``extra`` is a sink's own metadata
    (the kafka sink's ``librdkafka`` setting name).

    ``panel`` None shows the option among the command's own (its "Options" panel); ``flag`` is
    its flag when not made from the field's name (``--json`` for field ``as_json``), and its
    variable follows the flag.
    """
    metadata = {
        "help": help_text,
        "panel": panel,
        "flag": flag,
        "reads": reads,
        "secret": secret,
        "shown": shown,
        "negatable": negatable,
        "repeatable": repeatable,
    }
    return dataclasses.field(
        default=default, metadata={**extra, **metadata, "constraints": constraints or {}}
    )


def declared(cls: type) -> Iterator[dataclasses.Field[Any]]:
    """The fields of ``cls`` that are options, in declaration order."""
    return (field for field in dataclasses.fields(cls) if "help" in field.metadata)


def option_name(cls: type, field_name: str) -> str:
    """The option's name: ``kafka_ca_file`` for field ``ca_file`` of prefix ``kafka``."""
    prefix = vars(cls).get("prefix")  # a core class has none (its field ``prefix`` is ``--prefix``)
    prefix = prefix.replace("-", "_") if isinstance(prefix, str) else ""
    return f"{prefix}_{field_name}" if prefix else field_name


def option_names(cls: type) -> tuple[str, ...]:
    """The option names (``kafka_ca_file``) of ``cls``, as ``Settings`` and the CLI know them."""
    return tuple(option_name(cls, item.name) for item in declared(cls))


def flag(cls: type, field_name: str) -> str:
    """The command-line flag: ``--kafka-ca-file``, or the field's own ``flag``."""
    named = next(
        (item.metadata.get("flag") for item in dataclasses.fields(cls) if item.name == field_name), None
    )
    return named if isinstance(named, str) else "--" + option_name(cls, field_name).replace("_", "-")


def envvar(cls: type, field_name: str) -> str:
    """The environment variable, named after the flag: ``RELAYD_KAFKA_CA_FILE``;
    ``RELAYD_BENCH_BACKLOG`` for ``--backlog`` of a class whose ``env_prefix`` is ``bench``."""
    env_prefix = vars(cls).get("env_prefix")
    under = f"{env_prefix.replace('-', '_').upper()}_" if isinstance(env_prefix, str) else ""
    return f"RELAYD_{under}" + flag(cls, field_name).removeprefix("--").replace("-", "_").upper()


def shown_default(field: dataclasses.Field[Any]) -> str | bool:
    """What ``--help`` shows as the default of ``field`` (False: nothing, the option is unset)."""
    if field.metadata.get("shown") is not None:
        return str(field.metadata["shown"])
    default = field.default
    if isinstance(default, tuple):
        return ",".join(default) if default else False
    return str(default) if default not in (None, False) else False


def defaults(classes: tuple[type, ...]) -> dict[str, Any]:
    """Every option of ``classes`` by name, with its default."""
    return {option_name(cls, item.name): item.default for cls in classes for item in declared(cls)}


def values_of(cls: type[T], values: object) -> T:
    """An instance of ``cls`` from ``values``, which has an attribute per option name (``Settings``)."""
    return cls(**{item.name: getattr(values, option_name(cls, item.name)) for item in declared(cls)})
