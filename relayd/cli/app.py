"""The ``relayd`` command: the Typer app, its commands, and errors → exit codes (README.md#commands).

Exit codes: 0 all due work delivered; 1 entries left for retry or dead-lettered; 2 usage or
configuration error (one line on stderr, no traceback); 3 Redis unreachable or authentication
failed. The mapping lives here only, in ``_RelaydGroup``, so ``CliRunner`` tests and the console
script behave the same.

Typer renders ``--help`` with rich (option panels) and imports rich only to render help: a
command that runs does not load it. Adding a command is one line in ``COMMANDS``: a module with
``register(app)``. A command module declares its options and imports what its command uses when
it runs, so ``relayd --help`` and each command load only their own dependencies
(``tests/benchmarks/bench_startup.py``).
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from typer._click import Context  # Typer carries its own copy of click: its Context and errors
from typer._click.exceptions import ClickException, NoArgsIsHelpError
from typer.core import TyperGroup

from relayd import __version__
from relayd.cli import acl, bench, console, demo, dlq, pause, status, sweep
from relayd.errors import RedisUnreachable, RelaydError
from relayd.runtime.gc_tuning import skip_collection_at_exit
from relayd.runtime.lean_imports import import_structlog_without_rich


def _redis_went_away(exc: Exception) -> bool:
    """Whether ``exc`` says Redis stopped answering (a store or redis-py connection error).

    Looked up among the modules already loaded: an exception can only be of a class whose module
    ran, and importing redis-py here would cost every command, ``--help`` included, its import.
    """
    store_errors = sys.modules.get("store.errors")
    redis_errors = sys.modules.get("redis.exceptions")
    kinds: tuple[type[BaseException], ...] = (
        *((store_errors.StoreUnavailable,) if store_errors is not None else ()),
        *((redis_errors.ConnectionError, redis_errors.TimeoutError) if redis_errors is not None else ()),
    )
    return isinstance(exc, kinds)


def _fail(message: str, exit_code: int) -> typer.Exit:
    """Print one line on stderr and return the Exit carrying ``exit_code``."""
    typer.echo(f"relayd: error: {message}", err=True)
    return typer.Exit(exit_code)


def _usage_error(exc: ClickException, command_path: str) -> typer.Exit:
    """A bad flag or value: one line naming the help to read, exit 2, not Typer's boxed panel."""
    return _fail(f"{exc.format_message()} (see '{command_path} --help')", exc.exit_code)


class _RelaydGroup(TyperGroup):
    """The root group: maps every expected failure of a command to one line and an exit code."""

    def list_commands(self, ctx: Context) -> list[str]:
        """In ``COMMANDS`` order (``sweep`` first), the order of use; Typer lists groups last."""
        order = [module.__name__.rpartition(".")[2] for module in COMMANDS]
        return sorted(
            super().list_commands(ctx), key=lambda name: order.index(name) if name in order else len(order)
        )

    def make_context(
        self, info_name: str | None, args: list[str], parent: Context | None = None, **extra: Any
    ) -> Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except NoArgsIsHelpError:
            raise  # ``relayd`` alone: its help, exit 2
        except ClickException as exc:
            raise _usage_error(exc, info_name or "relayd") from None

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except RelaydError as exc:
            raise _fail(str(exc), exc.exit_code) from None
        except NoArgsIsHelpError:
            raise  # ``relayd dlq`` alone: its help, exit 2, as ``relayd`` alone
        except ClickException as exc:
            path = f"{ctx.command_path} {ctx.invoked_subcommand or ''}".strip()
            raise _usage_error(exc, path) from None
        except Exception as exc:
            if not _redis_went_away(exc):
                raise
            # Redis went away after the first PING answered: still "unreachable", exit 3.
            error = RedisUnreachable(f"Redis became unreachable ({type(exc).__name__})")
            raise _fail(str(error), error.exit_code) from None


app = typer.Typer(
    name="relayd",
    cls=_RelaydGroup,
    help="Relay a durable statechart engine's outbox, spawn intents and timers from Redis to sinks.",
    no_args_is_help=True,
    add_completion=False,
    # Tracebacks with locals could print a password; plain tracebacks only, for real bugs.
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"relayd {__version__}")
        raise typer.Exit


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Relay a durable statechart engine's outbox, spawn intents and timers from Redis to sinks."""
    # Runs before any command (not for the root's own --help): the commands log through structlog.
    import_structlog_without_rich()


#: Each module registers the command (or group) of its own name; a new command is one line here.
COMMANDS = (sweep, status, pause, dlq, acl, demo, bench, console)
for command in COMMANDS:
    command.register(app)


def main(argv: list[str] | None = None) -> None:
    """The ``relayd`` console script."""
    skip_collection_at_exit()
    app(args=argv, prog_name="relayd")
