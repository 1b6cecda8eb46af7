"""``relayd demo``: the relay on an embedded in-process Redis with a generated workload."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from relayd.cli import options as o

if TYPE_CHECKING:
    from relayd.config.settings import Settings


@o.LOG_LEVEL
@o.CONSOLE_ADDR
def demo(
    ctx: typer.Context,
    duration: Annotated[
        float,
        typer.Option(
            min=3.0,
            max=3600.0,
            envvar="RELAYD_DEMO_DURATION",
            show_envvar=True,
            help="Seconds the workload runs before the demo stops.",
        ),
    ] = 10.0,
    metrics_addr: Annotated[
        str,
        typer.Option(
            # Its own variable: RELAYD_METRICS_ADDR is set to 0.0.0.0:9464 in containers.
            envvar="RELAYD_DEMO_METRICS_ADDR",
            show_envvar=True,
            help="HOST:PORT for /metrics during the demo (port 0: any free port).",
        ),
    ] = "127.0.0.1:0",
    console: Annotated[
        bool,
        typer.Option(
            "--console",
            envvar="RELAYD_DEMO_CONSOLE",
            show_envvar=True,
            help="Open the web console on the demo (with malformed entries and a failing target); "
            "runs until Ctrl-C. Needs the console extra.",
        ),
    ] = False,
    log_level: str | None = None,
    **_: object,
) -> None:
    """Run relayd against an embedded Redis while a generated workload commits; print a summary."""
    from relayd.config.host_port import parse_host_port
    from relayd.demo.run import run_demo
    from relayd.observability.logs import configure_logging

    try:
        host, port = parse_host_port(metrics_addr)
    except ValueError as exc:
        from relayd.errors import ConfigError

        raise ConfigError(f"invalid --metrics-addr: {exc}") from None
    settings = o.settings_from(ctx)
    if console:
        # The console shows every dead letter; the terminal keeps to errors.
        configure_logging(log_format=settings.log_format, log_level=log_level or "error")
        raise typer.Exit(_run_with_console(settings, duration))
    # The live display owns the terminal; only warnings go to the log.
    configure_logging(log_format=settings.log_format, log_level=log_level or "warning")
    raise typer.Exit(run_demo(duration_s=duration, host=host, port=port))


def _run_with_console(settings: Settings, duration: float) -> int:
    from relayd.errors import ConfigError
    from relayd.extras import install_command

    try:
        from relayd.console.server import ConsoleOptions
        from relayd.demo.console import run_demo_console
    except ImportError as exc:
        missing = exc.name
        raise ConfigError(f"--console needs the extra: {install_command('console')} ({missing})") from None
    return run_demo_console(ConsoleOptions.from_settings(settings), duration_s=duration, announce=typer.echo)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
