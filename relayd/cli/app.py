"""The ``relayd`` command: the click group, its commands, and errors → exit codes (DESIGN §5).

Exit codes: 0 all due work delivered; 1 entries left for retry or dead-lettered; 2 usage or
configuration error (one line on stderr, no traceback); 3 Redis unreachable or authentication
failed. The mapping lives here only, in ``_RelaydGroup.invoke``, so ``CliRunner`` tests and the
console script behave the same.

The commands are click commands declared through rich-click, which renders ``--help`` with rich
(option panels) but imports rich only to render help or a usage error: a command that runs loads
click alone. Adding a command is one line in ``COMMANDS``: a module with ``register(app)``. A
command module declares its options and imports what its command uses when it runs, so
``relayd --help`` and each command load only their own dependencies
(``tests/benchmarks/bench_startup.py``).
"""

from __future__ import annotations

import sys
from typing import Any

import rich_click as click
from click.exceptions import Exit, NoArgsIsHelpError

from relayd import __version__
from relayd.cli import acl, bench, console, demo, dlq, status, sweep
from relayd.cli import options as o
from relayd.cli.ordered import OrderedGroup
from relayd.errors import RedisUnreachable, RelaydError
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


def _fail(message: str, exit_code: int) -> Exit:
    """Print one line on stderr and return the Exit carrying ``exit_code``."""
    click.echo(f"relayd: error: {message}", err=True)
    return Exit(exit_code)


class _RelaydGroup(OrderedGroup):
    """The root group: maps every expected failure of a subcommand to one line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except RelaydError as exc:
            raise _fail(str(exc), exc.exit_code) from None
        except NoArgsIsHelpError:
            raise  # ``relayd dlq`` alone: its help, exit 2, as ``relayd`` alone
        except click.ClickException as exc:
            # A usage error in a subcommand (bad flag or value): one line, exit 2, not a boxed panel.
            hint = f" (see '{ctx.command_path} {ctx.invoked_subcommand or ''} --help')".replace("  ", " ")
            raise _fail(exc.format_message() + hint, exc.exit_code) from None
        except Exception as exc:
            if not _redis_went_away(exc):
                raise
            # Redis went away after the first PING answered: still "unreachable", exit 3.
            error = RedisUnreachable(f"Redis became unreachable ({type(exc).__name__})")
            raise _fail(str(error), error.exit_code) from None


def _version(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if value:
        click.echo(f"relayd {__version__}")
        ctx.exit()


@click.group(
    "relayd",
    cls=_RelaydGroup,
    no_args_is_help=True,
    context_settings={
        "help_option_names": ["-h", "--help"],
        # Every option with a default shows it, as the commands' own options expect.
        "show_default": True,
    },
)
@o.in_panels
@click.option(
    "--version", is_flag=True, expose_value=False, is_eager=True, callback=_version, help="Print the version."
)
def app() -> None:
    """Relay a durable statechart engine's outbox, spawn intents and timers from Redis to sinks."""
    # Runs before any command (not for the root's own --help): the commands log through structlog.
    import_structlog_without_rich()


#: Each module registers its own command (or group); a new command is one line here.
COMMANDS = (sweep, status, dlq, acl, demo, bench, console)
for command in COMMANDS:
    command.register(app)


def main(argv: list[str] | None = None) -> None:
    """The ``relayd`` console script."""
    app.main(args=argv, prog_name="relayd")
