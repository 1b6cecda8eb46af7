"""The kafka sink's librdkafka configuration, from its spec, its options and the current material.

Pure: no client library, no I/O. The producer is idempotent with ``acks=all``; TLS verifies the
broker (``--kafka-ca-file`` replaces the system store); SASL credentials come from
``--kafka-username-file`` / ``--kafka-password-file``, never from the spec. ``KafkaMaterial`` is
what one producer is made with, compared to see a rotation (``relayd.sinks.kafka.sink``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from relayd.errors import ConfigError
from relayd.material import Fixed, Material
from relayd.sinks.base import SinkOptions
from relayd.sinks.broker_targets import check_plaintext, parse_kafka_target
from relayd.sinks.kafka.options import KafkaOptions
from relayd.sinks.spec import SinkSpec

_SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class KafkaMaterial:
    """The credentials and CA bundle one producer is made with (compared to see a rotation)."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_pem: bytes | None = None


class CurrentMaterial:
    """The current ``KafkaMaterial`` of ``options``: watched files when given, else fixed values."""

    def __init__(self, options: SinkOptions) -> None:
        own = options.own_options(KafkaOptions)
        self._username: Material[str | None] = own.username or Fixed(None)
        self._password: Material[str | None] = own.password or Fixed(None)
        self._ca: Material[bytes | None] = own.ca or Fixed(None)

    @property
    def value(self) -> KafkaMaterial:
        return KafkaMaterial(self._username.value, self._password.value, self._ca.value)


def producer_config(
    spec: SinkSpec, options: SinkOptions, material: KafkaMaterial | None = None
) -> dict[str, Any]:
    """librdkafka's configuration for ``spec`` (pure; secrets only from ``options`` or ``material``).

    ``material`` (default: what ``options`` holds now) gives the credentials and, as PEM text,
    the CA bundle; without a watched CA bundle, ``--kafka-ca-file`` is named by path.
    """
    own = options.own_options(KafkaOptions)
    material = material or CurrentMaterial(options).value
    target = parse_kafka_target(spec.target)
    tls = target.tls or own.ca_file is not None or material.ca_pem is not None
    credentials = material.username is not None or material.password is not None
    check_plaintext(
        [host for host, _ in target.bootstrap],
        "kafka",
        tls=tls,
        credentials=credentials,
        allow_plaintext=options.allow_plaintext,
    )
    config: dict[str, Any] = {
        "bootstrap.servers": target.bootstrap_servers,
        "acks": "all",
        "enable.idempotence": True,
        "message.timeout.ms": int(target.timeout_s * 1000),
        "client.id": "relayd",
        # A new idempotent producer needs its producer id before anything goes out; with sparse
        # connections it asks only when librdkafka's producer-id retry timer fires and finds a
        # broker connected, so the first batch of every start waited for that timer, once or
        # twice. Connecting to the brokers the metadata names at once gets the id without it
        # (relayd bench --sink kafka:...; the baseline uses this same configuration).
        "enable.sparse.connections": False,
    }
    if credentials:
        if material.username is None or material.password is None:
            raise ConfigError("sink 'kafka': SASL needs both --kafka-username-file and --kafka-password-file")
        if own.sasl_mechanism not in _SASL_MECHANISMS:
            known = ", ".join(_SASL_MECHANISMS)
            raise ConfigError(f"sink 'kafka': --kafka-sasl-mechanism must be one of {known}")
        config |= {
            "sasl.mechanism": own.sasl_mechanism,
            "sasl.username": material.username,
            "sasl.password": material.password,
        }
    config["security.protocol"] = ("sasl_" if credentials else "") + ("ssl" if tls else "plaintext")
    if tls:
        config["enable.ssl.certificate.verification"] = True
        config["ssl.endpoint.identification.algorithm"] = "https"
        if material.ca_pem is not None:  # librdkafka takes every certificate of the bundle
            config["ssl.ca.pem"] = material.ca_pem.decode("ascii", "replace")
        elif own.ca_file is not None:
            config["ssl.ca.location"] = str(own.ca_file)
    return config | own.librdkafka()
