"""What the operator's commands (``dlq``, ``pause``, ``resume``) share: who acts, and one
action run on each prefix over one brief connection."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import typer

if TYPE_CHECKING:
    from relayd.config.settings import Settings
    from relayd.connect import AsyncRedis
    from store import Keyspace

T = TypeVar("T")


def operator() -> str:
    """Who acts from this command line: ``cli:user@host`` (for status and the audit trail)."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's numeric user)
        import os

        user = str(os.getuid())
    return f"cli:{user}@{socket.gethostname()}"


def per_prefix(
    settings: Settings, action: Callable[[AsyncRedis, Keyspace], Awaitable[T]], *, hint: bool = False
) -> list[T]:
    """Run ``action`` on each prefix; with ``hint``, print the hint for a prefix that holds nothing."""
    import asyncio

    from relayd.connect import BRIEF, connect
    from relayd.status.prefix_hint import prefix_hints
    from store import Keyspace

    async def run() -> list[T]:
        client = await connect(settings, BRIEF)
        try:
            results = [await action(client, Keyspace(prefix)) for prefix in settings.prefix]
            if hint:
                for line in await prefix_hints(client, settings.prefix):
                    typer.echo(f"relayd: hint: {line}", err=True)
            return results
        finally:
            await client.aclose()

    return asyncio.run(run())
