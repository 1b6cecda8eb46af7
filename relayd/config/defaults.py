"""Every option's default, in one place that imports nothing.

``Settings`` validates with these defaults; the CLI shows them in ``--help`` and the README
table, without importing ``Settings`` and its validation, so ``relayd --help`` starts fast.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Final, Literal


@dataclass(frozen=True, slots=True)
class Defaults:
    """The defaults of ``relayd.config.settings.Settings``, field by field (None: not set).

    A sink's own options are not here: their defaults are the fields of its options class
    (``relayd.sinks.own_options``).
    """

    redis_url: str = "redis://127.0.0.1:6379/0"
    prefix: tuple[str, ...] = ("stm",)
    # No default sink: relaying into the log by accident acks the backlog (``--sink log`` asks for it).
    sink: str | None = None
    outbox_sink: str | None = None
    spawn_sink: str | None = None
    timer_sink: str | None = None
    batch: int = 1000
    poll_interval: float = 1.0
    max_attempts: int = 10
    # Retry delays grow from retry_base to retry_cap (seconds, jittered): a minute at most by
    # default, so a sink that comes back is drained within a minute rather than five.
    retry_base: float = 0.5
    retry_cap: float = 60.0
    # Loopback by default: metrics and health reveal backlog sizes; containers set 0.0.0.0:9464.
    metrics_addr: str = "127.0.0.1:9464"
    lease_ttl: float = 5.0
    # Use keyspace notifications when the server publishes them (relayd never turns them on).
    wake: bool = True
    log_format: Literal["json", "console"] | None = None  # None: json unless the log stream is a tty
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    shutdown_grace: float = 10.0
    # A sink call this long past its sink's own timeout is hung: /healthz 503 (relayd.observability.inflight).
    hung_sink_grace: float = 30.0
    redis_username_file: Path | None = None
    redis_password_file: Path | None = None
    sentinel_username_file: Path | None = None
    sentinel_password_file: Path | None = None
    redis_ca_file: Path | None = None
    redis_cert_file: Path | None = None
    redis_key_file: Path | None = None
    allow_plaintext: bool = False
    format: Literal["relayd", "cloudevents"] = "relayd"
    cloudevents_mode: Literal["binary", "structured"] = "binary"
    cloudevents_source: str = "relayd://{prefix}"
    console_addr: str = "127.0.0.1:9465"
    console_token_file: Path | None = None
    allow_actions: bool = False
    console_replay_rate: float = 100.0
    # Each sink's circuit breaker (relayd.engine.breaker): failed entries over 2+ targets with no
    # success between that open it (0: never), and its longest cool-down in seconds.
    breaker_threshold: int = 5
    breaker_cooldown_cap: float = 15.0
    # Most entries a second delivered to each sink (0: unlimited).
    sink_rate: float = 0.0
    # Whether that limit is each process's or one for every replica, in Redis (per sink name).
    sink_rate_scope: Literal["process", "cluster"] = "process"
    # With the cluster scope, what limits a process while Redis does not answer its bucket.
    sink_rate_fallback: Literal["process", "hold"] = "process"
    # Where operational events go (relayd.observability.events): any sink spec; None: nowhere.
    events_sink: str | None = None


DEFAULTS: Final = Defaults()

#: Every option's name (``Settings`` declares the same fields; the CLI forwards only these).
OPTION_NAMES: Final = frozenset(field.name for field in fields(Defaults))
