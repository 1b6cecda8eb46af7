"""Parse the ``kafka:`` and ``nats:`` sink targets and check their topic / subject templates.

Pure: no I/O, no client library. The grammar (docs/sinks.md)::

    kafka:HOST:PORT[,HOST:PORT...]?topic=NAME[&tls=true][&timeout_s=S]
    nats:nats://HOST:PORT[,nats://HOST:PORT...]?subject=NAME[&timeout_s=S]

``NAME`` may hold ``{target}`` (the envelope's ordering key, ``_`` when it has none),
``{kind}`` and ``{prefix}`` (filled by ``relayd.sinks.routing``). Kafka uses TLS with
``tls=true`` or when a CA file is configured; NATS uses it for ``tls://`` server URLs or when a
CA file is configured. ``timeout_s`` bounds how long a batch waits for its confirmations
(default ``DEFAULT_TIMEOUT_S``).

Plaintext to a host that is not loopback needs ``--allow-plaintext``, and is refused outright
when credentials are configured (README.md#security), as for Redis.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from relayd.config.redis_url import plaintext_refusal
from relayd.errors import ConfigError
from relayd.sinks.routing import PLACEHOLDERS, is_templated
from relayd.sinks.spec import sink_params

#: Seconds a batch waits for its broker confirmations unless the spec says ``timeout_s``.
DEFAULT_TIMEOUT_S: Final = 30.0
#: Kafka's own rule for topic names (legal characters, at most 249 of them).
_KAFKA_TOPIC: Final = re.compile(r"[A-Za-z0-9._-]{1,249}")
#: A NATS subject: dot-separated tokens without whitespace or wildcards.
_NATS_TOKEN: Final = re.compile(r"[^\s.*>]+")


@dataclass(frozen=True, slots=True)
class KafkaTarget:
    """A parsed ``kafka:`` target."""

    bootstrap: tuple[tuple[str, int], ...]
    topic: str
    tls: bool
    timeout_s: float

    @property
    def bootstrap_servers(self) -> str:
        """librdkafka's ``bootstrap.servers`` text."""
        return ",".join(f"{host}:{port}" for host, port in self.bootstrap)


@dataclass(frozen=True, slots=True)
class NatsTarget:
    """A parsed ``nats:`` target."""

    servers: tuple[str, ...]
    subject: str
    tls: bool
    timeout_s: float

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(urlsplit(server).hostname or "" for server in self.servers)


def parse_kafka_target(text: str) -> KafkaTarget:
    """Parse what follows ``kafka:``.

    Raises:
        ConfigError: one line naming what is wrong.
    """
    hosts_text, params = sink_params(text, "kafka", ("topic", "tls", "timeout_s"))
    bootstrap = []
    for item in (part.strip() for part in hosts_text.split(",")):
        host, sep, port = item.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"sink 'kafka' needs HOST:PORT[,HOST:PORT...], got {item[:60]!r}")
        bootstrap.append((host, int(port)))
    topic = params.get("topic", "")
    if not topic:
        raise ConfigError("sink 'kafka' needs a topic: 'kafka:HOST:PORT?topic=NAME'")
    if not is_templated(topic) and not _KAFKA_TOPIC.fullmatch(topic):
        raise ConfigError(f"sink 'kafka': {topic[:60]!r} is not a legal Kafka topic name")
    tls = params.get("tls", "false").lower()
    if tls not in ("true", "false"):
        raise ConfigError("sink 'kafka': tls must be true or false")
    return KafkaTarget(tuple(bootstrap), topic, tls == "true", _timeout(params, "kafka"))


def parse_nats_target(text: str) -> NatsTarget:
    """Parse what follows ``nats:``.

    Raises:
        ConfigError: one line naming what is wrong (a server URL's password is never shown).
    """
    servers_text, params = sink_params(text, "nats", ("subject", "timeout_s"))
    servers = []
    for item in (part.strip() for part in servers_text.split(",")):
        try:
            parts = urlsplit(item)
            parts.port  # noqa: B018 - urlsplit validates the port only when it is read
        except ValueError:
            raise ConfigError("sink 'nats': malformed server URL") from None
        if parts.scheme not in ("nats", "tls") or not parts.hostname:
            raise ConfigError("sink 'nats' needs nats://HOST:PORT (or tls://) server URLs")
        if parts.username or parts.password:
            raise ConfigError("sink 'nats': credentials in the URL are refused; use --nats-creds-file")
        servers.append(item)
    subject = params.get("subject", "")
    if not subject:
        raise ConfigError("sink 'nats' needs a subject: 'nats:nats://HOST:PORT?subject=NAME'")
    if not nats_subject_ok(_sample(subject)):
        raise ConfigError(f"sink 'nats': {subject[:60]!r} is not a valid NATS subject")
    tls = any(server.startswith("tls://") for server in servers)
    return NatsTarget(tuple(servers), subject, tls, _timeout(params, "nats"))


def check_plaintext(
    hosts: Sequence[str],
    sink: str,
    *,
    tls: bool,
    credentials: bool,
    allow_plaintext: bool,
    secure: str = "TLS",
) -> None:
    """Enforce README.md#security (``relayd.config.redis_url.plaintext_refusal``) on a sink's connection.

    Raises:
        ConfigError: plaintext with credentials, or to a non-loopback host without permission.
    """
    refusal = plaintext_refusal(
        hosts, tls=tls, credentials=credentials, allow_plaintext=allow_plaintext, service=sink, secure=secure
    )
    if refusal is not None:
        raise ConfigError(f"sink {sink!r}: {refusal}")


def kafka_topic_ok(topic: str) -> bool:
    """Whether ``topic`` is a name Kafka accepts."""
    return _KAFKA_TOPIC.fullmatch(topic) is not None


def nats_subject_ok(subject: str) -> bool:
    """Whether ``subject`` is a literal NATS subject a message can be published to."""
    return all(_NATS_TOKEN.fullmatch(token) for token in subject.split("."))


def _sample(template: str) -> str:
    """``template`` with every field replaced by a legal token, to check the fixed text."""
    for placeholder in PLACEHOLDERS:
        template = template.replace(placeholder, "x")
    return template


def _timeout(params: dict[str, str], sink: str) -> float:
    text = params.get("timeout_s")
    if text is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 3600:
        raise ConfigError(f"sink {sink!r}: timeout_s must be a number of seconds in (0, 3600]")
    return value
