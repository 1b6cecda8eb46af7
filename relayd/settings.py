"""Load and validate relayd's configuration: flags and ``RELAYD_*`` variables → one frozen Settings.

Precedence: command-line flags (passed in as keyword arguments by the CLI) win over the
environment, which wins over the defaults. Nothing else in relayd reads ``os.environ``.

Security rules (DESIGN §7) are checked here, before anything connects:

- credentials come only from files (``--redis-username-file``, ``--redis-password-file``,
  ``--webhook-secret-file``) or from the Redis URL's ``user:pass@``;
- ``rediss://`` always verifies the server certificate; ``--redis-ca-file`` names the CA bundle;
  there is no switch that disables verification;
- credentials over plaintext to a non-loopback host are refused, and plaintext to a
  non-loopback host at all needs ``--allow-plaintext``;
- a missing or unreadable file is a ``ConfigError`` naming the option, never the content.

Prefixes: ``--prefix`` is repeatable; ``RELAYD_PREFIX`` is comma-separated. A compact range
form expands inside a hash tag: ``{shard-0..31}`` is the 32 prefixes ``{shard-0}`` …
``{shard-31}`` (Redis Cluster deployments that shard one engine over many slots). On a
cluster (``redis+cluster://``) every prefix must carry a hash tag, so all of its keys share one
slot; an untagged prefix is a ``ConfigError``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, PrivateAttr, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from relayd.engine.options import SweepOptions
from relayd.errors import ConfigError
from relayd.sinks.base import SinkOptions
from relayd.sinks.http_policy import parse_header_lines
from store.keys import Keyspace

#: URL schemes relayd accepts for its own Redis, mapped to (tls, cluster).
REDIS_SCHEMES: Final = {
    "redis": (False, False),
    "rediss": (True, False),
    "redis+cluster": (False, True),
    "rediss+cluster": (True, True),
}

#: Most prefixes one range form may expand to (a typo like ``0..99999`` is an error, not a hang).
MAX_PREFIX_RANGE: Final = 1024

# "{shard-0..31}": a numeric range inside one hash tag, with fixed text around it.
_RANGE = re.compile(
    r"^(?P<head>[^{}]*)\{(?P<lead>[^{}]*?)(?P<lo>\d+)\.\.(?P<hi>\d+)(?P<tail>[^{}]*)\}(?P<rest>.*)$"
)
_URL_CREDENTIALS = re.compile(r"//[^/@\s]*@")


@dataclass(frozen=True, slots=True)
class RedisAddress:
    """A parsed, validated Redis URL. ``password`` never appears in ``repr`` or ``display``."""

    tls: bool
    cluster: bool
    host: str
    port: int
    db: int
    username: str | None
    password: SecretStr | None
    display: str  # the URL with any credentials replaced by ``***``, safe for logs and errors

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def redact_url(url: str) -> str:
    """Replace the ``user:pass@`` part of a URL with ``***@``."""
    return _URL_CREDENTIALS.sub("//***@", url)


def parse_redis_url(url: str) -> RedisAddress:
    """Parse ``redis[s][+cluster]://[user[:pass]@]host[:port][/db]``.

    Raises:
        ValueError: with a message that never contains the password.
    """
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        port = parts.port or 6379
    except ValueError:
        raise ValueError(f"malformed Redis URL {shown!r}") from None
    if parts.scheme not in REDIS_SCHEMES:
        schemes = ", ".join(f"{s}://" for s in REDIS_SCHEMES)
        raise ValueError(f"Redis URL {shown!r} must start with one of {schemes}")
    if not parts.hostname:
        raise ValueError(f"Redis URL {shown!r} has no host")
    tls, cluster = REDIS_SCHEMES[parts.scheme]
    path = parts.path.strip("/")
    if path and not path.isdigit():
        raise ValueError(f"Redis URL {shown!r}: database must be a number, got {path!r}")
    db = int(path) if path else 0
    if cluster and db != 0:
        raise ValueError(f"Redis URL {shown!r}: a cluster has only database 0")
    if parts.query or parts.fragment:
        raise ValueError(f"Redis URL {shown!r}: query options are not supported; use the flags")
    return RedisAddress(
        tls=tls,
        cluster=cluster,
        host=parts.hostname,
        port=port,
        db=db,
        username=unquote(parts.username) if parts.username else None,
        password=SecretStr(unquote(parts.password)) if parts.password else None,
        display=shown,
    )


def expand_prefixes(values: list[str]) -> tuple[str, ...]:
    """Split comma lists, expand ``{name-0..31}`` ranges, drop duplicates keeping order."""
    out: list[str] = []
    for value in values:
        for item in (v.strip() for v in value.split(",")):
            if not item:
                continue
            match = _RANGE.match(item)
            if match is None:
                expanded = [item]
            else:
                lo, hi = int(match["lo"]), int(match["hi"])
                if hi < lo or hi - lo + 1 > MAX_PREFIX_RANGE:
                    raise ValueError(f"prefix range {item!r} must be lo..hi with at most {MAX_PREFIX_RANGE}")
                expanded = [
                    f"{match['head']}{{{match['lead']}{n}{match['tail']}}}{match['rest']}"
                    for n in range(lo, hi + 1)
                ]
            for prefix in expanded:
                Keyspace(prefix)  # raises ValueError on an empty or whitespace-bearing prefix
                if prefix not in out:
                    out.append(prefix)
    if not out:
        raise ValueError("at least one prefix is required")
    return tuple(out)


def parse_host_port(addr: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (``[::1]:9464`` for IPv6); port 0 asks the OS for a free one."""
    host, sep, port_text = addr.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"expected HOST:PORT, got {addr!r}")
    return host, int(port_text)


def read_secret_file(option: str, path: Path) -> str:
    """Return a file's content without its trailing newline (how Kubernetes mounts Secrets)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ValueError(f"{option}: cannot read {str(path)!r}: {reason}") from None
    value = text.rstrip("\r\n")
    if not value:
        raise ValueError(f"{option}: {str(path)!r} is empty")
    return value


def read_headers_file(option: str, path: Path) -> tuple[tuple[str, str], ...]:
    """The extra headers in a mounted file (``relayd.sinks.http_policy.parse_header_lines``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ValueError(f"{option}: cannot read {str(path)!r}: {reason}") from None
    try:
        return parse_header_lines(text)
    except ValueError as exc:
        raise ValueError(f"{option}: {str(path)!r} {exc}") from None


def _check_readable(option: str, path: Path | None) -> None:
    if path is not None and not path.is_file():
        raise ValueError(f"{option}: {str(path)!r} is not a readable file")


def _require_hash_tags(prefixes: tuple[str, ...]) -> None:
    """On a cluster every key of a prefix must hash to one slot: the scripts touch several at once."""
    untagged = [prefix for prefix in prefixes if not Keyspace(prefix).has_hash_tag]
    if untagged:
        raise ValueError(
            f"on Redis Cluster every prefix needs a hash tag such as '{{shard-7}}x', so all its keys "
            f"share one slot; {untagged[0]!r} has none"
        )


class Settings(BaseSettings):
    """Every relayd option (DESIGN §5, §7), validated; ``RELAYD_<NAME>`` for each."""

    model_config = SettingsConfigDict(env_prefix="RELAYD_", frozen=True, extra="forbid", case_sensitive=False)

    redis_url: str = "redis://127.0.0.1:6379/0"
    prefix: Annotated[tuple[str, ...], NoDecode] = ("stm",)
    sink: str = "log"
    outbox_sink: str | None = None
    spawn_sink: str | None = None
    timer_sink: str | None = None
    batch: int = Field(1000, ge=1, le=100_000)
    poll_interval: float = Field(1.0, gt=0, le=3600)
    max_attempts: int = Field(10, ge=1)
    # Retry delays grow from retry_base to retry_cap (seconds, jittered): a minute at most by
    # default, so a sink that comes back is drained within a minute rather than five.
    retry_base: float = Field(0.5, gt=0, le=3600)
    retry_cap: float = Field(60.0, gt=0, le=86400)
    # Loopback by default: metrics and health reveal backlog sizes; containers set 0.0.0.0:9464.
    metrics_addr: str = "127.0.0.1:9464"
    lease_ttl: float = Field(5.0, ge=0.3, le=3600)
    # Use keyspace notifications when the server publishes them (relayd never turns them on).
    wake: bool = True
    log_format: Literal["json", "console"] | None = None  # None: json unless the log stream is a tty
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    shutdown_grace: float = Field(10.0, ge=0, le=3600)
    redis_username_file: Path | None = None
    redis_password_file: Path | None = None
    redis_ca_file: Path | None = None
    redis_cert_file: Path | None = None
    redis_key_file: Path | None = None
    allow_plaintext: bool = False
    webhook_secret_file: Path | None = None
    webhook_timeout: float = Field(10.0, gt=0, le=600)
    webhook_concurrency: int = Field(16, ge=1, le=10_000)
    webhook_connect_timeout: float | None = Field(None, gt=0, le=600)
    webhook_read_timeout: float | None = Field(None, gt=0, le=600)
    webhook_headers_file: Path | None = None
    webhook_gzip: bool = False
    webhook_ca_file: Path | None = None
    kafka_username_file: Path | None = None
    kafka_password_file: Path | None = None
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "SCRAM-SHA-512"
    kafka_ca_file: Path | None = None
    nats_creds_file: Path | None = None
    nats_token_file: Path | None = None
    nats_ca_file: Path | None = None

    _address: RedisAddress = PrivateAttr()
    _redis_username: str | None = PrivateAttr(default=None)
    _redis_password: SecretStr | None = PrivateAttr(default=None)
    _webhook_secret: SecretStr | None = PrivateAttr(default=None)
    _webhook_headers: tuple[tuple[str, str], ...] = PrivateAttr(default=())
    _kafka_username: str | None = PrivateAttr(default=None)
    _kafka_password: SecretStr | None = PrivateAttr(default=None)
    _nats_token: SecretStr | None = PrivateAttr(default=None)

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

    @field_validator("metrics_addr")
    @classmethod
    def _host_port(cls, value: str) -> str:
        parse_host_port(value)
        return value

    @field_validator("sink", "outbox_sink", "spawn_sink", "timer_sink")
    @classmethod
    def _non_empty_sink(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("a sink spec cannot be empty")
        return value

    @model_validator(mode="after")
    def _security(self) -> Settings:
        address = parse_redis_url(self.redis_url)
        _check_readable("--redis-ca-file", self.redis_ca_file)
        _check_readable("--redis-cert-file", self.redis_cert_file)
        _check_readable("--redis-key-file", self.redis_key_file)
        if (self.redis_cert_file is None) != (self.redis_key_file is None):
            raise ValueError("--redis-cert-file and --redis-key-file go together (mutual TLS)")
        if not address.tls and (self.redis_ca_file or self.redis_cert_file):
            raise ValueError(f"TLS files are set but {address.display!r} is plaintext; use rediss://")
        username = address.username
        password = address.password
        if self.redis_username_file is not None:
            username = read_secret_file("--redis-username-file", self.redis_username_file)
        if self.redis_password_file is not None:
            password = SecretStr(read_secret_file("--redis-password-file", self.redis_password_file))
        if not address.tls and not address.loopback:
            if username or password:
                raise ValueError(
                    f"refusing to send Redis credentials in plaintext to {address.host!r}; use rediss://"
                )
            if not self.allow_plaintext:
                raise ValueError(
                    f"plaintext Redis to non-loopback host {address.host!r} needs --allow-plaintext "
                    "(or use rediss://)"
                )
        if address.cluster:
            _require_hash_tags(self.prefix)
        if self.webhook_secret_file is not None:
            self._webhook_secret = SecretStr(
                read_secret_file("--webhook-secret-file", self.webhook_secret_file)
            )
        _check_readable("--webhook-ca-file", self.webhook_ca_file)
        if self.webhook_headers_file is not None:
            self._webhook_headers = read_headers_file("--webhook-headers-file", self.webhook_headers_file)
        self._address = address
        self._redis_username = username
        self._redis_password = password
        return self

    @model_validator(mode="after")
    def _broker_secrets(self) -> Settings:
        """The kafka and nats sinks' credential and CA files (read here, as every secret is)."""
        _check_readable("--kafka-ca-file", self.kafka_ca_file)
        _check_readable("--nats-ca-file", self.nats_ca_file)
        _check_readable("--nats-creds-file", self.nats_creds_file)
        if self.kafka_username_file is not None:
            self._kafka_username = read_secret_file("--kafka-username-file", self.kafka_username_file)
        if self.kafka_password_file is not None:
            password = read_secret_file("--kafka-password-file", self.kafka_password_file)
            self._kafka_password = SecretStr(password)
        if self.nats_token_file is not None:
            self._nats_token = SecretStr(read_secret_file("--nats-token-file", self.nats_token_file))
        return self

    @property
    def redis(self) -> RedisAddress:
        """The parsed Redis URL (credentials from the URL only; see ``redis_credentials``)."""
        return self._address

    @property
    def redis_credentials(self) -> tuple[str | None, SecretStr | None]:
        """(username, password) with the files taking precedence over the URL."""
        return self._redis_username, self._redis_password

    @property
    def metrics_host_port(self) -> tuple[str, int]:
        return parse_host_port(self.metrics_addr)

    def secrets(self) -> tuple[str, ...]:
        """Every secret value configured, for the log redaction processor."""
        values = [self._redis_password, self._webhook_secret, self._address.password]
        values += [self._kafka_password, self._nats_token]
        header_values = tuple(value for _, value in self._webhook_headers)
        return tuple(v.get_secret_value() for v in values if v is not None) + header_values

    def sink_specs(self) -> dict[str, str]:
        """The sink spec per kind, ``--sink`` filling in the kinds not set on their own."""
        return {
            "spawn": self.spawn_sink or self.sink,
            "outbox": self.outbox_sink or self.sink,
            "timer": self.timer_sink or self.sink,
        }

    def sweep_options(self, *, once: bool = False) -> SweepOptions:
        return SweepOptions(
            prefixes=self.prefix,
            batch=self.batch,
            poll_interval_s=self.poll_interval,
            max_attempts=self.max_attempts,
            backoff_base_s=self.retry_base,
            backoff_cap_s=max(self.retry_cap, self.retry_base),
            lease_ttl_s=self.lease_ttl,
            shutdown_grace_s=self.shutdown_grace,
            once=once,
            wake=self.wake,
        )

    def sink_options(self) -> SinkOptions:
        secret = self._webhook_secret
        return SinkOptions(
            webhook_secret=secret.get_secret_value().encode() if secret is not None else None,
            webhook_timeout_s=self.webhook_timeout,
            webhook_concurrency=self.webhook_concurrency,
            redis_ca_file=str(self.redis_ca_file) if self.redis_ca_file is not None else None,
            allow_plaintext=self.allow_plaintext,
            webhook_connect_timeout_s=self.webhook_connect_timeout,
            webhook_read_timeout_s=self.webhook_read_timeout,
            webhook_headers=self._webhook_headers,
            webhook_gzip=self.webhook_gzip,
            webhook_ca_file=str(self.webhook_ca_file) if self.webhook_ca_file is not None else None,
            kafka_username=self._kafka_username,
            kafka_password=_reveal(self._kafka_password),
            kafka_sasl_mechanism=self.kafka_sasl_mechanism,
            kafka_ca_file=_path_text(self.kafka_ca_file),
            nats_creds_file=_path_text(self.nats_creds_file),
            nats_token=_reveal(self._nats_token),
            nats_ca_file=_path_text(self.nats_ca_file),
        )


def _reveal(secret: SecretStr | None) -> str | None:
    return secret.get_secret_value() if secret is not None else None


def _path_text(path: Path | None) -> str | None:
    return str(path) if path is not None else None


def load_settings(**flags: Any) -> Settings:
    """Build Settings from explicit flags over the environment; errors become one-line ConfigError."""
    try:
        return Settings(**flags)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc)) from None


def describe_validation_error(exc: ValidationError) -> str:
    """The first problem as one line naming the option (``--batch`` / ``RELAYD_BATCH``)."""
    error = exc.errors(include_input=False, include_url=False)[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    loc = [str(part) for part in error["loc"] if not isinstance(part, int)]
    if not loc:
        return message
    option = loc[0].replace("_", "-")
    return f"invalid --{option} (RELAYD_{loc[0].upper()}): {message}"
