"""The command-line options shared by relayd's commands, each with its ``RELAYD_<NAME>`` variable.

Every option defaults to None here: an option given on the command line is passed to
``Settings`` as a keyword (so it wins), everything else comes from the environment or the
Settings default, read by ``Settings`` alone. Click (under Typer) also reads the variable (that
is what ``show_envvar`` documents and what type-checks it early), but only command-line values
are forwarded; ``settings_from`` is the one place that decides.

Each option is a Typer parameter (``Annotated[type, typer.Option(...)]`` with the
``rich_help_panel`` it is shown in) that a command takes by a decorator: ``@o.SINK`` above the
command declares ``sink`` in the signature Typer reads, so the command's own parameters stay
its own and it takes the shared ones as ``**_``. Each parameter is built from the option's
declaration (``relayd.options``): ``@o.with_options(TuningOptions)`` declares every option of the
class; ``with_connection_options`` adds those of every command that connects to Redis.

A command's own options (a class with an ``env_prefix``: ``relayd bench``'s) never reach
``Settings``: declared ``direct``, each flag has its default, its bounds as a click range and
its type from the field's annotation (a ``Literal`` a choice), and ``options_from`` makes the
instance the command reads.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable
from dataclasses import Field, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

import typer

from relayd import options as declaring
from relayd.config.connection import RedisOptions
from relayd.config.core import CORE_OPTIONS
from relayd.console.options import ConsoleServeOptions
from relayd.observability.options import LogOptions
from relayd.sinks.families import BUILT_IN_OPTIONS

if TYPE_CHECKING:
    from relayd.config.settings import Settings

REDIS = declaring.REDIS
SINKS = declaring.SINKS
TUNING = declaring.TUNING
OBSERVE = declaring.OBSERVE
SECURITY = declaring.SECURITY
CONSOLE = declaring.CONSOLE

#: The panels of a command's help after its arguments and own options (and --help), in this
#: order: where it connects first, then the rest; a panel with nothing of the command in it is
#: not shown.
PANELS = declaring.PANELS

_F = TypeVar("_F", bound=Callable[..., Any])
_T = TypeVar("_T")

#: The value type of an option by the annotation of its field (``X | None`` as ``X``); any other
#: field (text, choices) is read as text and checked by ``Settings``.
_VALUE_TYPES: Final[dict[str, type]] = {"int": int, "float": float, "Path": Path, "bool": bool}


def _value_type(field: Field[Any]) -> Any:
    """The value type of the option of ``field``: its annotation as written, read as text (the
    declaring modules defer them), since evaluating them (``typing.get_type_hints``) would add
    to every command's start."""
    written = field.type.__name__ if isinstance(field.type, type) else str(field.type)
    return _VALUE_TYPES.get(written.removesuffix(" | None"), str)


#: Where ``declare`` keeps the options already declared on a command.
_DECLARED: Final = "__relayd_options__"


@dataclass(frozen=True)
class SharedOption:
    """One option several commands take: a decorator declaring it as a Typer parameter."""

    name: str
    annotation: Any  # Annotated[value type, typer.Option(...)]
    default: Any
    panel: str | None  # None: the command's own "Options" panel

    def __call__(self, command: _F) -> _F:
        return declare(command, (self,))


def declare(command: _F, options: Iterable[SharedOption]) -> _F:
    """Add ``options`` to the signature Typer reads from ``command``, grouped in ``PANELS`` order.

    The command's own parameters come first (its arguments and the "Options" panel); the shared
    ones follow as keyword parameters, panel by panel (those of no panel first, in "Options"),
    in the order they were declared. Stacked decorators run bottom-up, so each one's options go
    before those declared already.
    """
    shared: tuple[SharedOption, ...] = (*options, *getattr(command, _DECLARED, ()))
    names = {option.name for option in shared}
    # eval_str: the module's annotations are text (``from __future__ import annotations``) and
    # Typer reads a given ``__signature__`` as it is.
    own = [
        parameter
        for parameter in inspect.signature(command, eval_str=True).parameters.values()
        if parameter.name not in names and parameter.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    declared = [
        inspect.Parameter(
            option.name, inspect.Parameter.KEYWORD_ONLY, default=option.default, annotation=option.annotation
        )
        for option in sorted(shared, key=lambda option: _panel_order(option.panel))
    ]
    command.__signature__ = inspect.Signature([*own, *declared])  # type: ignore[attr-defined]
    setattr(command, _DECLARED, shared)
    return command


def _panel_order(panel: str | None) -> int:
    return -1 if panel is None else PANELS.index(panel)


SINK_OPTION = SharedOption(
    "sink_option",
    Annotated[
        list[str] | None,
        typer.Option(
            "--sink-option",
            metavar="NAME.KEY=VALUE",
            help="An option of a plugin sink NAME (repeatable; or RELAYD_<NAME>_<KEY>).",
            rich_help_panel=SINKS,
        ),
    ],
    None,
    SINKS,
)


def declared_option(cls: type, field: Field[Any]) -> SharedOption:
    """The flag of one option of an options class (``relayd.options``): a core class's or a sink's."""
    name, panel = declaring.option_name(cls, field.name), field.metadata["panel"]
    flag = declaring.flag(cls, field.name)
    if field.metadata.get("negatable"):
        flag = f"{flag}/--no-{flag.removeprefix('--')}"
    declaration = typer.Option(
        flag,
        envvar=declaring.envvar(cls, field.name),
        show_envvar=True,
        show_default=declaring.shown_default(field),
        help=field.metadata["help"],
        rich_help_panel=panel,
    )
    value_type: Any = _value_type(field)
    if value_type is bool and field.metadata.get("negatable"):  # unset unless given, either way
        return SharedOption(name, Annotated[bool | None, declaration], None, panel)
    if value_type is bool:  # a switch: off unless given (its variable: true/false, 1/0, ...)
        return SharedOption(name, Annotated[bool, declaration], False, panel)
    if field.metadata.get("repeatable"):
        return SharedOption(name, Annotated[list[value_type] | None, declaration], None, panel)
    return SharedOption(name, Annotated[value_type | None, declaration], None, panel)


def direct_option(cls: type, field: Field[Any], value_type: Any) -> SharedOption:
    """The flag of an option the command reads itself (``options_from``), not through ``Settings``:
    its default is the field's, shown as click shows it; its bounds a click range."""
    name, panel = declaring.option_name(cls, field.name), field.metadata["panel"]
    flag = declaring.flag(cls, field.name)
    if field.metadata.get("negatable"):
        flag = f"{flag}/--no-{flag.removeprefix('--')}"
    constraints: dict[str, float] = field.metadata["constraints"]
    if set(constraints) - {"ge", "le"}:
        raise TypeError(f"{flag}: a click range has only inclusive bounds (ge, le): {constraints}")
    shown = field.metadata.get("shown")
    declaration = typer.Option(
        flag,
        envvar=declaring.envvar(cls, field.name),
        show_envvar=True,
        show_default=True if shown is None else shown,
        help=field.metadata["help"],
        rich_help_panel=panel,
        min=constraints.get("ge"),
        max=constraints.get("le"),
    )
    return SharedOption(name, Annotated[value_type, declaration], field.default, panel)


def declared_options(cls: type, *, direct: bool = False) -> tuple[SharedOption, ...]:
    """A flag per option of ``cls``, in declaration order (``direct``: see ``direct_option``)."""
    if direct:  # the types the command's values have: the annotations, evaluated
        hints = typing.get_type_hints(cls)
        return tuple(direct_option(cls, field, hints[field.name]) for field in declaring.declared(cls))
    return tuple(declared_option(cls, field) for field in declaring.declared(cls))


def with_options(*classes: type, direct: bool = False) -> Callable[[_F], _F]:
    """Declare every option of ``classes`` (``relayd.config.core``) on a command; ``direct`` for
    a command's own options, read with ``options_from`` (``direct_option``)."""
    shared = tuple(option for cls in classes for option in declared_options(cls, direct=direct))
    return lambda command: declare(command, shared)


def options_from(cls: type[_T], ctx: typer.Context) -> _T:
    """The options of ``cls`` (declared ``direct``) as the command was given them, on the command
    line or by their variables; the class's defaults for the others."""
    given = {
        field.name: ctx.params[name]
        for field in declaring.declared(cls)
        if _given(ctx, name := declaring.option_name(cls, field.name))
    }
    return cls(**given)


def option_of(cls: type, name: str) -> SharedOption:
    """The flag of option ``name`` of ``cls``, for a command that takes it alone."""
    (field,) = (field for field in declaring.declared(cls) if field.name == name)
    return declared_option(cls, field)


#: The options a command takes alone (the others come by class, ``with_options``).
PREFIX = option_of(RedisOptions, "prefix")
LOG_LEVEL = option_of(LogOptions, "log_level")
CONSOLE_ADDR = option_of(ConsoleServeOptions, "console_addr")


def _own_options() -> tuple[SharedOption, ...]:
    """A flag per option of every built-in sink family (``relayd.sinks.families``), in order."""
    return tuple(option for cls in BUILT_IN_OPTIONS for option in declared_options(cls))


#: The flags of the built-in sinks' own options: ``relayd sweep`` takes them all.
SINK_OWN_OPTIONS: Final = _own_options()
#: Every option name a command may forward to ``load_settings``.
ALL_OPTION_NAMES: Final = (
    {name for cls in CORE_OPTIONS for name in declaring.option_names(cls)}
    | {option.name for option in SINK_OWN_OPTIONS}
    | {SINK_OPTION.name}
)


def with_sink_own_options(command: _F) -> _F:
    """Declare every built-in sink's own options (``SINK_OWN_OPTIONS``) on ``command``."""
    return declare(command, SINK_OWN_OPTIONS)


#: What every command that connects to Redis takes: where, how to log, which credentials and TLS.
CONNECTION_OPTIONS: Final = (*declared_options(RedisOptions), *declared_options(LogOptions))


def with_connection_options(command: _F) -> _F:
    """Declare ``CONNECTION_OPTIONS`` on ``command`` (shown in ``PANELS`` order, Redis first).

    The command reads them through ``settings_from(ctx)``; its callback takes them as ``**_``.
    """
    return declare(command, CONNECTION_OPTIONS)


def settings_from(ctx: typer.Context) -> Settings:
    """Settings from the options typed on the command line over the environment and defaults."""
    from relayd.config.settings import load_settings

    flags = {
        name: value for name, value in ctx.params.items() if name in ALL_OPTION_NAMES and _typed(ctx, name)
    }
    settings = load_settings(**flags)
    check_environment(ctx, settings)
    return settings


def check_environment(ctx: typer.Context, settings: Settings) -> None:
    """Refuse a ``RELAYD_*`` variable no command, option or sink reads (``relayd.config.environment``).

    Raises:
        ConfigError: one line naming the variable and the closest known one.
    """
    import os

    from relayd.config.environment import unknown_variable_error
    from relayd.errors import ConfigError

    known = _command_variables(ctx.find_root().command)
    known |= {
        declaring.envvar(cls, item.name)
        for cls in (*CORE_OPTIONS, *BUILT_IN_OPTIONS)
        for item in declaring.declared(cls)
    }

    def plugin_prefixes() -> list[str]:
        from relayd.sinks.registry import option_prefixes

        specs = (settings.sink, settings.outbox_sink, settings.spawn_sink, settings.timer_sink)
        return option_prefixes(spec for spec in specs if spec is not None)

    error = unknown_variable_error(os.environ, known, plugin_prefixes)
    if error is not None:
        raise ConfigError(error)


def _command_variables(command: Any) -> set[str]:
    """The variables the options of ``command`` and all its subcommands read (click's ``envvar``)."""
    names: set[str] = set()
    for parameter in getattr(command, "params", ()):
        envvar = getattr(parameter, "envvar", None)
        names.update([envvar] if isinstance(envvar, str) else envvar or ())
    for sub in getattr(command, "commands", {}).values():
        names |= _command_variables(sub)
    return names


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given, on the command line or by its variable (not defaulted)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name != "DEFAULT"


def _typed(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (not by its variable or default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def configure_logs(settings: Settings) -> None:
    """Set logging up for a command from its Settings (every secret redacted)."""
    from relayd.observability.logs import configure_logging

    configure_logging(
        log_format=settings.log_format, log_level=settings.log_level, secrets=settings.secrets()
    )
