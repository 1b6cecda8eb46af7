"""A real RabbitMQ node (Debian's ``rabbitmq-server``) on free loopback ports, for the AMQP tests.

The recipe (docs/development.md): as root and without systemd the ``/usr/sbin`` wrapper switches user, so
the node is started from ``/usr/lib/rabbitmq/bin/rabbitmq-server`` directly, with everything
private to one directory (``HOME`` for the Erlang cookie, Mnesia, logs, config, an empty
plugin list) and its own ``epmd`` on a private loopback port, so nothing touches the machine's
own RabbitMQ or another test worker's. A node takes seconds to boot, so tests
share one per session and isolate by exchange and queue names.

``stop()`` and ``start()`` keep the data directory, so durable exchanges, queues, bindings and
persistent messages survive a restart, as on a real broker. Ready means the AMQP listener
answers a protocol header with ``Connection.Start`` (``rabbitmqctl await_startup`` costs seconds
of CPU per call; the handshake answers only once the node is up).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support.binaries import require_binaries
from support.ports import port_free
from support.processes import end_process
from support.tls import Pki, make_pki

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
#: ``rabbitmqctl`` listens on 35672-35682 (its own Erlang node): the AMQP port stays below.
PORT_RANGE = (23000, 32000)
#: AMQP 0-9-1 protocol header; a ready broker answers it with a Connection.Start method frame.
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
BOOT_TIMEOUT_S = 90.0
CONFIG = """\
loopback_users = none
disk_free_limit.absolute = 1MB
vm_memory_high_watermark.relative = 0.9
listeners.ssl.default = {tls_port}
ssl_options.cacertfile = {pki.ca_cert}
ssl_options.certfile = {pki.server_cert}
ssl_options.keyfile = {pki.server_key}
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
"""


def _free_ports(count: int, rng: random.Random) -> list[int]:
    chosen: list[int] = []
    while len(chosen) < count:
        port = rng.randrange(*PORT_RANGE)
        if port not in chosen and port_free(port):
            chosen.append(port)
    return chosen


def answers_amqp(port: int, timeout_s: float = 1.0) -> bool:
    """Whether an AMQP broker on ``127.0.0.1:port`` answers the protocol header with Connection.Start."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(PROTOCOL_HEADER)
            frame = sock.recv(7)
    except OSError:
        return False
    return frame[:1] == b"\x01"  # a method frame on channel 0


@dataclass
class RabbitServer:
    """One RabbitMQ node with its own epmd, data under ``dir``; stoppable and restartable."""

    dir: Path
    port: int = 0
    tls_port: int = 0
    dist_port: int = 0
    epmd_port: int = 0
    node: str = field(default_factory=lambda: f"relayd{os.getpid()}x{random.randrange(10**6)}@localhost")
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    epmd: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"amqp://guest@127.0.0.1:{self.port}/"

    @property
    def tls_url(self) -> str:
        """``amqps://`` on the TLS listener, whose certificate names 127.0.0.1 (``pki.ca_cert`` signs it)."""
        return f"amqps://guest@127.0.0.1:{self.tls_port}/"

    @property
    def pki(self) -> Pki:
        return pki_of(self.dir / "pki")

    def _env(self) -> dict[str, str]:
        interface = "-kernel inet_dist_use_interface {127,0,0,1}"
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))},
            "HOME": str(self.dir / "home"),
            "RABBITMQ_CONF_ENV_FILE": str(self.dir / "rabbitmq-env.conf"),
            "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.dir / "log"),
            "RABBITMQ_CONFIG_FILE": str(self.dir / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "enabled_plugins"),
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": interface,
            "RABBITMQ_CTL_ERL_ARGS": interface,
        }

    def _prepare(self) -> None:
        for sub in ("home", "mnesia", "log"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        (self.dir / "rabbitmq-env.conf").touch()
        (self.dir / "enabled_plugins").write_text("[].\n")
        if not self.port:
            self.port, self.tls_port, self.dist_port, self.epmd_port = _free_ports(4, random.Random())
            (self.dir / "pki").mkdir()
            make_pki(self.dir / "pki", now=dt.datetime.now(dt.UTC))
        (self.dir / "rabbitmq.conf").write_text(CONFIG.format(tls_port=self.tls_port, pki=self.pki))

    def start(self) -> None:
        """Start epmd (once) and the node; return when it answers AMQP. Fails the test otherwise."""
        self._prepare()
        if self.epmd is None:
            self.epmd = subprocess.Popen(
                ["epmd", "-address", "127.0.0.1", "-port", str(self.epmd_port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        with (self.dir / "server.out").open("ab") as out:
            self.proc = subprocess.Popen(
                [SERVER], env=self._env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while not answers_amqp(self.port):
            if self.proc.poll() is not None:
                tail = (self.dir / "server.out").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"rabbitmq-server exited with {self.proc.returncode}: {tail}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"rabbitmq-server did not answer on {self.port} in {BOOT_TIMEOUT_S:.0f}s")
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM the node (a clean shutdown: persistent messages are on disk) and reap it."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        # the script's sh and the Erlang VM share the session we gave them: end both
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def ctl(self, *args: str, timeout_s: float = 60.0) -> str:
        """Run ``rabbitmqctl ARGS`` against this node (users, passwords, connections); its stdout."""
        done = subprocess.run(
            [CTL, "-n", self.node, *args],
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        assert done.returncode == 0, f"rabbitmqctl {args[0]} failed: {done.stderr[-500:]}"
        return done.stdout

    def cleanup(self) -> None:
        """Stop the node and epmd and remove the data directory."""
        self.stop()
        end_process(self.epmd)
        self.epmd = None
        shutil.rmtree(self.dir, ignore_errors=True)


def pki_of(directory: Path) -> Pki:
    """The paths ``make_pki`` wrote into ``directory``."""
    names = ("ca.crt", "server.crt", "server.key", "client.crt", "client.key", "wrong-ca.crt")
    return Pki(directory, *(directory / name for name in names))


def require_rabbitmq() -> None:
    """Skip (a failure under ``CI``) when RabbitMQ or epmd is not installed."""
    require_binaries("epmd")
    if not os.access(SERVER, os.X_OK):
        pytest.skip(f"{SERVER} not installed (scripts/install-system-packages.sh installs rabbitmq-server)")


def start_rabbitmq() -> RabbitServer:
    """Start a fresh RabbitMQ node on free loopback ports (the caller cleans it up)."""
    require_rabbitmq()
    server = RabbitServer(dir=Path(tempfile.mkdtemp(prefix="relayd-rabbit-")))
    try:
        server.start()
    except BaseException:
        server.cleanup()
        raise
    return server


@dataclass(frozen=True, slots=True)
class Received:
    """One message as a consumer got it."""

    body: bytes
    message_id: str | None
    content_type: str | None
    delivery_mode: int | None
    type: str | None
    routing_key: str
    headers: dict[str, object] = field(default_factory=dict)


async def declare(url: str, exchange: str, bindings: dict[str, str]) -> None:
    """Declare a durable topic ``exchange`` and durable queues bound to it (``{queue: binding key}``)."""
    import aiormq

    connection = await aiormq.connect(_with_guest_password(url))
    try:
        channel = await connection.channel()
        await channel.exchange_declare(exchange, exchange_type="topic", durable=True)
        for queue, binding in bindings.items():
            await channel.queue_declare(queue, durable=True)
            await channel.queue_bind(queue, exchange, routing_key=binding)
    finally:
        await connection.close()


async def drain(url: str, queue: str, *, limit: int | None = None) -> list[Received]:
    """Take every message now in ``queue`` (at most ``limit``), in queue order (basic.get, no ack)."""
    import aiormq

    connection = await aiormq.connect(_with_guest_password(url))
    got: list[Received] = []
    try:
        channel = await connection.channel()
        while limit is None or len(got) < limit:
            message = await channel.basic_get(queue, no_ack=True)
            if message.delivery_tag is None:  # Basic.GetEmpty
                return got
            props = message.header.properties
            got.append(
                Received(
                    body=message.body,
                    message_id=props.message_id,
                    content_type=props.content_type,
                    delivery_mode=props.delivery_mode,
                    type=props.message_type,
                    routing_key=message.routing_key or "",
                    headers=dict(props.headers or {}),
                )
            )
        return got
    finally:
        await connection.close()


def _with_guest_password(url: str) -> str:
    return url.replace("guest@", "guest:guest@", 1)
