"""Serve the console with uvicorn on its own listener (never the metrics one), until SIGINT/SIGTERM."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import structlog

from relayd.config.redis_url import is_loopback
from relayd.config.settings import Settings
from relayd.console.actions import ActionRunner
from relayd.console.app import build_app
from relayd.console.poller import OverviewPoller
from relayd.console.security import Access, check_listen_address, load_token, watch_token
from relayd.console.state import ConsoleState
from relayd.errors import ListenerUnavailable
from relayd.security.watch import MaterialWatch
from relayd.state import RedisClient

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ConsoleOptions:
    """The console's own options, checked (docs/console.md#security) before anything listens."""

    host: str
    port: int
    prefixes: tuple[str, ...]
    allow_actions: bool
    token_file: Path | None
    replay_rate_per_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> ConsoleOptions:
        host, port = settings.console_host_port
        check_listen_address(host, settings.console_token_file)
        return cls(
            host=host,
            port=port,
            prefixes=settings.prefix,
            allow_actions=settings.allow_actions,
            token_file=settings.console_token_file,
            replay_rate_per_s=settings.console_replay_rate,
        )


def _quiet_server_class() -> type[Any]:
    import uvicorn

    class QuietServer(uvicorn.Server):
        """uvicorn's server, minus re-raising SIGINT/SIGTERM once it has shut down gracefully.

        uvicorn re-raises the signal so a wrapping program stops too; here the console is the
        program, and a console stopped on purpose exits 0, as ``relayd sweep`` does.
        """

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return QuietServer


def allowed_hosts(listen_host: str) -> list[str]:
    """The Host names a loopback console answers to (all names when it listens beyond loopback,
    where the token guards every page)."""
    if not is_loopback(listen_host):
        return ["*"]
    return sorted({"127.0.0.1", "localhost", "::1", "[::1]", listen_host})


def bind(host: str, port: int) -> socket.socket:
    """Bind the listening socket first, so port 0 works and the address printed is the real one.

    Raises ``ListenerUnavailable`` when the address cannot be bound (a busy port, say).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ListenerUnavailable("console", host, port, exc) from None
    sock.set_inheritable(True)
    return sock


async def serve_console(
    client: RedisClient,
    options: ConsoleOptions,
    *,
    redis_display: str,
    announce: Callable[[str], None],
    watch: MaterialWatch | None = None,
) -> None:
    """Serve until uvicorn is told to stop (SIGINT/SIGTERM); ``announce`` prints the address once.

    ``watch`` (the Redis files' ``MaterialWatch``) is run here, with the token file added.
    """
    import asyncio

    import uvicorn

    watched = watch_token(options.token_file) if options.token_file is not None else None
    token, generated = (
        (watched.value, False) if watched else load_token(None, allow_actions=options.allow_actions)
    )
    access = Access(token=token, allow_actions=options.allow_actions)
    watch = watch or MaterialWatch([])
    if watched is not None:
        watch.add(watched)
        watch.on_reload(lambda: access.rotate(watched.value))
    stop_watching = asyncio.Event()
    watching = asyncio.create_task(watch.run(stop_watching))
    poller = OverviewPoller(client, options.prefixes)
    runner = ActionRunner(client, rate_per_s=options.replay_rate_per_s)
    state = ConsoleState(options.prefixes, client, access, poller, runner, redis_display)
    app = build_app(
        state, static_dir=str(files("relayd.console") / "static"), allowed_hosts=allowed_hosts(options.host)
    )
    sock = bind(options.host, options.port)
    host, port = sock.getsockname()[:2]
    shown_host = f"[{host}]" if ":" in host else host
    mode = "actions enabled" if options.allow_actions else "read-only"
    announce(f"relayd console: http://{shown_host}:{port}/ ({mode})")
    if generated and token is not None:
        # Printed on the terminal once (never logged): the operator signs in with it.
        announce(f"relayd console: this run's access token: {token}")
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", server_header=False)
    server = _quiet_server_class()(config)
    try:
        await server.serve(sockets=[sock])
    finally:
        stop_watching.set()
        await watching
        await poller.close()
        await runner.wait_idle()
        sock.close()
    log.info("console_stopped")
