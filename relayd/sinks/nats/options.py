"""The nats sink's own options: ``--nats-<name>`` flags and ``RELAYD_NATS_<NAME>`` variables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from relayd.security.material import Material, pem_file, secret_file
from relayd.sinks.own_options import SECURITY, STRIPPED_WATCHED, content_of, option, readable_file, watched


@dataclass(frozen=True, slots=True)
class NatsOptions:
    """The nats sink's credentials (a creds file or a token) and CA bundle."""

    prefix: ClassVar[str] = "nats"

    creds_file: Path | None = option(
        None, "The nats sink's credentials file (JWT and seed).", panel=SECURITY, reads=readable_file
    )
    token_file: Path | None = option(
        None,
        f"File holding the nats sink's token ({STRIPPED_WATCHED}).",
        panel=SECURITY,
        reads=watched(secret_file),
        secret=True,
    )
    ca_file: Path | None = option(
        None, "PEM CA bundle for the nats sink's TLS (implies TLS).", panel=SECURITY, reads=watched(pem_file)
    )

    #: What the files above hold now, re-read when they change.
    token: Material[str] | None = content_of("token_file")
    ca: Material[bytes] | None = content_of("ca_file")
