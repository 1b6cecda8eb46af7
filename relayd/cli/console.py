"""``relayd console``: the operator web console on its own listener (docs/console.md#security)."""

from __future__ import annotations

import typer

from relayd.cli import options as o
from relayd.console.options import ConsoleServeOptions
from relayd.errors import ConfigError
from relayd.extras import install_command


@o.with_connection_options
@o.with_options(ConsoleServeOptions)
def console(ctx: typer.Context, **_: object) -> None:
    """Serve the web console: backlog, dead letters, timers; replay and purge with --allow-actions."""
    try:
        from relayd.console.server import ConsoleOptions, serve_console
    except ImportError as exc:
        missing = exc.name
        raise ConfigError(f"the console needs its extra: {install_command('console')} ({missing})") from None
    import asyncio

    from relayd.connect import BRIEF, build_client, connect
    from relayd.observability.logs import redact_also
    from relayd.security.watch import MaterialWatch

    settings = o.settings_from(ctx)
    o.configure_logs(settings)
    options = ConsoleOptions.from_settings(settings)

    # the Redis files are re-read as the relay's are; serve_console adds the token file
    watch = MaterialWatch(settings.watched_files())
    watch.on_reload(lambda: redact_also(settings.secrets()))

    async def run() -> None:
        client = await connect(settings, BRIEF, client_factory=lambda s: build_client(s, watch=watch))
        try:
            await serve_console(
                client, options, redis_display=settings.redis.display, announce=typer.echo, watch=watch
            )
        finally:
            await client.aclose()

    asyncio.run(run())


def register(app: typer.Typer) -> None:
    app.command("console")(console)
