"""The amqp sink's own options: ``--amqp-<name>`` flags and ``RELAYD_AMQP_<NAME>`` variables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from relayd.security.material import Material, pem_file, secret_file
from relayd.sinks.own_options import SECURITY, STRIPPED_WATCHED, content_of, option, watched


@dataclass(frozen=True, slots=True)
class AmqpOptions:
    """The AMQP user's password (never in the spec) and the CA bundle for ``amqps://``."""

    prefix: ClassVar[str] = "amqp"

    password_file: Path | None = option(
        None,
        f"File holding the AMQP user's password (amqp sink; {STRIPPED_WATCHED}).",
        panel=SECURITY,
        reads=watched(secret_file),
        secret=True,
    )
    ca_file: Path | None = option(
        None,
        "PEM CA bundle trusted for amqps:// instead of the system store.",
        panel=SECURITY,
        reads=watched(pem_file),
    )

    #: What the files above hold now, re-read when they change.
    password: Material[str] | None = content_of("password_file")
    ca: Material[bytes] | None = content_of("ca_file")
