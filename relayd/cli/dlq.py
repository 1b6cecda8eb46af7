"""``relayd dlq list|replay|purge``: inspect, put back or drop the dead letters of each prefix."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from relayd.cli import options as o
from relayd.cli.operator import per_prefix
from relayd.errors import ConfigError

if TYPE_CHECKING:
    from rich.table import Table

    from relayd.connect import AsyncRedis
    from relayd.envelope import Kind
    from store import Keyspace


dlq_app = typer.Typer(name="dlq", help="List, replay or purge dead letters.", no_args_is_help=True)

KindOption = Annotated[
    str | None,
    typer.Option(envvar="RELAYD_KIND", show_envvar=True, help="Only this kind: outbox, spawn or timer."),
]
JsonOption = Annotated[
    bool, typer.Option("--json", envvar="RELAYD_JSON", show_envvar=True, help="JSON instead of a table.")
]


def _check_kind(kind: str | None) -> Kind | None:
    from relayd.envelope import KINDS

    if kind is None:
        return None
    if kind not in KINDS:
        raise ConfigError(f"invalid --kind {kind!r}; expected one of {', '.join(KINDS)}")
    return kind


async def _audit(
    client: AsyncRedis,
    keyspace: Keyspace,
    action: str,
    count: int,
    *,
    kind: Kind | None,
    ids: Sequence[str] = (),
) -> None:
    """Record a change made from the command line in the prefix's audit trail (the console's
    Audit page): what, how many, the equivalent command and who (``cli:user@host``)."""
    from relayd.cli.operator import operator
    from relayd.console.actions import AUDIT_IDS
    from relayd.console.commands import purge_command, replay_command
    from relayd.console.filters import DeadLetterFilter
    from relayd.state.audit import AuditRecord, record_action
    from relayd.state.pauses import redis_now

    if count == 0:
        return
    wanted = DeadLetterFilter(kind=kind)
    command = (
        replay_command(keyspace.prefix, wanted, ids)
        if action == "replay"
        else purge_command(keyspace.prefix, wanted)
    )
    record = AuditRecord(
        at=await redis_now(client),
        action=action,
        filter=wanted.as_record(),
        count=count,
        command=command,
        source=operator(),
        ids=list(ids[:AUDIT_IDS]),
    )
    await record_action(client, keyspace, record)


def _as_dict(letter: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(letter) and not isinstance(letter, type):
        return dataclasses.asdict(letter)
    if hasattr(letter, "model_dump"):
        return dict(letter.model_dump(mode="json"))
    return dict(letter)


def utc_time(epoch_s: object) -> str:
    """An epoch time as the tables show it (``2026-01-02 03:04:05 UTC``); ``-`` when not a number."""
    if not isinstance(epoch_s, int | float):
        return "-"
    return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def dead_letter_table(rows: Sequence[dict[str, Any]]) -> Table:
    """The dead letters as a table, each id whole on one line while the terminal is wide enough.

    Ids are copied into ``dlq replay``: the table is drawn without side borders, the other columns
    wrap first, and every cell folds onto the next line rather than ending in an ellipsis.
    """
    from rich import box
    from rich.table import Table

    table = Table(
        title="dead letters", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True
    )
    for column in ("prefix", "kind", "id", "reason", "attempts", "first attempt", "last attempt"):
        table.add_column(column, overflow="fold", no_wrap=column == "id")
    for row in rows:
        code, text = str(row["reason_code"]), str(row.get("reason") or "")
        # A malformed entry's reason already opens with its code: shown once, not twice.
        reason = text if text.startswith(f"{code}:") else f"{code}: {text}" if text else code
        table.add_row(
            str(row["prefix"]),
            str(row["kind"]),
            str(row["id"]),
            reason,
            str(row["attempts"]),
            utc_time(row.get("first_attempt_at")),
            utc_time(row.get("last_attempt_at")),
        )
    return table


@dlq_app.command("list")
@o.with_connection_options
def list_(ctx: typer.Context, as_json: JsonOption = False, kind: KindOption = None, **_: object) -> None:
    """List the dead letters: id, kind, reason, attempts and attempt times."""
    from relayd.state.deadletters import list_dead_letters

    settings = o.settings_from(ctx)
    o.configure_logs(settings)
    only = _check_kind(kind)

    async def action(client: AsyncRedis, keyspace: Keyspace) -> list[dict[str, Any]]:
        letters = await list_dead_letters(client, keyspace, kind=only)
        return [{"prefix": keyspace.prefix, **_as_dict(letter)} for letter in letters]

    rows = [row for rows in per_prefix(settings, action, hint=True) for row in rows]
    if as_json:
        import orjson

        typer.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2, default=str).decode())
    else:
        from rich.console import Console

        Console().print(dead_letter_table(rows))


@dlq_app.command("replay")
@o.with_connection_options
def replay(
    ctx: typer.Context,
    ids: Annotated[
        list[str] | None, typer.Argument(metavar="IDS", help="Dead-letter ids to replay.", show_default=False)
    ] = None,
    replay_all: Annotated[bool, typer.Option("--all", help="Replay every dead letter.")] = False,
    kind: KindOption = None,
    **_: object,
) -> None:
    """Put dead letters back (outbox and spawns under a new seq, timers at their score), attempts reset.

    An id that is a dead letter of no prefix, or one that cannot go back (its place is taken, or
    its timer's execution committed since: it stays parked), is named on stderr and the exit code
    is 1; the others are replayed all the same.
    """
    from relayd.state.deadletters import Replayed, replay

    only = _check_kind(kind)
    if only is not None and not ids:
        replay_all = True  # every dead letter of that kind
    if not ids and not replay_all:
        raise ConfigError("name the dead-letter ids to replay, or pass --all or --kind")
    if ids and replay_all:
        raise ConfigError("pass either dead-letter ids or --all, not both")
    settings = o.settings_from(ctx)
    o.configure_logs(settings)
    named = None if replay_all else list(dict.fromkeys(ids or ()))

    async def each(client: AsyncRedis, keyspace: Keyspace) -> Replayed:
        done = await replay(client, keyspace, named, kind=only)
        put_back = [i for i in named or () if i in done.parked and i not in done.kept]
        await _audit(client, keyspace, "replay", done.count, kind=only, ids=put_back)
        return done

    outcomes = per_prefix(settings, each)
    typer.echo(f"replayed {sum(done.count for done in outcomes)} dead letter(s)")
    failed = False
    kept = [i for done in outcomes for i in done.kept]
    if kept:
        typer.echo(
            "relayd: not replayed, their place is taken or their execution moved on (still parked): "
            + " ".join(kept),
            err=True,
        )
        failed = True
    found = set().union(*(done.parked for done in outcomes))
    unknown = [i for i in named or () if i not in found]
    if unknown:
        where = f"{only} " if only else ""
        typer.echo(
            f"relayd: not a {where}dead letter of {', '.join(settings.prefix)}: {' '.join(unknown)}", err=True
        )
        failed = True
    if failed:
        raise typer.Exit(1)


@dlq_app.command("purge")
@o.with_connection_options
def purge(
    ctx: typer.Context,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: dead letters are deleted for good.")] = False,
    kind: KindOption = None,
    **_: object,
) -> None:
    """Delete dead letters for good (requires --yes)."""
    from relayd.state.deadletters import purge_dead_letters

    if not yes:
        raise ConfigError("purge deletes dead letters for good; pass --yes to confirm")
    settings = o.settings_from(ctx)
    o.configure_logs(settings)
    only = _check_kind(kind)

    async def action(client: AsyncRedis, keyspace: Keyspace) -> int:
        count = int(await purge_dead_letters(client, keyspace, kind=only))
        await _audit(client, keyspace, "purge", count, kind=only)
        return count

    count = sum(per_prefix(settings, action))
    typer.echo(f"purged {count} dead letter(s)")


def register(app: typer.Typer) -> None:
    app.add_typer(dlq_app)
