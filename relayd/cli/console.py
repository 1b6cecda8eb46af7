"""``relayd console``: the operator web console on its own listener (DESIGN §10)."""

from __future__ import annotations

import typer

from relayd.cli import options as o
from relayd.errors import ConfigError


def console(
    ctx: typer.Context,
    console_addr: o.ConsoleAddr = None,
    console_token_file: o.ConsoleTokenFile = None,
    allow_actions: o.AllowActions = False,
    console_replay_rate: o.ConsoleReplayRate = None,
) -> None:
    """Serve the web console: backlog, dead letters, timers; replay and purge with --allow-actions."""
    try:
        from relayd.console.server import ConsoleOptions, serve_console
    except ImportError as exc:
        missing = exc.name
        raise ConfigError(f"the console needs its extra: pip install 'relayd[console]' ({missing})") from None
    import asyncio

    from relayd.connect import BRIEF, connect

    settings = o.settings_from(ctx)
    o.configure_logs(settings)
    options = ConsoleOptions.from_settings(settings)

    async def run() -> None:
        client = await connect(settings, BRIEF)
        try:
            await serve_console(client, options, redis_display=settings.redis.display, announce=typer.echo)
        finally:
            await client.aclose()

    asyncio.run(run())


def register(app: typer.Typer) -> None:
    app.command("console")(o.with_connection_options(console))
