"""``relayd bench``: measure the relay against the incumbent-style baseline; a table or ``--json``.

Its options are declared in ``relayd.bench.options`` (``BenchOptions``) and read
``RELAYD_BENCH_<NAME>`` (not ``RELAYD_<NAME>``): a benchmark seeds and deletes keys, so it must
never pick up a production ``RELAYD_REDIS_URL`` from the environment by accident.
Exit code 0 when every run drained everything it seeded, 1 otherwise.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

import typer

from relayd.bench.options import BenchOptions
from relayd.cli import options as o
from relayd.errors import ConfigError
from relayd.sinks.webhook.options import WebhookOptions

if TYPE_CHECKING:
    from rich.console import Console

    from relayd.envelope import Kind
    from relayd.sinks.base import SinkOptions


@o.with_options(BenchOptions, direct=True)
def bench(ctx: typer.Context, **_: object) -> None:
    """Seed throwaway backlogs, drain them with the real engine and the baseline, print the figures."""
    from rich.console import Console

    from relayd.bench.harness import DEFAULT_SINK, BenchConfig
    from relayd.bench.runner import SUITES, run_bench
    from relayd.envelope import KINDS
    from relayd.observability.logs import configure_logging

    options = o.options_from(BenchOptions, ctx)
    chosen_kinds = tuple(k.strip() for k in options.kinds.split(",") if k.strip())
    if not chosen_kinds or any(k not in KINDS for k in chosen_kinds):
        raise ConfigError(f"--kinds takes a comma-separated subset of {','.join(KINDS)}")
    suite = options.suite
    suites = SUITES if suite == "all" else tuple(s.strip() for s in suite.split(",") if s.strip())
    if not suites or any(s not in SUITES for s in suites):
        raise ConfigError(f"--suite takes a comma-separated subset of {','.join(SUITES)}, or 'all'")
    rates = _steady_rates(options.steady_rates)
    secret = None
    if options.webhook_secret_file is not None:
        from relayd.config.settings import read_secret_file

        try:
            secret = read_secret_file("--webhook-secret-file", options.webhook_secret_file).encode()
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    config = BenchConfig(
        redis_url=options.redis_url,
        sink=options.sink or DEFAULT_SINK,
        backlog=options.backlog,
        kinds=cast("tuple[Kind, ...]", chosen_kinds),
        batch=options.batch,
        baseline=options.baseline,
        repeat=options.repeat,
        suites=suites,
        scale_backlogs=(1_000, options.scale_backlog),
        timer_rate=options.timer_rate,
        timer_duration_s=options.timer_duration,
        idle_duration_s=options.idle_duration,
        wake_commits=options.wake_commits,
        steady_rates=rates,
        steady_seconds=options.steady_seconds,
        steady_warmup_s=options.steady_warmup,
        sink_options=_sink_options(options, webhook_secret=secret),
        http_server=options.http_server,
    )
    # The relay logs one line per pass at info: only warnings, so the log does not skew the figures.
    configure_logging(log_format="console", log_level="warning")
    err = Console(stderr=True)
    report = run_bench(
        config, log=(lambda _: None) if options.as_json else (lambda m: err.print(f"[dim]{m}[/dim]"))
    )
    if options.as_json:
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


def _sink_options(options: BenchOptions, *, webhook_secret: bytes | None) -> SinkOptions:
    from relayd.security.material import Fixed
    from relayd.sinks.base import SinkOptions

    own = WebhookOptions(
        secrets=Fixed((webhook_secret,)) if webhook_secret is not None else None,
        concurrency=options.webhook_concurrency,
        batch=options.webhook_batch,
    )
    return SinkOptions(own=own, output_format=options.output_format)
