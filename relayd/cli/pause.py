"""``relayd pause`` and ``relayd resume``: hold back a prefix, a kind, a sink or a target, and let
it go again (docs/runbook.md#pausing-during-an-incident).

The pause is stored under ``P:relay:pauses`` of each prefix (``relayd.state.pauses``), so every
replica obeys it within half a second and it outlives restarts and takeovers; each change goes
to the prefix's audit trail, the one the console's Audit page shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from relayd.cli import options as o
from relayd.errors import ConfigError

if TYPE_CHECKING:
    from relayd.config.settings import Settings
    from relayd.connect import AsyncRedis
    from relayd.state.pauses import Pause
    from store import Keyspace

KindSelector = Annotated[
    str | None, typer.Option("--kind", help="Only this kind: outbox, spawn or timer.", show_default=False)
]
SinkSelector = Annotated[
    str | None,
    typer.Option(
        "--sink",
        help="Only the kinds delivering to this sink (its name: webhook, kafka, ...).",
        show_default=False,
    ),
]
TargetSelector = Annotated[
    str | None,
    typer.Option(
        "--target",
        help="Only this target (ordering key): its entries wait, the rest flow.",
        show_default=False,
    ),
]
ReasonOption = Annotated[
    str, typer.Option("--reason", help="Why (shown in status, the console and the audit).")
]


def chosen_scope(kind: str | None, sink: str | None, target: str | None, *, reason: str = "") -> Pause:
    """The selectors checked: one clear ``ConfigError`` (exit 2) for a bad one."""
    from relayd.envelope import KINDS
    from relayd.sinks.registry import known_sinks
    from relayd.state.pauses import MAX_REASON, Pause

    if kind is not None and kind not in KINDS:
        raise ConfigError(f"invalid --kind {kind!r}; expected one of {', '.join(KINDS)}")
    if sink is not None:
        # A sink's name, or its guard's when two kinds' sinks share one (``outbox+spawn:webhook``).
        name = sink.rpartition(":")[2]
        if name not in known_sinks():
            raise ConfigError(f"unknown --sink {sink!r}; known: {', '.join(known_sinks())}")
    if target is not None and not target.strip():
        raise ConfigError("--target cannot be empty")
    if len(reason) > MAX_REASON:
        raise ConfigError(f"--reason is {len(reason)} characters; at most {MAX_REASON}")
    return Pause(kind=kind, sink=sink, target=target, reason=reason)


def _command(verb: str, prefix: str, scope: Pause) -> str:
    """The equivalent command line, for the audit trail."""
    import shlex

    words = ["relayd", verb, "--prefix", prefix]
    for name, value in scope.selectors().items():
        words += [f"--{name}", value]
    if verb == "pause":
        words += ["--reason", scope.reason]
    return shlex.join(words)


async def _unserved(settings: Settings) -> list[str]:
    """The prefixes no relayd serves: neither a member registry nor a lease under ``P:relay:``."""
    from relayd.connect import BRIEF, connect
    from relayd.state.keys import RelayKeys
    from relayd.state.members import MEMBERS_SUFFIX
    from store import Keyspace

    client = await connect(settings, BRIEF)
    try:
        missing = []
        for prefix in settings.prefix:
            keyspace = Keyspace(prefix)
            if not await client.exists(keyspace.relay(MEMBERS_SUFFIX), RelayKeys(keyspace).lease):
                missing.append(prefix)
        return missing
    finally:
        await client.aclose()


@o.with_connection_options
def pause(
    ctx: typer.Context,
    reason: ReasonOption,
    kind: KindSelector = None,
    sink: SinkSelector = None,
    target: TargetSelector = None,
    **_: object,
) -> None:
    """Hold back deliveries of each prefix, or of one kind, sink or target in it, until resumed.

    Nothing paused is attempted: no attempt is charged and nothing is dead-lettered. A paused
    target holds back only its own entries. /readyz stays ready.
    """
    import asyncio

    from relayd.cli.operator import operator, per_prefix
    from relayd.state.pauses import pause as store_pause

    if not reason.strip():
        raise ConfigError("--reason cannot be empty: say why, for the operator who finds the pause")
    scope = chosen_scope(kind, sink, target, reason=reason.strip())
    scope = type(scope)(scope.kind, scope.sink, scope.target, 0.0, operator(), scope.reason)
    settings = o.settings_from(ctx)
    o.configure_logs(settings)
    unserved = asyncio.run(_unserved(settings))
    if unserved:
        raise ConfigError(
            f"no relayd serves prefix {', '.join(map(repr, unserved))} (no member nor lease under its "
            "':relay:' keys); check --prefix"
        )

    async def action(client: AsyncRedis, keyspace: Keyspace) -> Pause:
        return await store_pause(
            client,
            keyspace,
            scope,
            command=_command("pause", keyspace.prefix, scope),
            source=scope.by,
        )

    for prefix, stored in zip(settings.prefix, per_prefix(settings, action), strict=True):
        typer.echo(f"paused {prefix}: {stored.describe()} ({stored.reason})")


@o.with_connection_options
def resume(
    ctx: typer.Context,
    kind: KindSelector = None,
    sink: SinkSelector = None,
    target: TargetSelector = None,
    **_: object,
) -> None:
    """Lift the pause given with the same selectors; what it held is delivered in order.

    A prefix with no such pause is named on stderr and the exit code is 1.
    """
    from relayd.cli.operator import operator, per_prefix
    from relayd.state.pauses import resume as store_resume

    scope = chosen_scope(kind, sink, target)
    by = operator()
    settings = o.settings_from(ctx)
    o.configure_logs(settings)

    async def action(client: AsyncRedis, keyspace: Keyspace) -> bool:
        return await store_resume(
            client,
            keyspace,
            scope,
            command=_command("resume", keyspace.prefix, scope),
            source=by,
        )

    missing = []
    for prefix, resumed in zip(settings.prefix, per_prefix(settings, action), strict=True):
        if resumed:
            typer.echo(f"resumed {prefix}: {scope.describe()}")
        else:
            missing.append(prefix)
    if missing:
        typer.echo(f"relayd: not paused in {', '.join(missing)}: {scope.describe()}", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("pause")(pause)
    app.command("resume")(resume)
