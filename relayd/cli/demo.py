"""``relayd demo``: the relay on an embedded in-process Redis with a generated workload."""

from __future__ import annotations

from typing import Annotated

import typer

from relayd.cli import options as o


def demo(
    ctx: typer.Context,
    duration: Annotated[
        float,
        typer.Option(
            "--duration",
            envvar="RELAYD_DEMO_DURATION",
            show_envvar=True,
            min=3.0,
            max=3600.0,
            help="Seconds the workload runs before the demo stops.",
        ),
    ] = 10.0,
    metrics_addr: Annotated[
        str,
        typer.Option(
            "--metrics-addr",
            # Its own variable: RELAYD_METRICS_ADDR is set to 0.0.0.0:9464 in containers.
            envvar="RELAYD_DEMO_METRICS_ADDR",
            show_envvar=True,
            help="HOST:PORT for /metrics during the demo (port 0: any free port).",
        ),
    ] = "127.0.0.1:0",
    log_level: o.LogLevel = None,
) -> None:
    """Run relayd against an embedded Redis while a generated workload commits; print a summary."""
    from relayd.demo.run import run_demo
    from relayd.logs import configure_logging
    from relayd.settings import parse_host_port

    try:
        host, port = parse_host_port(metrics_addr)
    except ValueError as exc:
        from relayd.errors import ConfigError

        raise ConfigError(f"invalid --metrics-addr: {exc}") from None
    settings = o.settings_from(ctx)
    # The live display owns the terminal; only warnings go to the log.
    configure_logging(log_format=settings.log_format, log_level=log_level or "warning")
    raise typer.Exit(run_demo(duration_s=duration, host=host, port=port))


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
