"""``relayd status``: per prefix backlog, due timers, oldest timer lag, dead letters, active replica."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

import orjson
import typer
from rich.console import Console

from relayd.cli import options as o
from relayd.connect import BRIEF, connect
from relayd.settings import Settings
from relayd.status import StatusReport, collect_status, render_table


async def gather_reports(settings: Settings) -> list[StatusReport]:
    client = await connect(settings, BRIEF)
    try:
        now = time.time()
        return [await collect_status(client, prefix, now=now) for prefix in settings.prefix]
    finally:
        await client.aclose()


def status(
    ctx: typer.Context,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", envvar="RELAYD_JSON", show_envvar=True, help="One JSON document instead of a table."
        ),
    ] = False,
) -> None:
    """Show per prefix: backlog of each kind, due timers, oldest timer lag, dead letters, active replica."""
    settings = o.settings_from(ctx)
    o.configure_logs(settings)
    reports = asyncio.run(gather_reports(settings))
    if as_json:
        typer.echo(
            orjson.dumps({"prefixes": [r.to_json() for r in reports]}, option=orjson.OPT_INDENT_2).decode()
        )
    else:
        Console().print(render_table(reports))


def register(app: typer.Typer) -> None:
    app.command("status")(o.with_connection_options(status))
