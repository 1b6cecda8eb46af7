"""Load a sink's own options (``relayd.sinks.own_options``) from flags and ``RELAYD_*`` variables.

The same precedence as ``Settings``: a flag (a keyword here) wins over the variable, which wins
over the field's default. Each options class gets a pydantic-settings model made from its
fields, so ``RELAYD_KAFKA_CA_FILE`` is read and checked exactly as ``RELAYD_BATCH`` is, and a
bad value is the same one line (``relayd.config.errors``). A file option is then read (and
watched, ``relayd.security.material``) by the reader its field names, and what it holds fills the
class's ``content_of`` field.

A plugin's options come from ``--sink-option NAME.KEY=VALUE`` (repeatable) over
``RELAYD_<NAME>_<KEY>``, checked, read and watched the same way when its sink is resolved.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pydantic import Field, ValidationError, create_model
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from relayd.config.errors import describe_validation_error
from relayd.errors import ConfigError
from relayd.security.material import WatchedFile
from relayd.sinks.own_options import contents, declared, flag, option_name, plugin_flag


@dataclass(frozen=True)
class LoadedOptions:
    """One sink's own options as loaded: the instance, its watched files, which of them are secret."""

    options: Any
    files: tuple[WatchedFile[Any], ...] = ()
    secret_options: frozenset[str] = field(default_factory=frozenset)


class _OwnOptionsBase(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RELAYD_", frozen=True, extra="forbid", case_sensitive=False)


def option_names(cls: type) -> tuple[str, ...]:
    """The option names (``kafka_ca_file``) of ``cls``, as ``Settings`` and the CLI know them."""
    return tuple(option_name(cls, item.name) for item in declared(cls))


def load_own_options(
    cls: type, flags: dict[str, Any], *, named: Callable[[type, str], str] = flag
) -> LoadedOptions:
    """``cls`` from ``flags`` (option name → value) over the environment over its defaults.

    ``named`` says how a file option is named in messages, log lines, the metric and ``/readyz``.

    Raises:
        ConfigError: one line naming the option (a bad value, an unreadable file).
    """
    try:
        model = _model(cls)(**flags)
    except ValidationError as exc:
        field_of = {option_name(cls, item.name): item.name for item in declared(cls)}

        def shown(option: str) -> str:
            return named(cls, field_of.get(option, option))

        raise ConfigError(describe_validation_error(exc, shown=None if named is flag else shown)) from None
    values = {item.name: getattr(model, option_name(cls, item.name)) for item in declared(cls)}
    files: list[WatchedFile[Any]] = []
    secret: set[str] = set()
    read: dict[str, Any] = {}
    for item in declared(cls):
        reader, path = item.metadata["reads"], values[item.name]
        if reader is None or path is None:
            continue
        try:
            watched = reader(named(cls, item.name), path, values)
        except ValueError as exc:
            raise ConfigError(" ".join(str(exc).split())) from None
        if watched is not None:
            files.append(watched)
            read[item.name] = watched
            if item.metadata["secret"]:
                secret.add(watched.option)
    held: dict[str, Any] = {}
    for item in contents(cls):
        source, view = read.get(item.metadata["content_of"]), item.metadata["view"]
        held[item.name] = view(source, values) if view is not None and source is not None else source
    return LoadedOptions(cls(**values, **held), tuple(files), frozenset(secret))


def load_plugin_options(cls: type, items: typing.Iterable[str]) -> LoadedOptions:
    """A plugin's options from its ``--sink-option NAME.KEY=VALUE`` items over ``RELAYD_<NAME>_<KEY>``.

    Loaded as a built-in family's are, its files watched alike; only their names differ
    (``--sink-option NAME.KEY``, the one way to set them on the command line).
    """
    prefix = str(getattr(cls, "prefix", ""))
    known = {item.name for item in declared(cls)}
    flags: dict[str, Any] = {}
    for text in items:
        name, key, value = split_sink_option(text)
        if name != prefix:
            continue
        if key.replace("-", "_") not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise ConfigError(
                f"--sink-option {name}.{key}: sink {name!r} has no option {key!r} (it has: {listed})"
            )
        flags[option_name(cls, key.replace("-", "_"))] = value
    return load_own_options(cls, flags, named=plugin_flag)


def split_sink_option(text: str) -> tuple[str, str, str]:
    """``NAME.KEY=VALUE`` as its three parts.

    Raises:
        ConfigError: the text is not of that form.
    """
    target, sep, value = text.partition("=")
    name, dot, key = target.strip().partition(".")
    if not (sep and dot and name and key):
        raise ConfigError(f"--sink-option needs NAME.KEY=VALUE, got {text[:60]!r}")
    return name, key, value


@cache
def _model(cls: type) -> type[BaseSettings]:
    """A pydantic-settings model of ``cls``'s options: one field per option, named as the option."""
    return settings_model(f"{cls.__name__}Settings", (cls,), _OwnOptionsBase)


def settings_model(name: str, classes: tuple[type, ...], base: type[BaseSettings]) -> type[BaseSettings]:
    """A pydantic-settings model ``name`` on ``base`` with a field per option of ``classes``, in order.

    Each field has the option's type and default, its bounds (``constraints``), and a repeatable
    option is a tuple read from comma-separated text (its validator is the model's own).
    """
    fields: dict[str, Any] = {}
    for cls in classes:
        hints = typing.get_type_hints(cls, include_extras=True)
        for item in declared(cls):
            annotation = hints[item.name]
            bounds = item.metadata["constraints"]
            if bounds:
                annotation = _bounded(annotation, bounds)
            if item.metadata.get("repeatable"):
                annotation = typing.Annotated[annotation, NoDecode]
            fields[option_name(cls, item.name)] = (annotation, item.default)
    return typing.cast("type[BaseSettings]", create_model(name, __base__=base, **fields))


def _bounded(annotation: Any, bounds: dict[str, float]) -> Any:
    """``annotation`` with pydantic's numeric bounds (on the value, not on None when optional)."""
    args = typing.get_args(annotation)
    if type(None) in args:
        (inner,) = (arg for arg in args if arg is not type(None))
        return typing.Annotated[inner, Field(**bounds)] | None  # type: ignore[call-overload]
    return typing.Annotated[annotation, Field(**bounds)]  # type: ignore[call-overload]
