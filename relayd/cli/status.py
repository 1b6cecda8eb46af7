"""``relayd status``: per prefix backlog, due timers, oldest timer lag, dead letters, active replica,
pauses; with ``--retrying``, the entries held in backoff now (``relayd.status.retrying``), page by page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from relayd.cli import options as o

if TYPE_CHECKING:
    from rich.table import Table

    from relayd.config.settings import Settings
    from relayd.status.report import StatusReport
    from relayd.status.retrying import RetryingEntry


async def gather_reports(settings: Settings) -> tuple[list[StatusReport], list[str]]:
    """Each prefix's report, and the hints for prefixes that hold nothing (``relayd.status.prefix_hint``)."""
    from relayd.connect import BRIEF, connect
    from relayd.engine.redis_time import parse_time_reply
    from relayd.status.prefix_hint import prefix_hints
    from relayd.status.report import collect_status

    client = await connect(settings, BRIEF)
    try:
        # Ages by the Redis server's clock, the one timers are due by, not this host's.
        now = parse_time_reply(await client.time())
        reports = [await collect_status(client, prefix, now=now) for prefix in settings.prefix]
        return reports, await prefix_hints(client, settings.prefix)
    finally:
        await client.aclose()


async def gather_retrying(
    settings: Settings, token: str | None, limit: int
) -> tuple[list[RetryingEntry], str | None, float]:
    """One page of entries in backoff across the prefixes, the token of the next page, and the
    Redis server's time (the clock the next attempts are set by).

    The token is ``N:kind:cursor``: the index of the prefix in ``--prefix``, then the prefix's own
    page token (``relayd.status.retrying``).
    """
    from relayd.connect import BRIEF, connect
    from relayd.engine.redis_time import parse_time_reply
    from relayd.errors import ConfigError
    from relayd.status.retrying import PageTokenInvalid, read_retrying
    from store import Keyspace

    index, _, own = (token or "0:").partition(":")
    if not index.isdigit() or int(index) >= len(settings.prefix):
        raise ConfigError(f"invalid --page {token!r}; pass the token a previous page printed")
    client = await connect(settings, BRIEF)
    try:
        now = parse_time_reply(await client.time())
        entries: list[RetryingEntry] = []
        at = int(index)
        while at < len(settings.prefix) and len(entries) < limit:
            try:
                page = await read_retrying(client, Keyspace(settings.prefix[at]), own or None, limit=limit)
            except PageTokenInvalid as exc:
                raise ConfigError(
                    f"invalid --page {token!r}; pass the token a previous page printed"
                ) from exc
            entries += page.entries
            if page.next_token is not None:
                return entries, f"{at}:{page.next_token}", now
            at, own = at + 1, ""
        return entries, None if at >= len(settings.prefix) else f"{at}:", now
    finally:
        await client.aclose()


def retrying_table(entries: list[RetryingEntry], now: float) -> Table:
    """The entries in backoff, one row each; ids and keys whole (folded, never cut)."""
    from rich import box
    from rich.table import Table

    from relayd.cli.dlq import utc_time

    table = Table(
        title="retrying", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True
    )
    for column in (
        "prefix",
        "kind",
        "id",
        "key",
        "attempts",
        "first attempt",
        "last attempt",
        "next in",
        "last error",
    ):
        table.add_column(column, overflow="fold", no_wrap=column == "id")
    for e in entries:
        next_in = "-" if e.next_attempt_at is None else f"{max(0.0, e.next_attempt_at - now):.1f}s"
        table.add_row(
            e.prefix,
            e.kind,
            e.id,
            e.key or "-",
            str(e.attempts),
            utc_time(e.first_attempt_at),
            utc_time(e.last_attempt_at),
            next_in,
            e.last_error or "-",
        )
    return table


@o.with_connection_options
def status(
    ctx: typer.Context,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", envvar="RELAYD_JSON", show_envvar=True, help="One JSON document instead of a table."
        ),
    ] = False,
    retrying: Annotated[
        bool,
        typer.Option(
            "--retrying",
            help="List the entries held in backoff now: attempts, last error, next attempt (paged).",
        ),
    ] = False,
    limit: Annotated[
        int,
        typer.Option("--limit", min=1, max=10_000, help="With --retrying: about this many entries a page."),
    ] = 50,
    page: Annotated[
        str | None,
        typer.Option(
            "--page", help="With --retrying: the token a previous page printed.", show_default=False
        ),
    ] = None,
    **_: object,
) -> None:
    """Show per prefix: backlog of each kind, due timers, oldest timer lag, dead letters, active replica,
    each sink's breaker, last error and retries, and what operators paused (since when, by whom, why)."""
    import asyncio

    import orjson
    from rich.console import Console

    from relayd.status.report import render_pauses, render_sinks, render_table

    settings = o.settings_from(ctx)
    o.configure_logs(settings)
    if retrying or page is not None:
        _show_retrying(settings, as_json=as_json, limit=limit, token=page)
        return
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
        for extra in (render_sinks(reports), render_pauses(reports)):
            if extra is not None:
                console.print(extra)


def register(app: typer.Typer) -> None:
    app.command("status")(status)


def _show_retrying(settings: Settings, *, as_json: bool, limit: int, token: str | None) -> None:
    import asyncio

    import orjson
    from rich.console import Console

    entries, next_token, now = asyncio.run(gather_retrying(settings, token, limit))
    if as_json:
        doc = {"retrying": [e.to_json() for e in entries], "next_page": next_token}
        typer.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        return
    Console().print(retrying_table(entries, now))
    if next_token is not None:
        typer.echo(f"more: relayd status --retrying --page {next_token}")
