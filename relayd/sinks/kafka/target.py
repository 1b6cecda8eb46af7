"""Parse and check the ``kafka:`` sink target and its topic template.

Pure: no I/O and no Kafka client import, so a spec is checked before anything connects (and
without the ``kafka`` extra installed). The grammar (docs/brokers.md)::

    kafka:HOST:PORT[,HOST:PORT...]?topic=NAME[&tls=true][&timeout_s=S]

``NAME`` may hold ``{target}`` (the envelope's ordering key, ``_`` when it has none),
``{kind}`` and ``{prefix}`` (filled by ``relayd.sinks.routing``). The sink uses TLS with
``tls=true`` or when a CA file is configured. ``timeout_s`` bounds how long a batch waits for its
confirmations (``relayd.sinks.target_rules.timeout_param``).

Plaintext to a host that is not loopback needs ``--allow-plaintext``, and is refused outright
when credentials are configured (README.md#security), as for Redis: the sink's configuration
checks it (``relayd.sinks.kafka.config``), since it depends on the options.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from relayd.errors import ConfigError
from relayd.sinks.routing import is_templated
from relayd.sinks.target_rules import sink_params, timeout_param

#: Kafka's own rule for topic names (legal characters, and how many of them).
_KAFKA_TOPIC: Final = re.compile(r"[A-Za-z0-9._-]{1,249}")


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
    return KafkaTarget(tuple(bootstrap), topic, tls == "true", timeout_param(params, "kafka"))


def kafka_topic_ok(topic: str) -> bool:
    """Whether ``topic`` is a name Kafka accepts."""
    return _KAFKA_TOPIC.fullmatch(topic) is not None
