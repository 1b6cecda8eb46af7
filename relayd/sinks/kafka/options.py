"""The kafka sink's own options: ``--kafka-<name>`` flags and ``RELAYD_KAFKA_<NAME>`` variables.

Adding an option to the kafka sink is one field here (``relayd.sinks.own_options``): a field
with ``librdkafka`` in its metadata goes to the producer's configuration as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Literal

from relayd.security.material import Material, pem_file, secret_file
from relayd.sinks.own_options import SECURITY, STRIPPED_WATCHED, content_of, option, watched


@dataclass(frozen=True, slots=True)
class KafkaOptions:
    """SASL credentials, the CA bundle and librdkafka settings of the kafka sink."""

    prefix: ClassVar[str] = "kafka"

    username_file: Path | None = option(
        None,
        f"File holding the kafka sink's SASL username ({STRIPPED_WATCHED}).",
        panel=SECURITY,
        reads=watched(secret_file),
    )
    password_file: Path | None = option(
        None,
        f"File holding the kafka sink's SASL password ({STRIPPED_WATCHED}).",
        panel=SECURITY,
        reads=watched(secret_file),
        secret=True,
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM"] = option(
        "SCRAM-SHA-512",
        "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (with the username and password files),"
        " OAUTHBEARER (OIDC client credentials: the --kafka-oauth-* options) or AWS_MSK_IAM"
        " (Amazon MSK IAM, credentials from the standard AWS chain).",
        panel=SECURITY,
    )
    oauth_token_url: str | None = option(
        None,
        "OIDC token endpoint for --kafka-sasl-mechanism OAUTHBEARER (client credentials grant).",
        panel=SECURITY,
    )
    oauth_client_id: str | None = option(None, "OIDC client id for OAUTHBEARER.", panel=SECURITY)
    oauth_client_secret_file: Path | None = option(
        None,
        f"File holding the OIDC client secret for OAUTHBEARER ({STRIPPED_WATCHED}).",
        panel=SECURITY,
        reads=watched(secret_file),
        secret=True,
    )
    oauth_scope: str | None = option(
        None, "OIDC scope asked for with OAUTHBEARER (optional).", panel=SECURITY
    )
    ca_file: Path | None = option(
        None, "PEM CA bundle for the kafka sink's TLS (implies TLS).", panel=SECURITY, reads=watched(pem_file)
    )
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = option(
        "none",
        "Compress each batch of records: none, gzip, snappy, lz4 or zstd.",
        librdkafka="compression.type",
    )

    #: What the files above hold now, re-read when they change: the sink replaces its producer
    #: between batches when one of them changed.
    username: Material[str] | None = content_of("username_file")
    password: Material[str] | None = content_of("password_file")
    ca: Material[bytes] | None = content_of("ca_file")
    oauth_client_secret: Material[str] | None = content_of("oauth_client_secret_file")

    def librdkafka(self) -> dict[str, Any]:
        """The producer settings these options pass to librdkafka as they are (metadata ``librdkafka``)."""
        return {
            field.metadata["librdkafka"]: getattr(self, field.name)
            for field in fields(self)
            if "librdkafka" in field.metadata
        }
