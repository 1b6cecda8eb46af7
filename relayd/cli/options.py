"""The command-line options shared by relayd's commands, each with its ``RELAYD_<NAME>`` variable.

Every option defaults to None here: an option given on the command line is passed to
``Settings`` as a keyword (so it wins), everything else comes from the environment or the
Settings default, read by ``Settings`` alone. Click also reads the variable (that is what
``show_envvar`` documents and what type-checks it early), but only command-line values are
forwarded; ``settings_from`` is the one place that decides.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec

import typer
from typer._click.core import ParameterSource  # typer vendors click; its enum is the one used

from relayd.defaults import DEFAULTS

if TYPE_CHECKING:
    from relayd.settings import Settings

REDIS = "Redis"
SINKS = "Sinks"
TUNING = "Tuning"
OBSERVE = "Logs and metrics"
SECURITY = "Credentials and TLS"


def _option(name: str, help_text: str, panel: str, **extra: Any) -> Any:
    default = getattr(DEFAULTS, name)
    shown: str | bool = str(default) if default not in (None, (), False) else False
    if isinstance(default, tuple):
        shown = ",".join(default)
    return typer.Option(
        f"--{name.replace('_', '-')}",
        envvar=f"RELAYD_{name.upper()}",
        show_envvar=True,
        show_default=shown,
        help=help_text,
        rich_help_panel=panel,
        **extra,
    )


RedisUrl = Annotated[
    str | None,
    _option(
        "redis_url",
        "Redis URL: redis://, rediss:// (verified TLS), redis+cluster://, rediss+cluster:// (any seed "
        "node), redis+sentinel://HOST:PORT,HOST:PORT/SERVICE/DB (sentinels), rediss+sentinel://.",
        REDIS,
    ),
]
Prefix = Annotated[
    list[str] | None,
    _option(
        "prefix",
        "Key prefix to relay; repeatable (env: comma-separated). "
        "'{shard-0..31}' expands to 32 hash-tagged prefixes.",
        REDIS,
    ),
]
Sink = Annotated[
    str | None, _option("sink", "Sink for every kind not given its own: log, jsonl:PATH, ...", SINKS)
]
OutboxSink = Annotated[str | None, _option("outbox_sink", "Sink for outbox events (default: --sink).", SINKS)]
SpawnSink = Annotated[str | None, _option("spawn_sink", "Sink for spawn intents (default: --sink).", SINKS)]
TimerSink = Annotated[str | None, _option("timer_sink", "Sink for due timers (default: --sink).", SINKS)]
Batch = Annotated[int | None, _option("batch", "Most entries of each kind read per poll.", TUNING)]
PollInterval = Annotated[
    float | None, _option("poll_interval", "Longest wait between polls when idle, in seconds.", TUNING)
]
RetryBase = Annotated[
    float | None,
    _option("retry_base", "First retry delay in seconds; it doubles per attempt, with jitter.", TUNING),
]
RetryCap = Annotated[
    float | None,
    _option("retry_cap", "Longest retry delay in seconds (a sink's Retry-After may exceed it).", TUNING),
]
MaxAttempts = Annotated[
    int | None, _option("max_attempts", "Attempts before an entry is dead-lettered.", TUNING)
]
LeaseTtl = Annotated[
    float | None,
    _option("lease_ttl", "Lease time-to-live per prefix in seconds (renewed every third of it).", TUNING),
]
Wake = Annotated[
    bool | None,
    typer.Option(
        "--wake/--no-wake",
        envvar="RELAYD_WAKE",
        show_envvar=True,
        show_default="on",
        help="Wake an idle prefix at once on new work, from keyspace notifications when the "
        "server publishes them (notify-keyspace-events Khz); polling goes on regardless.",
        rich_help_panel=TUNING,
    ),
]
ShutdownGrace = Annotated[
    float | None,
    _option("shutdown_grace", "Seconds in-flight deliveries may take after SIGTERM/SIGINT.", TUNING),
]
MetricsAddr = Annotated[
    str | None,
    _option(
        "metrics_addr",
        "HOST:PORT for /metrics, /healthz, /readyz (loopback by default; 0.0.0.0:9464 in containers).",
        OBSERVE,
    ),
]
LogFormat = Annotated[
    str | None, _option("log_format", "json or console (default: json unless stderr is a terminal).", OBSERVE)
]
LogLevel = Annotated[str | None, _option("log_level", "debug, info, warning or error.", OBSERVE)]
RedisUsernameFile = Annotated[
    Path | None, _option("redis_username_file", "File holding the Redis ACL username.", SECURITY)
]
RedisPasswordFile = Annotated[
    Path | None, _option("redis_password_file", "File holding the Redis password.", SECURITY)
]
SentinelUsernameFile = Annotated[
    Path | None,
    _option(
        "sentinel_username_file", "File holding the Sentinel ACL username (redis+sentinel://).", SECURITY
    ),
]
SentinelPasswordFile = Annotated[
    Path | None,
    _option("sentinel_password_file", "File holding the sentinels' password (redis+sentinel://).", SECURITY),
]
RedisCaFile = Annotated[
    Path | None,
    _option("redis_ca_file", "PEM CA bundle trusted for rediss:// instead of the system store.", SECURITY),
]
RedisCertFile = Annotated[
    Path | None,
    _option("redis_cert_file", "PEM client certificate for mutual TLS (with --redis-key-file).", SECURITY),
]
RedisKeyFile = Annotated[
    Path | None,
    _option("redis_key_file", "PEM client key for mutual TLS (with --redis-cert-file).", SECURITY),
]
AllowPlaintext = Annotated[
    bool,
    _option(
        "allow_plaintext",
        "Permit plaintext Redis to a non-loopback host (never with credentials).",
        SECURITY,
    ),
]
WebhookSecretFile = Annotated[
    Path | None, _option("webhook_secret_file", "File holding the webhook HMAC-SHA256 signing key.", SECURITY)
]
WebhookTimeout = Annotated[
    float | None, _option("webhook_timeout", "Seconds one webhook request may take.", SINKS)
]
WebhookConcurrency = Annotated[
    int | None, _option("webhook_concurrency", "Most webhook requests in flight at once.", SINKS)
]
WebhookConnectTimeout = Annotated[
    float | None, _option("webhook_connect_timeout", "Seconds to open a webhook connection.", SINKS)
]
WebhookReadTimeout = Annotated[
    float | None, _option("webhook_read_timeout", "Seconds a webhook answer may pause between reads.", SINKS)
]
WebhookHeadersFile = Annotated[
    Path | None,
    _option("webhook_headers_file", "File of extra webhook headers, one 'Name: value' a line.", SECURITY),
]
WebhookGzip = Annotated[bool, _option("webhook_gzip", "Gzip webhook request bodies.", SINKS)]
WebhookCaFile = Annotated[
    Path | None, _option("webhook_ca_file", "PEM CA bundle trusted for https:// webhooks.", SECURITY)
]

CONSOLE = "Console"
ConsoleAddr = Annotated[
    str | None,
    _option(
        "console_addr",
        "HOST:PORT the console listens on (loopback by default; any other host needs a token file).",
        CONSOLE,
    ),
]
ConsoleTokenFile = Annotated[
    Path | None,
    _option(
        "console_token_file", "File holding the console's access token (compared in constant time).", CONSOLE
    ),
]
AllowActions = Annotated[
    bool,
    _option("allow_actions", "Let the console replay and purge dead letters (read-only otherwise).", CONSOLE),
]
ConsoleReplayRate = Annotated[
    float | None,
    _option("console_replay_rate", "Most dead letters the console replays per second.", CONSOLE),
]

AmqpPasswordFile = Annotated[
    Path | None, _option("amqp_password_file", "File holding the AMQP user's password (amqp sink).", SECURITY)
]
AmqpCaFile = Annotated[
    Path | None,
    _option("amqp_ca_file", "PEM CA bundle trusted for amqps:// instead of the system store.", SECURITY),
]
KafkaUsernameFile = Annotated[
    Path | None, _option("kafka_username_file", "File holding the kafka sink's SASL username.", SECURITY)
]
KafkaPasswordFile = Annotated[
    Path | None, _option("kafka_password_file", "File holding the kafka sink's SASL password.", SECURITY)
]
KafkaSaslMechanism = Annotated[
    str | None,
    _option("kafka_sasl_mechanism", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.", SECURITY),
]
KafkaCaFile = Annotated[
    Path | None,
    _option("kafka_ca_file", "PEM CA bundle for the kafka sink's TLS (implies TLS).", SECURITY),
]
NatsCredsFile = Annotated[
    Path | None, _option("nats_creds_file", "The nats sink's credentials file (JWT and seed).", SECURITY)
]
NatsTokenFile = Annotated[
    Path | None, _option("nats_token_file", "File holding the nats sink's token.", SECURITY)
]
NatsCaFile = Annotated[
    Path | None, _option("nats_ca_file", "PEM CA bundle for the nats sink's TLS (implies TLS).", SECURITY)
]


#: What every command that connects to Redis takes: where (declared first, so the Redis panel
#: leads the help), then how to log and which credentials and TLS (declared last).
CONNECTION_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("redis_url", RedisUrl, None),
    ("prefix", Prefix, None),
    ("log_format", LogFormat, None),
    ("log_level", LogLevel, None),
    ("redis_username_file", RedisUsernameFile, None),
    ("redis_password_file", RedisPasswordFile, None),
    ("sentinel_username_file", SentinelUsernameFile, None),
    ("sentinel_password_file", SentinelPasswordFile, None),
    ("redis_ca_file", RedisCaFile, None),
    ("redis_cert_file", RedisCertFile, None),
    ("redis_key_file", RedisKeyFile, None),
    ("allow_plaintext", AllowPlaintext, False),
)
_LEADING = 2  # redis_url and prefix

_P = ParamSpec("_P")


def with_connection_options(command: Callable[_P, None]) -> Callable[_P, None]:
    """Declare ``CONNECTION_OPTIONS`` on ``command``, around its own options.

    The command reads them through ``settings_from(ctx)`` (Click keeps every value in
    ``ctx.params``), so they are declared for Typer and never passed on to the command.
    """
    signature = inspect.signature(command, eval_str=True)
    own = list(signature.parameters.values())
    shared = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=hint)
        for name, hint, default in CONNECTION_OPTIONS
    ]
    at = 1 if own and own[0].annotation is typer.Context else 0
    parameters = [*own[:at], *shared[:_LEADING], *own[at:], *shared[_LEADING:]]

    @functools.wraps(command)
    def declared(*args: _P.args, **kwargs: _P.kwargs) -> None:
        for name, _, _ in CONNECTION_OPTIONS:
            kwargs.pop(name, None)
        command(*args, **kwargs)

    declared.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    declared.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
    return declared


def settings_from(ctx: typer.Context) -> Settings:
    """Settings from the options typed on the command line over the environment and defaults."""
    from relayd.settings import OPTION_NAMES, load_settings

    flags = {
        name: value
        for name, value in ctx.params.items()
        if name in OPTION_NAMES and ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    }
    return load_settings(**flags)


def configure_logs(settings: Settings) -> None:
    """Set logging up for a command from its Settings (every secret redacted)."""
    from relayd.logs import configure_logging

    configure_logging(
        log_format=settings.log_format, log_level=settings.log_level, secrets=settings.secrets()
    )
