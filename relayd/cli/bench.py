"""``relayd bench``: measure the relay against the incumbent-style baseline; a table or ``--json``.

Options read ``RELAYD_BENCH_<NAME>`` (not ``RELAYD_<NAME>``): a benchmark seeds and deletes keys,
so it must never pick up a production ``RELAYD_REDIS_URL`` from the environment by accident.
Exit code 0 when every run drained everything it seeded, 1 otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import typer

from relayd.engine.options import TuningOptions
from relayd.errors import ConfigError
from relayd.sinks.options import FormatOptions
from relayd.sinks.webhook.options import WebhookOptions

if TYPE_CHECKING:
    from rich.console import Console

    from relayd.envelope import Kind
    from relayd.sinks.base import SinkOptions


def _opt(variable: str, help_text: str, **extra: Any) -> Any:
    """A bench option read from ``RELAYD_BENCH_<variable>``, its default shown."""
    return typer.Option(
        envvar=f"RELAYD_BENCH_{variable}", show_envvar=True, show_default=True, help=help_text, **extra
    )


def bench(  # noqa: PLR0917 - Typer passes one keyword per option
    redis_url: Annotated[
        str | None,
        _opt(
            "REDIS_URL",
            "Redis to benchmark on (default: a throwaway redis-server on a free loopback "
            "port if one is on PATH, else the embedded fakeredis).",
        ),
    ] = None,
    sink: Annotated[
        str | None,
        _opt(
            "SINK",
            "Sink spec ('null', 'jsonl:PATH', 'redis-stream:URL?stream=NAME', 'webhook:URL'); "
            "'{prefix}', '{redis_url}' and '{tmpdir}' are filled in, 'webhook:local' is an HTTP server "
            "the bench starts on loopback. Default: one trimmed stream on the same Redis.",
        ),
    ] = None,
    http_server: Annotated[
        str, _opt("HTTP_SERVER", "The server behind 'webhook:local': aiohttp or uvicorn.")
    ] = "aiohttp",
    webhook_secret_file: Annotated[
        Path | None, _opt("WEBHOOK_SECRET_FILE", "Sign webhook requests with this file's key.")
    ] = None,
    webhook_concurrency: Annotated[
        int, _opt("WEBHOOK_CONCURRENCY", "Webhook requests in flight (sink and baseline).", min=1)
    ] = WebhookOptions().concurrency,
    webhook_batch: Annotated[
        int,
        _opt(
            "WEBHOOK_BATCH",
            "Most envelopes in one webhook request of the relay (the baseline posts one each).",
            min=1,
        ),
    ] = WebhookOptions().batch,
    output_format: Annotated[
        Literal["relayd", "cloudevents"],
        typer.Option(
            "--format",
            envvar="RELAYD_BENCH_FORMAT",
            show_envvar=True,
            show_default=True,
            help="What the relay's sink sends: the relayd/1 envelope or CloudEvents.",
        ),
    ] = FormatOptions().format,
    backlog: Annotated[int, _opt("BACKLOG", "Entries seeded per kind.", min=1)] = 100_000,
    kinds: Annotated[str, _opt("KINDS", "Kinds to drain, comma-separated.")] = "outbox,spawn,timer",
    batch: Annotated[
        int, _opt("BATCH", "Entries per read and per sink call.", min=1)
    ] = TuningOptions().batch,
    baseline: Annotated[
        bool, _opt("BASELINE", "Also drain an identical backlog the incumbent's way.")
    ] = True,
    repeat: Annotated[
        int,
        _opt(
            "REPEAT",
            "Relay drains per kind (and client-baseline runs, alternating); medians reported.",
            min=1,
        ),
    ] = 1,
    suite: Annotated[
        str, _opt("SUITE", "drain, scale, timers, idle, wake, steady (comma-separated) or all.")
    ] = "drain",
    scale_backlog: Annotated[
        int, _opt("SCALE_BACKLOG", "The large backlog of the scale suite.", min=1000)
    ] = 1_000_000,
    timer_duration: Annotated[float, _opt("TIMER_DURATION", "Seconds of the timers suite.", min=1.0)] = 30.0,
    timer_rate: Annotated[int, _opt("TIMER_RATE", "Timers due per second.", min=1)] = 10_000,
    idle_duration: Annotated[float, _opt("IDLE_DURATION", "Seconds of the idle suite.", min=1.0)] = 10.0,
    wake_commits: Annotated[
        int, _opt("WAKE_COMMITS", "Single commits per run of the wake suite.", min=1)
    ] = 20,
    steady_rates: Annotated[
        str, _opt("STEADY_RATES", "Commits per second of the steady suite's runs, comma-separated.")
    ] = "1000,5000,20000",
    steady_seconds: Annotated[
        float, _opt("STEADY_SECONDS", "Measured seconds per rate of the steady suite.", min=0.5)
    ] = 8.0,
    steady_warmup: Annotated[
        float, _opt("STEADY_WARMUP", "Unmeasured seconds before each steady run.", min=0.0)
    ] = 2.0,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            envvar="RELAYD_BENCH_JSON",
            show_envvar=True,
            help="Print one JSON document instead of tables.",
        ),
    ] = False,
) -> None:
    """Seed throwaway backlogs, drain them with the real engine and the baseline, print the figures."""
    from rich.console import Console

    from relayd.bench.harness import DEFAULT_SINK, BenchConfig
    from relayd.bench.runner import SUITES, run_bench
    from relayd.envelope import KINDS
    from relayd.observability.logs import configure_logging

    chosen_kinds = tuple(k.strip() for k in kinds.split(",") if k.strip())
    if not chosen_kinds or any(k not in KINDS for k in chosen_kinds):
        raise ConfigError(f"--kinds takes a comma-separated subset of {','.join(KINDS)}")
    suites = SUITES if suite == "all" else tuple(s.strip() for s in suite.split(",") if s.strip())
    if not suites or any(s not in SUITES for s in suites):
        raise ConfigError(f"--suite takes a comma-separated subset of {','.join(SUITES)}, or 'all'")
    rates = _steady_rates(steady_rates)
    secret = None
    if webhook_secret_file is not None:
        from relayd.config.settings import read_secret_file

        try:
            secret = read_secret_file("--webhook-secret-file", webhook_secret_file).encode()
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    config = BenchConfig(
        redis_url=redis_url,
        sink=sink or DEFAULT_SINK,
        backlog=backlog,
        kinds=cast("tuple[Kind, ...]", chosen_kinds),
        batch=batch,
        baseline=baseline,
        repeat=repeat,
        suites=suites,
        scale_backlogs=(1_000, scale_backlog),
        timer_rate=timer_rate,
        timer_duration_s=timer_duration,
        idle_duration_s=idle_duration,
        wake_commits=wake_commits,
        steady_rates=rates,
        steady_seconds=steady_seconds,
        steady_warmup_s=steady_warmup,
        sink_options=_sink_options(
            webhook_secret=secret,
            webhook_concurrency=webhook_concurrency,
            webhook_batch=webhook_batch,
            output_format=output_format,
        ),
        http_server=http_server,
    )
    # The relay logs one line per pass at info: only warnings, so the log does not skew the figures.
    configure_logging(log_format="console", log_level="warning")
    err = Console(stderr=True)
    report = run_bench(config, log=(lambda _: None) if as_json else (lambda m: err.print(f"[dim]{m}[/dim]")))
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        render(report, Console())
    raise typer.Exit(1 if report["problems"] else 0)


def _steady_rates(text: str) -> tuple[int, ...]:
    """``--steady-rates``: positive integers, comma-separated."""
    try:
        rates = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        rates = ()
    if not rates or min(rates) < 1:
        raise ConfigError("--steady-rates takes commits per second, comma-separated (e.g. 1000,5000)")
    return rates


def _fmt(value: Any, digits: int = 1, scale: float = 1.0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float | int):
        return f"{value * scale:,.{digits}f}"
    return str(value)


def render(report: dict[str, Any], console: Console) -> None:
    """Print the report as rich tables."""
    from rich.table import Table

    console.print(
        f"Redis: {report['redis']} (hiredis: {report['hiredis']}), backlog {report['backlog']:,} "
        f"per kind, batch {report['batch']}, sink {report['sink']}"
    )
    if "kinds" in report:
        _render_drain(report["kinds"], console)
    if "scale" in report:
        scale = report["scale"]
        table = Table(title=f"scale: per-pass cost (batch {scale['batch']})")
        for column in ("backlog", "median pass ms", "p99 pass ms", "entries/s", "peak RSS MB"):
            table.add_column(column, justify="right")
        for fig in scale.values():
            if isinstance(fig, dict):  # one per backlog, beside the batch and the ratio
                table.add_row(
                    f"{fig['backlog']:,}",
                    _fmt(fig["median_pass_s"], 2, 1000),
                    _fmt(fig["p99_pass_s"], 2, 1000),
                    _fmt(fig["entries_per_s"], 0),
                    _fmt(fig["peak_rss_mb"], 0),
                )
        console.print(table)
        console.print(f"pass cost large/small: {_fmt(scale['pass_cost_ratio'], 2)}x")
    if "timers" in report:
        t = report["timers"]
        console.print(
            f"timers: {t['rate_per_s']:,}/s for {t['entries'] / t['rate_per_s']:.0f}s: delivered "
            f"{t['delivered']:,}, lag p50 {_fmt(t['p50_latency_s'], 1, 1000)} ms, p99 "
            f"{_fmt(t['p99_latency_s'], 1, 1000)} ms (bound {t['p99_bound_s'] * 1000:.0f} ms: "
            f"{'ok' if t['p99_within_bound'] else 'MISSED'})"
        )
    if "idle" in report:
        i = report["idle"]
        console.print(
            f"idle: {_fmt(i['commands_per_s'], 2)} Redis commands/s, CPU {_fmt(i['cpu_share'], 2, 100)}% "
            f"of a core at poll interval {i['poll_interval_s']}s"
        )
    _render_wake(report.get("wake"), console)
    _render_steady(report.get("steady"), console)
    for problem in report["problems"]:
        console.print(f"[red]problem: {problem}[/red]")


def _render_wake(w: dict[str, Any] | None, console: Console) -> None:
    if w is None:
        return
    for mode in ("on", "off"):
        fig = w[mode]
        console.print(
            f"wake {mode}: {fig['delivered']}/{w['commits']} single commits to an idle relay, "
            f"commit-to-delivery p50 {_fmt(fig['p50_latency_s'], 1, 1000)} ms, p99 "
            f"{_fmt(fig['p99_latency_s'], 1, 1000)} ms (poll interval {w['poll_interval_s']}s"
            f"{'' if w['notifications'] else '; the server publishes no keyspace events'})"
        )


def _render_steady(steady: dict[str, Any] | None, console: Console) -> None:
    from rich.table import Table

    if steady is None:
        return
    polled = "" if steady["notifications"] else "; no keyspace events: the relay polled"
    table = Table(
        title=f"steady: a writer at each rate, {steady['seconds']:g} s measured after "
        f"{steady['warmup_s']:g} s{polled}"
    )
    for column in (
        "commits/s",
        "delivered",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "relay CPU %",
        "CPU us/entry",
        "Redis CPU %",
        "entries/pass",
    ):
        table.add_column(column, justify="right")
    for row in steady["rates"]:
        delivered = (
            "all"
            if row["delivered"] == row["committed"] and not row["duplicates"]
            else (f"{row['delivered']:,}/{row['committed']:,}")
        )
        table.add_row(
            f"{row['rate_per_s']:,}",
            delivered,
            *(_fmt(row[key], 1) for key in ("p50_ms", "p90_ms", "p99_ms", "max_ms", "relay_cpu_pct")),
            _fmt(row["relay_cpu_us_per_entry"], 0),
            _fmt(row["redis_cpu_pct"], 1),
            _fmt(row["entries_per_pass"], 1),
        )
    console.print(table)


def _render_drain(kinds: list[dict[str, Any]], console: Console) -> None:
    """The drain table: relay and baseline per kind, and each relay drain with ``--repeat``."""
    from rich.table import Table

    table = Table(title="relayd bench: drain")
    for column in (
        "kind",
        "method",
        "entries/s",
        "p50 ms",
        "p99 ms",
        "cmds/entry",
        "CPU s",
        "Redis CPU s",
        "peak RSS MB",
        "CPU us/entry",
    ):
        table.add_column(column, justify="left" if column in ("kind", "method") else "right")
    table.add_column("ratio", justify="right")
    for row in kinds:
        for method in ("relay", "baseline"):
            fig = row.get(method)
            if fig is None:
                continue
            table.add_row(
                row["kind"],
                method,
                _fmt(fig["entries_per_s"], 0),
                _fmt(fig["p50_latency_s"], 1, 1000),
                _fmt(fig["p99_latency_s"], 1, 1000),
                _fmt(fig["commands_per_entry"], 2),
                _fmt(fig["cpu_s"], 2),
                _fmt(fig["redis_cpu_s"], 2),
                _fmt(fig["peak_rss_mb"], 0),
                _fmt(fig.get("cpu_per_entry_us"), 1),
                f"{row['speedup']:.2f}x" if method == "relay" and row.get("speedup") else "",
            )
    console.print(table)
    for row in kinds:
        if "baseline_by" in row:
            console.print(f"{row['kind']}: baseline = {row['baseline_by']}; ratio = relay rate / its rate")
        if "relay_entries_per_s" in row:
            rates = ", ".join(f"{rate:,.0f}" for rate in row["relay_entries_per_s"])
            console.print(f"{row['kind']}: relay drains in order {rates} entries/s (the median is above)")
        if "baseline_entries_per_s" in row:
            rates = ", ".join(f"{rate:,.0f}" for rate in row["baseline_entries_per_s"])
            console.print(f"{row['kind']}: baseline runs in order {rates} entries/s (the median is above)")


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)


def _sink_options(
    *, webhook_secret: bytes | None, webhook_concurrency: int, webhook_batch: int, output_format: str
) -> SinkOptions:
    from relayd.security.material import Fixed
    from relayd.sinks.base import SinkOptions

    own = WebhookOptions(
        secrets=Fixed((webhook_secret,)) if webhook_secret is not None else None,
        concurrency=webhook_concurrency,
        batch=webhook_batch,
    )
    return SinkOptions(own=own, output_format="cloudevents" if output_format == "cloudevents" else "relayd")
