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
from relayd.engine.options import PacingOptions, TuningOptions
from relayd.observability.options import EventsOptions, ServeOptions
from relayd.sinks.options import FormatOptions, SinkChoice

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

    from prometheus_client import CollectorRegistry

    from relayd.config.settings import Settings
    from relayd.engine.redis_time import RedisClock
    from relayd.envelope import Kind
    from relayd.observability.health import Health
    from relayd.observability.http import HttpHandle
    from relayd.security.watch import MaterialWatch
    from relayd.sinks import Sink

#: Exit code when a second signal cuts the shutdown short.
FORCED_EXIT_CODE = 1


def resolve_sinks(
    settings: Settings,
    *,
    check_material: Callable[[], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> dict[Kind, Sink]:
    """One sink per distinct spec, shared by the kinds that name it (validated before connecting).

    ``check_material`` lets a sink have the watched files read again at once (``MaterialWatch``);
    ``clock`` is the relay's epoch clock (Redis's), for what sinks stamp (signature timestamps).
    """
    import dataclasses

    from relayd.sinks import resolve_sink

    by_spec: dict[str, Sink] = {}
    options = dataclasses.replace(settings.sink_options(), check_material=check_material, clock=clock)
    sinks: dict[Kind, Sink] = {}
    for kind, spec in settings.sink_specs().items():
        if spec not in by_spec:
            by_spec[spec] = resolve_sink(spec, options)
        sinks[kind] = by_spec[spec]  # type: ignore[index]  # keys of sink_specs() are the three kinds
    for sink in by_spec.values():
        # A sink may refuse kinds it cannot relay correctly (the harel sink's spawns without
        # machine definitions): one ConfigError line, before anything connects.
        check_kinds = getattr(sink, "check_kinds", None)
        if callable(check_kinds):
            check_kinds({kind for kind, of in sinks.items() if of is sink})
    return sinks


def resolve_events_sink(settings: Settings) -> Sink | None:
    """The ``--events-sink`` (relayd's own format whatever ``--format`` says: the body is the event)."""
    import dataclasses

    from relayd.sinks import resolve_sink

    if settings.events_sink is None:
        return None
    return resolve_sink(
        settings.events_sink, dataclasses.replace(settings.sink_options(), output_format="relayd")
    )


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


def register_sink_metrics(sinks: Mapping[Kind, Sink], registry: CollectorRegistry) -> None:
    """Let each sink that has series of its own register them, once per sink."""
    for sink in {id(sink): sink for sink in sinks.values()}.values():
        register_metrics = getattr(sink, "register_metrics", None)
        if callable(register_metrics):
            register_metrics(registry)


def _health(settings: Settings, watch: MaterialWatch) -> Health:
    """The probes' state, watching sink calls that overrun and secret files that fail to load."""
    import functools

    from relayd.observability.health import Health
    from relayd.observability.inflight import DELIVERIES
    from relayd.observability.logs import redact_also

    health = Health(sentinel_service=settings.redis.service)
    health.watch_deliveries(functools.partial(DELIVERIES.overruns, grace_s=settings.hung_sink_grace))
    watch.on_reload(lambda: redact_also(settings.secrets()))
    health.watch_material(watch.problems)
    return health


def _serve_http(settings: Settings, registry: CollectorRegistry, health: Health) -> HttpHandle:
    """Serve ``/metrics``, ``/healthz`` and ``/readyz`` on ``--metrics-addr``."""
    import structlog

    from relayd.observability.http import serve_http

    host, port = settings.metrics_host_port
    server = serve_http(host, port, registry, health)
    structlog.get_logger(__name__).info("http_serving", url=f"http://{host}:{server.port}/metrics")
    return server


async def run_sweep(
    settings: Settings,
    *,
    once: bool,
    sinks: Mapping[Kind, Sink],
    registry: CollectorRegistry,
    watch: MaterialWatch,
    clock: RedisClock | None = None,
    events_sink: Sink | None = None,
) -> int:
    """Connect, serve HTTP (unless ``once``), run the relay; return the exit code.

    ``events_sink``: where the operational events go (``relayd.observability.events``), when configured.

    ``watch`` checks ``settings.watched_files()`` and counts in ``registry`` (made before the
    sinks, which may ask it for a check at once).
    """
    import asyncio

    import structlog

    from relayd.connect import BRIEF, FOREVER, build_client, connect
    from relayd.engine.loop import run_relay
    from relayd.engine.shutdown import ShutdownDeadline
    from relayd.errors import RedisUnreachable
    from relayd.observability import events
    from relayd.observability.heartbeat import heartbeat
    from relayd.observability.metrics import RelayMetrics
    from relayd.status.prefix_hint import prefix_hints

    stop = asyncio.Event()
    install_signal_handlers(stop)
    metrics = RelayMetrics(registry)
    register_sink_metrics(sinks, registry)
    emitter = None if events_sink is None else events.OperationalEvents(events_sink, metrics.events)
    events.install(emitter)
    health = _health(settings, watch)
    watching = asyncio.create_task(watch.run(stop))
    server = None if once else _serve_http(settings, registry, health)  # a one-shot job serves none
    shutdown = ShutdownDeadline(stop, settings.shutdown_grace)
    try:
        async with heartbeat(health):
            try:
                client = await connect(
                    settings,
                    BRIEF if once else FOREVER,
                    stop=stop,
                    on_failure=health.redis_failed,
                    client_factory=lambda s: build_client(s, watch=watch),
                )
            except RedisUnreachable as exc:
                if once or not stop.is_set():
                    raise
                # Stopped before Redis ever answered: nothing was read, so nothing is left
                # half done; a stop is a clean exit (README.md#commands).
                structlog.get_logger(__name__).info("stopped_before_connecting", error=str(exc))
                return 0
            try:
                for hint in await prefix_hints(client, settings.prefix):
                    structlog.get_logger(__name__).warning("prefix_empty", hint=hint)
                summary = await run_relay(
                    settings.sweep_options(once=once),
                    redis=client,
                    sinks=sinks,
                    metrics=metrics,
                    health=health,
                    stop=stop,
                    shutdown=shutdown,
                    clock=clock,
                )
            finally:
                async with shutdown.bounded("closing the Redis connection"):
                    await client.aclose()
    finally:
        watching.cancel()
        if server is not None:
            server.close()
        events.install(None)
        if emitter is not None:
            await emitter.close()
    # A long run stopped by a signal settled its work: 0, whatever it dead-lettered on the way
    # (the dead letters are counted and listed; ``--once`` reports them in its exit code).
    return int(summary.exit_code) if once else 0


@o.with_connection_options
@o.with_options(SinkChoice, TuningOptions, ServeOptions)
@o.with_sink_own_options
@o.with_options(FormatOptions)
@o.SINK_OPTION
@o.with_options(PacingOptions, EventsOptions)
def sweep(
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
    **_: object,
) -> None:
    """Deliver outbox events, spawn intents and due timers to the sinks; ack what they confirmed."""
    import asyncio

    from prometheus_client import CollectorRegistry

    from relayd.engine.redis_time import RedisClock
    from relayd.observability.logs import redact_also
    from relayd.observability.tracing.setup import start_tracing
    from relayd.security.watch import MaterialWatch

    settings = o.settings_from(ctx)
    o.configure_logs(settings)
    registry = CollectorRegistry()
    watch = MaterialWatch((), registry=registry)
    clock = RedisClock()  # measured against Redis once connected; the sinks stamp with it too
    sinks = resolve_sinks(settings, check_material=watch.check_now, clock=clock.now)
    events_sink = resolve_events_sink(settings)
    # Every file once the sinks are resolved: a plugin's own options (its files, its secrets)
    # are loaded as its sink resolves, the built-ins' with the settings.
    for watched in settings.watched_files():
        watch.add(watched)
    redact_also(settings.secrets())
    stop_tracing = start_tracing()  # delivery spans, when the OTEL_* variables ask for them
    try:
        code = asyncio.run(
            run_sweep(
                settings,
                once=once,
                sinks=sinks,
                registry=registry,
                watch=watch,
                clock=clock,
                events_sink=events_sink,
            )
        )
    finally:
        if stop_tracing is not None:
            stop_tracing()  # exports what is pending
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep)
