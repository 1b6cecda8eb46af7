"""Load and validate relayd's configuration: flags and ``RELAYD_*`` variables → one frozen Settings.

Precedence: command-line flags (passed in as keyword arguments by the CLI) win over the
environment, which wins over the defaults. Nothing else in relayd reads ``os.environ``:
``Settings`` is a pydantic-settings model reading ``RELAYD_<NAME>`` (any letter case), so strings
from the environment become ints, floats, booleans (``true``/``false``, ``1``/``0``, ``yes``/``no``,
``on``/``off``) and paths, checked against each option's range.

Security rules (README.md#security) are checked here, before anything connects:

- credentials come only from files (``--redis-username-file``, ``--redis-password-file``,
  ``--webhook-secret-file``) or from the Redis URL's ``user:pass@``;
- ``rediss://`` always verifies the server certificate; ``--redis-ca-file`` names the CA bundle;
  there is no switch that disables verification;
- credentials over plaintext to a non-loopback host are refused (a webhook's are sent with
  ``--allow-plaintext``, for a service mesh), and plaintext to a non-loopback host at all needs
  ``--allow-plaintext``;
- a missing or unreadable file is a ``ConfigError`` naming the option, never the content.

Each built-in sink's own options (``--webhook-*``, ``--kafka-*``, …) are declared beside the sink
(``relayd.sinks.families``) and loaded by ``relayd.config.sink_settings`` after these; ``Settings`` keeps
them (``own_options``), watches their files and redacts their secrets like its own.

Secret and certificate files are ``relayd.security.material.WatchedFile``s: read and checked here, then
re-read by ``relayd.security.watch`` when they change, so ``redis_credentials``,
``sentinel_credentials`` and the sinks' material always hand out the current values.

Prefixes follow ``relayd.config.prefixes`` (ranges, the cluster's hash-tag rule); an untagged prefix
on a cluster is a ``ConfigError``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Self, TypeVar

from pydantic import PrivateAttr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from relayd.config.connection import RedisOptions
from relayd.config.core import CORE_OPTIONS
from relayd.config.errors import describe_validation_error
from relayd.config.host_port import parse_host_port
from relayd.config.prefixes import expand_prefixes, require_hash_tags
from relayd.config.redis_url import RedisAddress, parse_redis_url, plaintext_refusal
from relayd.config.sink_settings import (
    LoadedOptions,
    load_own_options,
    load_plugin_options,
    option_names,
    settings_model,
    split_sink_option,
)
from relayd.console.options import ConsoleServeOptions
from relayd.engine.options import PacingOptions, SweepOptions, TuningOptions
from relayd.errors import ConfigError
from relayd.observability.options import EventsOptions, LogOptions, ServeOptions
from relayd.options import values_of
from relayd.security.material import WatchedFile, pem_file, secret_file
from relayd.security.secret import Secret
from relayd.sinks import cloudevents
from relayd.sinks.base import SinkOptions
from relayd.sinks.families import BUILT_IN_OPTIONS
from relayd.sinks.options import FormatOptions, SinkChoice


def read_secret_file(option: str, path: Path) -> str:
    """A secret file's value without surrounding whitespace (``relayd.security.secret.strip_secret``)."""
    return secret_file(option, path).value


#: The options whose files hold Redis or Sentinel credentials (plaintext to them is refused).
_CREDENTIAL_FILES: Final = frozenset(
    {"--redis-username-file", "--redis-password-file", "--sentinel-username-file", "--sentinel-password-file"}
)
T = TypeVar("T")

#: What a sweep without a sink is told: nothing is relayed (or acked) until a sink is named.
NO_SINK_HINT: Final = (
    "name one with --sink or RELAYD_SINK (e.g. --sink jsonl:relayd.jsonl, or --sink log to log "
    "every entry and ack it)"
)


class _SettingsBase(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RELAYD_", frozen=True, extra="forbid", case_sensitive=False)


if TYPE_CHECKING:
    # What the type checker sees: an attribute per option, typed as its class declares it (the
    # classes of ``CORE_OPTIONS``; a test checks the two lists agree).
    class _Declared(  # type: ignore[misc]  # slotted dataclasses: only ever a type here
        _SettingsBase,
        RedisOptions,
        SinkChoice,
        TuningOptions,
        PacingOptions,
        LogOptions,
        ServeOptions,
        ConsoleServeOptions,
        FormatOptions,
        EventsOptions,
    ): ...

else:
    #: A field per option of the core classes (``relayd.config.core``): types, defaults, bounds.
    _Declared = settings_model("DeclaredSettings", CORE_OPTIONS, _SettingsBase)


class Settings(_Declared):
    """Every relayd option (docs/configuration.md), validated; ``RELAYD_<NAME>`` for each.

    Build it with ``load_settings`` (flags over the environment over the defaults). Its fields,
    their types, defaults and bounds come from the classes of ``relayd.config.core`` (``options``
    gives each as its class); the credentials and files are read once, here, and kept out of
    ``repr``.
    """

    # Read and checked in _check_and_read (the files' contents and the parsed URL), never shown.
    _address: RedisAddress | None = PrivateAttr(default=None)
    # The watched secret and certificate files by option (relayd.security.material), re-read on change.
    _files: dict[str, WatchedFile[Any]] = PrivateAttr(default_factory=dict)
    # Each sink's own options by class (``relayd.config.sink_settings``), and the options of secret files.
    _own: dict[type, Any] = PrivateAttr(default_factory=dict)
    _secret_options: set[str] = PrivateAttr(default_factory=set)
    _sink_option_items: tuple[str, ...] = PrivateAttr(default=())

    @field_validator("prefix", mode="before")
    @classmethod
    def _split_prefixes(cls, value: object) -> tuple[str, ...]:
        if isinstance(value, str):
            return expand_prefixes([value])
        if isinstance(value, list | tuple):
            return expand_prefixes([str(v) for v in value])
        raise ValueError("expected prefixes")

    @field_validator("log_format", "log_level", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("metrics_addr", "console_addr")
    @classmethod
    def _host_port(cls, value: str) -> str:
        parse_host_port(value)
        return value

    @field_validator("cloudevents_source")
    @classmethod
    def _source_template(cls, value: str) -> str:
        return cloudevents.check_source_template(value)

    @field_validator("sink", "outbox_sink", "spawn_sink", "timer_sink")
    @classmethod
    def _non_empty_sink(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("a sink spec cannot be empty")
        return value

    @model_validator(mode="after")
    def _check_and_read(self) -> Self:
        """The security rules (README.md#security) across options, and every credential and file read once."""
        self._set("_address", self._check_redis())
        return self

    def _watch(self, watched: WatchedFile[Any]) -> None:
        self._files[watched.option] = watched

    def _current(self, option: str) -> Any:
        watched = self._files.get(option)
        return watched.value if watched is not None else None

    def watched_files(self) -> tuple[WatchedFile[Any], ...]:
        """Every secret and certificate file relayd re-reads when it changes."""
        return tuple(self._files.values())

    def watched(self, option: str) -> WatchedFile[Any] | None:
        """The watched file of ``option`` (``--redis-ca-file``, …), or None when it is not set."""
        return self._files.get(option)

    def _set(self, name: str, value: object) -> None:
        setattr(self, name, value)  # a private attribute: settable though the model is frozen

    def _check_redis(self) -> RedisAddress:
        """The Redis URL, TLS files and credentials under the security rules (README.md#security)."""
        address = parse_redis_url(self.redis_url)
        tls_files = {
            "--redis-ca-file": self.redis_ca_file,
            "--redis-cert-file": self.redis_cert_file,
            "--redis-key-file": self.redis_key_file,
        }
        if (self.redis_cert_file is None) != (self.redis_key_file is None):
            raise ValueError("--redis-cert-file and --redis-key-file go together (mutual TLS)")
        if not address.tls and (self.redis_ca_file or self.redis_cert_file):
            raise ValueError(f"TLS files are set but {address.display!r} is plaintext; use rediss://")
        for option, path in tls_files.items():
            if path is not None:
                self._watch(pem_file(option, path))
        if self.redis_username_file is not None:
            self._watch(secret_file("--redis-username-file", self.redis_username_file))
        if self.redis_password_file is not None:
            self._watch(secret_file("--redis-password-file", self.redis_password_file))
        self._read_sentinel_credentials(address)
        refusal = plaintext_refusal(
            (host for host, _ in address.nodes),
            tls=address.tls,
            credentials=bool(address.username or address.password or self._files.keys() & _CREDENTIAL_FILES),
            allow_plaintext=self.allow_plaintext,
        )
        if refusal is not None:
            raise ValueError(refusal)
        if address.cluster:
            require_hash_tags(self.prefix)
        return address

    def _read_sentinel_credentials(self, address: RedisAddress) -> None:
        files = {
            "--sentinel-username-file": self.sentinel_username_file,
            "--sentinel-password-file": self.sentinel_password_file,
        }
        given = [option for option, path in files.items() if path is not None]
        if given and not address.sentinel:
            raise ValueError(f"{given[0]} is for a redis+sentinel:// URL, not {address.display!r}")
        if self.sentinel_username_file is not None:
            self._watch(secret_file("--sentinel-username-file", self.sentinel_username_file))
        if self.sentinel_password_file is not None:
            self._watch(secret_file("--sentinel-password-file", self.sentinel_password_file))

    def add_own_options(self, loaded: LoadedOptions) -> None:
        """Keep a sink's own options (``relayd.config.sink_settings``): its files watched, its secrets
        redacted."""
        self._own[type(loaded.options)] = loaded.options
        for watched in loaded.files:
            self._watch(watched)
        self._secret_options.update(loaded.secret_options)

    def own_options(self, cls: type) -> Any:
        """The own options of the sink whose ``options_class`` is ``cls``.

        A built-in family's were loaded with these Settings; a plugin's are loaded now from
        ``--sink-option`` and ``RELAYD_<NAME>_<KEY>``, its files watched as the built-ins' are.
        """
        if cls not in self._own:
            self.add_own_options(load_plugin_options(cls, self._sink_option_items))
        return self._own[cls]

    @property
    def redis(self) -> RedisAddress:
        """The parsed Redis URL (credentials from the URL only; see ``redis_credentials``)."""
        address = self._address
        assert address is not None  # set by _check_and_read, which every Settings runs
        return address

    @property
    def redis_credentials(self) -> tuple[str | None, Secret | None]:
        """The current (username, password), the files taking precedence over the URL."""
        address = self.redis
        username = self._current("--redis-username-file") or address.username
        password = self._current("--redis-password-file")
        return username, Secret(password) if password is not None else address.password

    @property
    def sentinel_credentials(self) -> tuple[str | None, Secret | None]:
        """The current (username, password) for the sentinels themselves, from their own files."""
        password = self._current("--sentinel-password-file")
        return self._current("--sentinel-username-file"), Secret(password) if password is not None else None

    @property
    def metrics_host_port(self) -> tuple[str, int]:
        return parse_host_port(self.metrics_addr)

    @property
    def console_host_port(self) -> tuple[str, int]:
        return parse_host_port(self.console_addr)

    def secrets(self) -> tuple[str, ...]:
        """Every secret value configured, for the log redaction processor."""
        password = self.redis.password
        shown = [password.get_secret_value()] if password is not None else []
        watched = ("--redis-password-file", "--sentinel-password-file", *sorted(self._secret_options))
        for option in watched:
            shown.extend(_secret_texts(self._current(option)))
        return tuple(value for value in shown if value)

    def sink_specs(self) -> dict[str, str]:
        """The sink spec per kind, ``--sink`` filling in the kinds not set on their own.

        Raises:
            ConfigError: a kind has no sink (there is no default one: see ``NO_SINK_HINT``).
        """
        specs = {
            "spawn": self.spawn_sink or self.sink,
            "outbox": self.outbox_sink or self.sink,
            "timer": self.timer_sink or self.sink,
        }
        missing = [kind for kind, spec in specs.items() if spec is None]
        if missing:
            raise ConfigError(f"no sink for {', '.join(missing)} entries: {NO_SINK_HINT}")
        return {kind: spec for kind, spec in specs.items() if spec is not None}

    def options(self, cls: type[T]) -> T:
        """The options of core class ``cls`` (``relayd.config.core``) as set: ``TuningOptions``, …"""
        return values_of(cls, self)

    def sweep_options(self, *, once: bool = False) -> SweepOptions:
        tuning, pacing = self.options(TuningOptions), self.options(PacingOptions)
        return SweepOptions.of(tuning, pacing, prefixes=self.prefix, once=once)

    def sink_options(self) -> SinkOptions:
        """The options every sink shares; each sink's own come through ``own_options``."""
        sentinel_username, sentinel_password = self.sentinel_credentials
        return SinkOptions(
            output_format=self.format,
            cloudevents_mode=self.cloudevents_mode,
            cloudevents_source=self.cloudevents_source,
            redis_ca_file=_path_text(self.redis_ca_file),
            allow_plaintext=self.allow_plaintext,
            sentinel_username=sentinel_username,
            sentinel_password=_reveal(sentinel_password),
            own_for=self.own_options,
        )


def _secret_texts(value: object) -> list[str]:
    """The secret strings a secret file holds: its text, its lines, or its headers' values."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple):
        return [item if isinstance(item, str) else item[1] for item in value]
    return []


def _reveal(secret: Secret | None) -> str | None:
    return secret.get_secret_value() if secret is not None else None


def _path_text(path: Path | None) -> str | None:
    return str(path) if path is not None else None


def load_settings(**flags: Any) -> Settings:
    """Build Settings from explicit flags over the environment; errors become one-line ConfigError.

    The built-in sinks' own options (``relayd.sinks.families``) are loaded after the rest, each
    from its own flags; ``sink_option`` (``--sink-option NAME.KEY=VALUE``) is kept for plugins.
    """
    unknown = sorted(set(flags) - ALL_OPTION_NAMES)
    if unknown:
        raise ConfigError(f"unknown option {unknown[0]!r}")
    items = tuple(flags.pop("sink_option", None) or ())
    for text in items:
        split_sink_option(text)
    own = {
        cls: {name: flags.pop(name) for name in option_names(cls) if name in flags}
        for cls in BUILT_IN_OPTIONS
    }
    try:
        settings = Settings(**flags)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc)) from None
    settings._set("_sink_option_items", items)
    for cls, own_flags in own.items():
        settings.add_own_options(load_own_options(cls, own_flags))
    return settings


#: Every option ``load_settings`` takes: Settings' own, each built-in sink's, and ``sink_option``.
ALL_OPTION_NAMES: Final = (
    {name for cls in CORE_OPTIONS for name in option_names(cls)}
    | {name for cls in BUILT_IN_OPTIONS for name in option_names(cls)}
    | {"sink_option"}
)
