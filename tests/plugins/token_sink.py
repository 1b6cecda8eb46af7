"""A plugin sink that sends with a token read from a watched secret file, its own option.

Used as ``python:tests.plugins.token_sink:TokenSink`` with ``--sink-option tokens.token_file=PATH``
and ``--sink-option tokens.out=PATH`` by relayd processes started with the repository root on
``PYTHONPATH`` (tests/e2e/test_plugin_rotation.py). Each delivered id is written to ``out`` with
the token it went with, so a test sees which material each delivery used; the token is also
logged, as a careless plugin might, so a test sees relayd redact a plugin's secret too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import orjson
import structlog

from relayd.errors import ConfigError
from relayd.security.material import Material, secret_file
from relayd.sinks import DELIVERED, Batch, Outcome, SinkOptions, SinkSpec
from relayd.sinks.own_options import SECURITY, content_of, option, watched

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class TokenOptions:
    """The plugin's own options: the token's file (watched, secret) and where deliveries are noted."""

    prefix: ClassVar[str] = "tokens"
    token_file: Path | None = option(
        None, "File holding the token.", panel=SECURITY, reads=watched(secret_file), secret=True
    )
    out: Path | None = option(None, "File each delivered id is appended to, with its token.")
    token: Material[str] | None = content_of("token_file")


class TokenSink:
    """Deliver everything, noting the token in use for each id; see the module docstring."""

    name = "tokens"
    options_class = TokenOptions

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        own = options.own_options(TokenOptions)
        if own.token is None or own.out is None:
            raise ConfigError("sink 'tokens' needs --sink-option tokens.token_file and tokens.out")
        self._token, self._out = own.token, own.out

    async def start(self) -> None:
        """Nothing to open."""

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        token = self._token.value  # what the file holds now: read per batch, never kept
        log.info("tokens_delivered", token=token, count=len(batch))
        with self._out.open("ab") as out:
            out.write(b"".join(orjson.dumps({"id": i, "token": token}) + b"\n" for i in batch.ids()))
        return [DELIVERED] * len(batch)

    def ready(self) -> bool:
        return True

    async def close(self) -> None:
        """Nothing to release."""
