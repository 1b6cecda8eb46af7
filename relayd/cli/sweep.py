"""``relayd sweep [--once]``: resolve sinks, connect, serve HTTP, run the relay until stopped.

Signals: the first SIGTERM or SIGINT sets the stop event (no new reads; in-flight deliveries
get ``--shutdown-grace``; what was delivered is acked; leases released; exit 0); a second one
exits at once with code 1. ``--once`` serves no HTTP: a one-shot job is not scraped.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

import typer

from relayd.cli import options as o

if TYPE_CHECKING:
    import asyncio

    from relayd.envelope import Kind
    from relayd.settings import Settings
    from relayd.sinks import Sink

#: Exit code when a second signal cuts the shutdown short.
FORCED_EXIT_CODE = 1


def resolve_sinks(settings: Settings) -> dict[Kind, Sink]:
    """One sink per distinct spec, shared by the kinds that name it (validated before connecting)."""
    from relayd.sinks import resolve_sink

    by_spec: dict[str, Sink] = {}
    options = settings.sink_options()
    sinks: dict[Kind, Sink] = {}
    for kind, spec in settings.sink_specs().items():
        if spec not in by_spec:
            by_spec[spec] = resolve_sink(spec, options)
        sinks[kind] = by_spec[spec]  # type: ignore[index]  # keys of sink_specs() are the three kinds
    return sinks


def install_signal_handlers(stop: asyncio.Event) -> None:
    import asyncio

    import structlog

    log = structlog.get_logger(__name__)
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            log.warning("shutdown_forced", signal=signal.Signals(signum).name)
            os._exit(FORCED_EXIT_CODE)
        log.info("shutdown_requested", signal=signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)


async def run_sweep(settings: Settings, *, once: bool, sinks: Mapping[Kind, Sink]) -> int:
    """Connect, serve HTTP (unless ``once``), run the relay; return the exit code."""
    import asyncio

    import structlog
    from prometheus_client import CollectorRegistry

    from relayd.connect import BRIEF, FOREVER, connect
    from relayd.engine.loop import run_relay
    from relayd.health import Health
    from relayd.metrics import RelayMetrics

    stop = asyncio.Event()
    install_signal_handlers(stop)
    registry = CollectorRegistry()
    metrics = RelayMetrics(registry)
    health = Health(sentinel_service=settings.redis.service)
    server = None
    if not once:
        from relayd.http import serve_http  # a one-shot job serves no HTTP: no server to load

        host, port = settings.metrics_host_port
        server = serve_http(host, port, registry, health)
        structlog.get_logger(__name__).info("http_serving", url=f"http://{host}:{server.port}/metrics")
    try:
        client = await connect(
            settings, BRIEF if once else FOREVER, stop=stop, on_failure=health.redis_failed
        )
        try:
            summary = await run_relay(
                settings.sweep_options(once=once),
                redis=client,
                sinks=sinks,
                metrics=metrics,
                health=health,
                stop=stop,
            )
        finally:
            await client.aclose()
    finally:
        if server is not None:
            server.close()
    return int(summary.exit_code)


def sweep(  # noqa: PLR0917 - Typer builds one option per parameter
    ctx: typer.Context,
    once: Annotated[
        bool,
        typer.Option(
            "--once",
            envvar="RELAYD_ONCE",
            show_envvar=True,
            help="One bounded pass: deliver everything due now, then exit.",
        ),
    ] = False,
    sink: o.Sink = None,
    outbox_sink: o.OutboxSink = None,
    spawn_sink: o.SpawnSink = None,
    timer_sink: o.TimerSink = None,
    batch: o.Batch = None,
    poll_interval: o.PollInterval = None,
    max_attempts: o.MaxAttempts = None,
    retry_base: o.RetryBase = None,
    retry_cap: o.RetryCap = None,
    lease_ttl: o.LeaseTtl = None,
    wake: o.Wake = None,
    shutdown_grace: o.ShutdownGrace = None,
    metrics_addr: o.MetricsAddr = None,
    webhook_secret_file: o.WebhookSecretFile = None,
    webhook_timeout: o.WebhookTimeout = None,
    webhook_concurrency: o.WebhookConcurrency = None,
    webhook_connect_timeout: o.WebhookConnectTimeout = None,
    webhook_read_timeout: o.WebhookReadTimeout = None,
    webhook_headers_file: o.WebhookHeadersFile = None,
    webhook_gzip: o.WebhookGzip = False,
    webhook_ca_file: o.WebhookCaFile = None,
    amqp_password_file: o.AmqpPasswordFile = None,
    amqp_ca_file: o.AmqpCaFile = None,
    kafka_username_file: o.KafkaUsernameFile = None,
    kafka_password_file: o.KafkaPasswordFile = None,
    kafka_sasl_mechanism: o.KafkaSaslMechanism = None,
    kafka_ca_file: o.KafkaCaFile = None,
    nats_creds_file: o.NatsCredsFile = None,
    nats_token_file: o.NatsTokenFile = None,
    nats_ca_file: o.NatsCaFile = None,
) -> None:
    """Deliver outbox events, spawn intents and due timers to the sinks; ack what they confirmed."""
    import asyncio

    settings = o.settings_from(ctx)
    o.configure_logs(settings)
    sinks = resolve_sinks(settings)
    code = asyncio.run(run_sweep(settings, once=once, sinks=sinks))
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("sweep")(o.with_connection_options(sweep))
