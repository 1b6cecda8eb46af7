"""``relayd status``: per prefix backlog, due timers, oldest timer lag, dead letters, active replica."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from relayd.cli import options as o

if TYPE_CHECKING:
    from relayd.settings import Settings
    from relayd.status import StatusReport


async def gather_reports(settings: Settings) -> tuple[list[StatusReport], list[str]]:
    """Each prefix's report, and the hints for prefixes that hold nothing (``relayd.prefix_hint``)."""
    from relayd.connect import BRIEF, connect
    from relayd.engine.redis_time import parse_time_reply
    from relayd.prefix_hint import prefix_hints
    from relayd.status import collect_status

    client = await connect(settings, BRIEF)
    try:
        # Ages by the Redis server's clock, the one timers are due by, not this host's.
        now = parse_time_reply(await client.time())
        reports = [await collect_status(client, prefix, now=now) for prefix in settings.prefix]
        return reports, await prefix_hints(client, settings.prefix)
    finally:
        await client.aclose()


@o.with_connection_options
def status(
    ctx: typer.Context,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", envvar="RELAYD_JSON", show_envvar=True, help="One JSON document instead of a table."
        ),
    ] = False,
    **_: object,
) -> None:
    """Show per prefix: backlog of each kind, due timers, oldest timer lag, dead letters, active replica,
    and what operators paused (since when, by whom, why)."""
    import asyncio

    import orjson
    from rich.console import Console

    from relayd.status import render_pauses, render_table

    settings = o.settings_from(ctx)
    o.configure_logs(settings)
    reports, hints = asyncio.run(gather_reports(settings))
    for hint in hints:
        typer.echo(f"relayd: hint: {hint}", err=True)
    if as_json:
        typer.echo(
            orjson.dumps({"prefixes": [r.to_json() for r in reports]}, option=orjson.OPT_INDENT_2).decode()
        )
    else:
        console = Console()
        console.print(render_table(reports))
        if (pauses := render_pauses(reports)) is not None:
            console.print(pauses)


def register(app: typer.Typer) -> None:
    app.command("status")(status)
