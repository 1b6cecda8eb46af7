"""The kafka sink's librdkafka configuration, from its spec, its options and the current material.

Pure: no client library, no I/O. The producer is idempotent with ``acks=all``; TLS verifies the
broker (``--kafka-ca-file`` replaces the system store); SASL credentials come from
``--kafka-username-file`` / ``--kafka-password-file``, never from the spec. ``KafkaMaterial`` is
what one producer is made with, compared to see a rotation (``relayd.sinks.kafka.sink``).

Cloud identity: ``OAUTHBEARER`` is librdkafka's own OIDC client (``sasl.oauthbearer.method=oidc``:
it makes the client credentials grant at the token endpoint and refreshes the token before it
expires, in its own thread); ``AWS_MSK_IAM`` is OAUTHBEARER with a token the sink's callback
signs (``relayd.sinks.kafka.msk_iam``), its region from ``msk_region``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from relayd.errors import ConfigError
from relayd.security.material import Fixed, Material
from relayd.sinks.base import SinkOptions
from relayd.sinks.kafka.options import KafkaOptions
from relayd.sinks.kafka.target import parse_kafka_target
from relayd.sinks.spec import SinkSpec
from relayd.sinks.target_rules import check_plaintext, url_parts

_SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: The mechanisms whose credential is a bearer token, not a username and password.
TOKEN_MECHANISMS: Final = ("OAUTHBEARER", "AWS_MSK_IAM")
#: The region in an MSK broker's host name (provisioned and serverless clusters).
_MSK_HOST_REGION: Final = re.compile(
    r"\.kafka(?:-serverless)?\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com$"
)


@dataclass(frozen=True)
class KafkaMaterial:
    """The credentials and CA bundle one producer is made with (compared to see a rotation)."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_pem: bytes | None = None
    oauth_client_secret: str | None = field(default=None, repr=False)


class CurrentMaterial:
    """The current ``KafkaMaterial`` of ``options``: watched files when given, else fixed values."""

    def __init__(self, options: SinkOptions) -> None:
        own = options.own_options(KafkaOptions)
        self._username: Material[str | None] = own.username or Fixed(None)
        self._password: Material[str | None] = own.password or Fixed(None)
        self._ca: Material[bytes | None] = own.ca or Fixed(None)
        self._oauth_secret: Material[str | None] = own.oauth_client_secret or Fixed(None)

    @property
    def value(self) -> KafkaMaterial:
        return KafkaMaterial(
            self._username.value, self._password.value, self._ca.value, self._oauth_secret.value
        )


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
    password = material.username is not None or material.password is not None
    mechanism = own.sasl_mechanism
    token = mechanism in TOKEN_MECHANISMS
    _check_sasl_options(own, material, password=password)
    credentials = password or token
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
    if password:
        config |= {
            "sasl.mechanism": own.sasl_mechanism,
            "sasl.username": material.username,
            "sasl.password": material.password,
        }
    elif mechanism == "OAUTHBEARER":
        config |= {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": own.oauth_token_url,
            "sasl.oauthbearer.client.id": own.oauth_client_id,
            "sasl.oauthbearer.client.secret": material.oauth_client_secret,
        }
        if own.oauth_scope:
            config["sasl.oauthbearer.scope"] = own.oauth_scope
    elif mechanism == "AWS_MSK_IAM":
        config["sasl.mechanism"] = "OAUTHBEARER"  # the token comes from the sink's oauth_cb
    config["security.protocol"] = ("sasl_" if credentials else "") + ("ssl" if tls else "plaintext")
    if tls:
        config["enable.ssl.certificate.verification"] = True
        config["ssl.endpoint.identification.algorithm"] = "https"
        if material.ca_pem is not None:  # librdkafka takes every certificate of the bundle
            config["ssl.ca.pem"] = material.ca_pem.decode("ascii", "replace")
        elif own.ca_file is not None:
            config["ssl.ca.location"] = str(own.ca_file)
    return config | own.librdkafka()


def _check_sasl_options(own: KafkaOptions, material: KafkaMaterial, *, password: bool) -> None:
    """Refuse SASL options that do not go together (one line each: exit 2)."""
    mechanism = own.sasl_mechanism
    oauth_set = [
        name
        for name, value in (
            ("--kafka-oauth-token-url", own.oauth_token_url),
            ("--kafka-oauth-client-id", own.oauth_client_id),
            (
                "--kafka-oauth-client-secret-file",
                own.oauth_client_secret_file or material.oauth_client_secret,
            ),
            ("--kafka-oauth-scope", own.oauth_scope),
        )
        if value
    ]
    if oauth_set and mechanism != "OAUTHBEARER":
        raise ConfigError(f"sink 'kafka': {oauth_set[0]} needs --kafka-sasl-mechanism OAUTHBEARER")
    if mechanism in TOKEN_MECHANISMS:
        if password:
            raise ConfigError(
                f"sink 'kafka': --kafka-sasl-mechanism {mechanism} takes no --kafka-username-file"
                " or --kafka-password-file"
            )
        if mechanism == "OAUTHBEARER":
            if not (own.oauth_token_url and own.oauth_client_id and material.oauth_client_secret):
                raise ConfigError(
                    "sink 'kafka': OAUTHBEARER needs --kafka-oauth-token-url, --kafka-oauth-client-id"
                    " and --kafka-oauth-client-secret-file"
                )
            _check_token_url(own.oauth_token_url)
        return
    if password:
        if material.username is None or material.password is None:
            raise ConfigError("sink 'kafka': SASL needs both --kafka-username-file and --kafka-password-file")
        if mechanism not in _SASL_MECHANISMS:
            known = ", ".join(_SASL_MECHANISMS)
            raise ConfigError(f"sink 'kafka': --kafka-sasl-mechanism must be one of {known}")


def _check_token_url(url: str) -> None:
    """An ``https://`` token endpoint (``http://`` only on loopback: the client secret crosses it)."""
    parts = url_parts(url, "sink 'kafka': --kafka-oauth-token-url is malformed")
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigError("sink 'kafka': --kafka-oauth-token-url must be an https:// URL")
    if parts.username or parts.password:
        raise ConfigError(
            "sink 'kafka': no credentials in --kafka-oauth-token-url (the secret comes from its file)"
        )
    check_plaintext(
        [parts.hostname], "kafka", tls=parts.scheme == "https", credentials=True, allow_plaintext=False
    )


def msk_region(spec: SinkSpec, environ: Mapping[str, str] | None = None) -> str | None:
    """The AWS region of an MSK cluster: from a broker's host name, else ``AWS_REGION`` /
    ``AWS_DEFAULT_REGION`` (None: the sink asks the shared AWS configuration)."""
    for host, _ in parse_kafka_target(spec.target).bootstrap:
        match = _MSK_HOST_REGION.search(host)
        if match:
            return match["region"]
    environ = os.environ if environ is None else environ
    return environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or None
