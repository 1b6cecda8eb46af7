"""Resolve a sink spec to a ready-to-start ``Sink``: entry points ``relayd.sinks`` plus ``python:``.

One mechanism for every sink. The built-ins (``log``, ``jsonl``, ``webhook``, ``redis-stream``,
``harel``, ``null``) are declared under the entry-point group ``relayd.sinks`` in relayd's own
``pyproject.toml``, exactly as a plugin declares its sink::

    [project.entry-points."relayd.sinks"]
    mysink = "my_package.sink:MySink"

**The factory convention.** An entry point (or a ``python:package.module:factory`` path) names
a class or a callable with the signature ``factory(spec: SinkSpec, options: SinkOptions) -> Sink``.
``spec.target`` is what follows ``<name>:`` in the spec string (plugins parse it themselves),
``options`` carries the options every sink shares (``--format``, ``--allow-plaintext``, …) and,
in ``options.own``, the sink's own: a factory with an ``options_class`` attribute (a dataclass
of ``relayd.sinks.own_options``) gets an instance of it, set from ``--sink-option NAME.KEY=VALUE``
or ``RELAYD_<NAME>_<KEY>`` (the built-in sinks' own options are flags). The factory must
not do I/O: connections are opened in ``Sink.start()``. It raises ``ConfigError`` with one line
when the spec cannot work.

Sinks are resolved once at start-up, so a bad spec stops relayd before anything is read.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import Final, cast

from relayd.errors import ConfigError, UnknownSink
from relayd.sinks.base import Sink, SinkOptions
from relayd.sinks.spec import SinkSpec, parse_sink_spec

#: The entry-point group every sink (built-in or plugin) is registered under.
ENTRY_POINT_GROUP: Final = "relayd.sinks"

SinkFactory = Callable[[SinkSpec, SinkOptions], Sink]


def known_sinks() -> list[str]:
    """Every sink name that resolves: the entry points of ``relayd.sinks`` plus ``python``."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)} | {"python"})


def option_prefixes(specs: Iterable[str]) -> list[str]:
    """The names whose ``RELAYD_<NAME>_<KEY>`` variables a sink may read: every registered sink's,
    and the own-options prefix of each ``python:`` sink among ``specs`` that can be loaded."""
    prefixes = [ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)]
    for spec in specs:
        try:
            parsed = parse_sink_spec(spec)
            factory = _python_factory(parsed) if parsed.scheme == "python" else None
        except ConfigError:
            continue  # resolving the sink says what is wrong with it
        prefix = getattr(getattr(factory, "options_class", None), "prefix", None)
        if isinstance(prefix, str) and prefix:
            prefixes.append(prefix)
    return prefixes


def resolve_sink(spec: str, options: SinkOptions) -> Sink:
    """Parse ``spec``, find its factory and build the sink (not yet started).

    Raises:
        UnknownSink: no entry point and no built-in has that name.
        ConfigError: the spec is malformed, the factory cannot be imported, or it rejected the spec.
    """
    parsed = parse_sink_spec(spec)
    factory = _python_factory(parsed) if parsed.scheme == "python" else _entry_point_factory(parsed.scheme)
    try:
        sink = factory(parsed, _options_for(factory, options))
    except ConfigError:
        raise
    except TypeError as exc:
        # Not a factory of (spec, options): a callable that is no sink (``python:os:getcwd``).
        raise ConfigError(f"sink {spec!r}: {exc}; a sink factory takes (spec, options)") from None
    if not isinstance(sink, Sink):
        raise ConfigError(f"sink {parsed.scheme!r}: its factory returned a {type(sink).__name__}, not a Sink")
    return sink


def _options_for(factory: SinkFactory, options: SinkOptions) -> SinkOptions:
    """The common options plus the factory's own (its ``options_class``), and no one else's."""
    if options.own_for is None:
        return options
    own_class = getattr(factory, "options_class", None)
    own = options.own_for(own_class) if isinstance(own_class, type) else None
    return dataclasses.replace(options, own=own, own_for=None)


def _entry_point_factory(name: str) -> SinkFactory:
    found: list[EntryPoint] = list(entry_points(group=ENTRY_POINT_GROUP, name=name))
    if not found:
        raise UnknownSink(name, known_sinks())
    # two distributions registering one name is an install problem an operator must see
    if len({ep.value for ep in found}) > 1:
        values = ", ".join(sorted(ep.value for ep in found))
        raise ConfigError(f"sink {name!r} is registered more than once ({values}); uninstall one")
    try:
        loaded = found[0].load()
    except Exception as exc:  # any import-time failure of a plugin is a configuration problem
        raise ConfigError(f"sink {name!r} could not be loaded from {found[0].value}: {exc}") from exc
    return _as_factory(loaded, name)


def _python_factory(spec: SinkSpec) -> SinkFactory:
    module_name, _, attr = spec.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"sink 'python:{spec.target}': cannot import {module_name!r} ({exc})") from exc
    try:
        loaded = getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"sink 'python:{spec.target}': {module_name!r} has no {attr!r}") from None
    return _as_factory(loaded, f"python:{spec.target}")


def _as_factory(obj: object, name: str) -> SinkFactory:
    if not callable(obj):
        raise ConfigError(f"sink {name!r} is not a class or callable")
    return cast(SinkFactory, obj)
