"""Golden: what the command line shows and reads, recorded, so a change of how options are declared
changes nothing an operator sees.

Three recordings under ``golden/``:

- ``help/<command path>.txt``: the ``--help`` of every command and subcommand (the Typer/Click
  tree walked), at a fixed width, without colour;
- ``options.json``: every parameter of every command: its flags, variable, default, type and
  what ``--help`` shows as its default;
- ``environment.json``: what each ``RELAYD_*`` variable, set alone (with what it needs) to a valid
  value that is not its default, makes of ``Settings``, the engine's options and each built-in
  sink's own options; and what click reads from every command's variables.

``GOLDEN_RECORD=1`` writes the files from what the CLI does now instead of comparing (refused
under ``CI``).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import typer.main
import typer.rich_utils
from support import golden
from typer.testing import CliRunner

from relayd.cli.app import app
from relayd.config.settings import Settings, load_settings
from relayd.sinks.families import BUILT_IN_OPTIONS
from relayd.sinks.own_options import declared, envvar

GOLDEN: Final = Path(__file__).with_name("golden")
#: A fixed terminal: width, and no colour (CliRunner's output is no terminal either).
TERMINAL: Final = {"COLUMNS": "100", "TERMINAL_WIDTH": "100", "NO_COLOR": "1"}
#: Where the files a variable names are written (shown so in the recordings).
FILES: Final = "<files>"

PEM: Final = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def check(name: str, text: str) -> None:
    """Compare ``text`` with ``golden/<name>``; with ``GOLDEN_RECORD=1``, write it instead."""
    golden.compare(GOLDEN / name, text, shown=f"golden/{name}", what=f"golden/{name}")


def _commands() -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command of the tree, the root first, each group before its subcommands."""

    def walk(path: tuple[str, ...], command: Any) -> Iterator[tuple[tuple[str, ...], Any]]:
        yield path, command
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk((*path, name), sub)

    yield from walk((), typer.main.get_command(app))


COMMAND_PATHS: Final = [path for path, _ in _commands()]


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it, stably (a path under the test's directory as ``<files>``)."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list | set | frozenset):
        items = [_plain(item) for item in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    return repr(value)


def _dump(document: Any, tmp_path: Path | None = None) -> str:
    text = json.dumps(_plain(document), indent=2, sort_keys=True) + "\n"
    return text.replace(str(tmp_path), FILES) if tmp_path is not None else text


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=lambda path: " ".join(("relayd", *path)))
def test_the_help_of_every_command_is_as_recorded(
    path: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Typer reads the width and whether to colour once, when it first renders help: fixed here.
    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", int(TERMINAL["TERMINAL_WIDTH"]))
    monkeypatch.setattr(typer.rich_utils, "FORCE_TERMINAL", False)
    monkeypatch.setattr(typer.rich_utils, "COLOR_SYSTEM", None)
    result = CliRunner().invoke(app, [*path, "--help"], env=TERMINAL)

    assert result.exit_code == 0, result.output
    check(f"help/{'-'.join(('relayd', *path))}.txt", result.stdout)


def _parameter(param: Any) -> dict[str, Any]:
    return {
        "kind": type(param).__name__,
        "name": param.name,
        "opts": list(param.opts),
        "secondary_opts": list(param.secondary_opts),
        "envvar": param.envvar,
        "default": _plain(param.default),
        "show_default": _plain(getattr(param, "show_default", None)),
        "type": repr(param.type_descriptor.annotation),
        "min": getattr(param, "min", None),
        "max": getattr(param, "max", None),
        "multiple": param.multiple,
        "is_flag": getattr(param, "is_flag", None),
        "required": param.required,
        "hidden": getattr(param, "hidden", None),
        "help": getattr(param, "help", None),
        "panel": getattr(param, "rich_help_panel", None),
        "metavar": param.metavar,
    }


def test_every_option_of_every_command_is_as_recorded() -> None:
    document = {
        " ".join(("relayd", *path)): [_parameter(param) for param in command.params]
        for path, command in _commands()
    }

    check("options.json", _dump(document))


#: A valid value that is not the default, for each ``Settings`` option's variable, and what it
#: needs beside it (a TLS file needs rediss://, a sentinel's file redis+sentinel://). ``{files}``
#: is the directory of the files the test writes.
SETTINGS_VALUES: Final[dict[str, dict[str, str]]] = {
    "RELAYD_REDIS_URL": {"RELAYD_REDIS_URL": "redis://127.0.0.1:6380/2"},
    "RELAYD_PREFIX": {"RELAYD_PREFIX": "tenant, {shard-0..2}"},
    "RELAYD_SINK": {"RELAYD_SINK": "log"},
    "RELAYD_OUTBOX_SINK": {"RELAYD_OUTBOX_SINK": "jsonl:outbox.jsonl"},
    "RELAYD_SPAWN_SINK": {"RELAYD_SPAWN_SINK": "log"},
    "RELAYD_TIMER_SINK": {"RELAYD_TIMER_SINK": "null"},
    "RELAYD_BATCH": {"RELAYD_BATCH": "7"},
    "RELAYD_POLL_INTERVAL": {"RELAYD_POLL_INTERVAL": "0.25"},
    "RELAYD_MAX_ATTEMPTS": {"RELAYD_MAX_ATTEMPTS": "3"},
    "RELAYD_RETRY_BASE": {"RELAYD_RETRY_BASE": "0.75"},
    "RELAYD_RETRY_CAP": {"RELAYD_RETRY_CAP": "90"},
    "RELAYD_METRICS_ADDR": {"RELAYD_METRICS_ADDR": "0.0.0.0:9000"},
    "RELAYD_LEASE_TTL": {"RELAYD_LEASE_TTL": "2.5"},
    "RELAYD_LINGER": {"RELAYD_LINGER": "0.002"},
    "RELAYD_WAKE": {"RELAYD_WAKE": "false"},
    "RELAYD_LOG_FORMAT": {"RELAYD_LOG_FORMAT": "Console"},
    "RELAYD_LOG_LEVEL": {"RELAYD_LOG_LEVEL": "DEBUG"},
    "RELAYD_SHUTDOWN_GRACE": {"RELAYD_SHUTDOWN_GRACE": "3"},
    "RELAYD_HUNG_SINK_GRACE": {"RELAYD_HUNG_SINK_GRACE": "12.5"},
    "RELAYD_REDIS_USERNAME_FILE": {"RELAYD_REDIS_USERNAME_FILE": "{files}/username"},
    "RELAYD_REDIS_PASSWORD_FILE": {"RELAYD_REDIS_PASSWORD_FILE": "{files}/password"},
    "RELAYD_SENTINEL_USERNAME_FILE": {
        "RELAYD_SENTINEL_USERNAME_FILE": "{files}/username",
        "RELAYD_REDIS_URL": "redis+sentinel://127.0.0.1:26379/main/0",
    },
    "RELAYD_SENTINEL_PASSWORD_FILE": {
        "RELAYD_SENTINEL_PASSWORD_FILE": "{files}/password",
        "RELAYD_REDIS_URL": "redis+sentinel://127.0.0.1:26379/main/0",
    },
    "RELAYD_REDIS_CA_FILE": {
        "RELAYD_REDIS_CA_FILE": "{files}/ca.pem",
        "RELAYD_REDIS_URL": "rediss://localhost/0",
    },
    "RELAYD_REDIS_CERT_FILE": {
        "RELAYD_REDIS_CERT_FILE": "{files}/cert.pem",
        "RELAYD_REDIS_KEY_FILE": "{files}/key.pem",
        "RELAYD_REDIS_URL": "rediss://localhost/0",
    },
    "RELAYD_REDIS_KEY_FILE": {
        "RELAYD_REDIS_KEY_FILE": "{files}/key.pem",
        "RELAYD_REDIS_CERT_FILE": "{files}/cert.pem",
        "RELAYD_REDIS_URL": "rediss://localhost/0",
    },
    "RELAYD_ALLOW_PLAINTEXT": {"RELAYD_ALLOW_PLAINTEXT": "yes"},
    "RELAYD_FORMAT": {"RELAYD_FORMAT": "cloudevents"},
    "RELAYD_CLOUDEVENTS_MODE": {"RELAYD_CLOUDEVENTS_MODE": "structured"},
    "RELAYD_CLOUDEVENTS_SOURCE": {"RELAYD_CLOUDEVENTS_SOURCE": "urn:relay:{prefix}"},
    "RELAYD_CONSOLE_ADDR": {"RELAYD_CONSOLE_ADDR": "127.0.0.1:9999"},
    "RELAYD_CONSOLE_TOKEN_FILE": {"RELAYD_CONSOLE_TOKEN_FILE": "{files}/token"},
    "RELAYD_ALLOW_ACTIONS": {"RELAYD_ALLOW_ACTIONS": "1"},
    "RELAYD_CONSOLE_REPLAY_RATE": {"RELAYD_CONSOLE_REPLAY_RATE": "5"},
    "RELAYD_BREAKER_THRESHOLD": {"RELAYD_BREAKER_THRESHOLD": "0"},
    "RELAYD_BREAKER_COOLDOWN_CAP": {"RELAYD_BREAKER_COOLDOWN_CAP": "30"},
    "RELAYD_SINK_RATE": {"RELAYD_SINK_RATE": "250"},
    "RELAYD_SINK_RATE_SCOPE": {"RELAYD_SINK_RATE_SCOPE": "cluster"},
    "RELAYD_SINK_RATE_FALLBACK": {"RELAYD_SINK_RATE_FALLBACK": "hold"},
    "RELAYD_EVENTS_SINK": {"RELAYD_EVENTS_SINK": "log"},
}


def _own_value(hint: Any, default: Any) -> str | None:
    """A valid value other than ``default`` for a sink's own option of type ``hint`` (None: a file)."""
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    plain = args[0] if len(args) == 1 else hint
    if typing.get_origin(plain) is typing.Literal:
        return str(next(arg for arg in typing.get_args(plain) if arg != default))
    samples: dict[Any, str | None] = {
        Path: None,
        bool: "false" if default else "true",
        int: str((default or 0) + 1),
        float: str((default or 1.0) + 1.5),
    }
    return samples.get(plain, "https://example.test/value")


def _own_values() -> dict[str, dict[str, str]]:
    values = {}
    for cls in BUILT_IN_OPTIONS:
        hints = typing.get_type_hints(cls)
        for field in declared(cls):
            value = _own_value(hints[field.name], field.default)
            if value is not None:
                values[envvar(cls, field.name)] = {envvar(cls, field.name): value}
    return values


def _loaded(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What ``load_settings`` makes of ``env``: every field of Settings, of the engine's options
    and of each built-in sink's own options."""
    with monkeypatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        settings = load_settings()
        return {
            "settings": {name: getattr(settings, name) for name in Settings.model_fields},
            "sweep_options": settings.sweep_options(),
            "own_options": {
                cls.__name__: {
                    field.name: getattr(settings.own_options(cls), field.name) for field in declared(cls)
                }
                for cls in BUILT_IN_OPTIONS
            },
        }


def _changed(loaded: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The values of ``loaded`` that differ from ``defaults``, part by part."""
    now, before = _plain(loaded), _plain(defaults)
    changed: dict[str, Any] = {}
    for part in now:
        if part == "own_options":
            differ = {
                cls: {k: v for k, v in own.items() if v != before[part][cls][k]}
                for cls, own in now[part].items()
            }
            differ = {cls: own for cls, own in differ.items() if own}
        else:
            differ = {k: v for k, v in now[part].items() if v != before[part][k]}
        if differ:
            changed[part] = differ
    return changed


def _write_files(directory: Path) -> None:
    for name in ("username", "password", "token"):
        (directory / name).write_text(f"{name}-value\n")
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (directory / name).write_text(PEM)


def test_every_variable_loads_into_the_recorded_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ``RELAYD_*`` variable that ``Settings`` or a built-in sink reads, set to a value that is
    not its default: what changes of the settings, the engine's options and the sinks' own."""
    _write_files(tmp_path)
    defaults = _loaded({}, monkeypatch)
    scenarios = {**SETTINGS_VALUES, **_own_values()}
    document = {
        variable: _changed(
            _loaded(
                {name: value.replace("{files}", str(tmp_path)) for name, value in env.items()}, monkeypatch
            ),
            defaults,
        )
        for variable, env in scenarios.items()
    }
    variables = {f"RELAYD_{name.upper()}" for name in Settings.model_fields}

    assert variables <= set(SETTINGS_VALUES), sorted(variables - set(SETTINGS_VALUES))
    assert all(document.values())
    check("environment.json", _dump({"defaults": defaults, "set": document}, tmp_path))


def _sample(param: Any) -> str:
    """A value for the variable of ``param`` by its type (a number inside every range relayd sets,
    the last of its choices)."""
    annotation = param.type_descriptor.annotation
    if getattr(param, "is_flag", False) or annotation is bool:
        return "true"
    if typing.get_origin(annotation) is typing.Literal:
        return str(typing.get_args(annotation)[-1])
    return {int: "4000", float: "12.5", Path: "/srv/relayd/file"}.get(annotation, "sample-value")


def test_every_command_reads_its_variables_as_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """What click makes of each variable of each command, set alone (a conversion's error as
    None): the type every variable is read as."""
    document: dict[str, dict[str, Any]] = {}
    for path, command in _commands():
        read: dict[str, Any] = {}
        for param in command.params:
            if not param.envvar:
                continue
            with monkeypatch.context() as patch:
                patch.setenv(param.envvar, _sample(param))
                ctx = command.make_context(" ".join(("relayd", *path)), [], resilient_parsing=True)
                read[param.envvar] = ctx.params.get(param.name)
        if read:
            document[" ".join(("relayd", *path))] = read

    check("variables.json", _dump(document))
