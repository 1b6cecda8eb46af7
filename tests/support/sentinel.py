"""A Redis Sentinel deployment of real processes on loopback: a master, a replica, three sentinels.

``SentinelDeployment`` starts ``redis-server`` twice (the replica with ``--replicaof``) and
``redis-server <conf> --sentinel`` three times on free loopback ports, each sentinel monitoring
the master as ``SERVICE`` with a quorum of two. Timeouts are short (``DOWN_AFTER_MS``,
``FAILOVER_TIMEOUT_MS``) so a SIGKILLed master is replaced within seconds. ``start`` returns once
every sentinel sees the replica and the two other sentinels, which is what a failover needs.

With ``pki`` (``support.tls.make_pki``) every process speaks TLS only (``tls-replication``
between them too), for ``rediss+sentinel://``.

Every data node gets the same ``extra_args`` (e.g. ``notify-keyspace-events``): a replica's
configuration is not replicated, so the promoted one must have it from the start.
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import redis

from support.binaries import require_binaries
from support.ports import pick_ports
from support.processes import end_process
from support.redis_server import RedisServer
from support.tls import Pki

#: The master's name the sentinels know.
SERVICE = "relaymaster"
#: How long a master may be silent before a sentinel thinks it down, in milliseconds.
DOWN_AFTER_MS = 800
#: Sentinel's failover timeout, in milliseconds (also how long before a failed try is retried).
FAILOVER_TIMEOUT_MS = 3000
SENTINELS = 3
QUORUM = 2


@dataclass
class Sentinel:
    """One ``redis-server --sentinel`` process."""

    port: int
    conf: Path
    password: str | None = None
    pki: Pki | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", str(self.conf), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(
            port=self.port, socket_timeout=1.0, password=self.password, **tls_options(self.pki), **kwargs
        )

    def stop(self) -> None:
        end_process(self.proc)
        self.proc = None


def tls_options(pki: Pki | None) -> dict[str, Any]:
    """redis-py options of a client verifying the test CA (none without ``pki``)."""
    return {} if pki is None else {"ssl": True, "ssl_ca_certs": str(pki.ca_cert)}


def tls_args(pki: Pki, port: int) -> tuple[str, ...]:
    """redis-server options serving TLS only on ``port``, and replicating over TLS."""
    return (
        "--port", "0", "--tls-port", str(port),
        "--tls-cert-file", str(pki.server_cert), "--tls-key-file", str(pki.server_key),
        "--tls-ca-cert-file", str(pki.ca_cert), "--tls-auth-clients", "optional", "--tls-replication", "yes",
        # outgoing links (replication, sentinel to server) present the client certificate:
        # the server one is for serverAuth only
        "--tls-client-cert-file", str(pki.client_cert), "--tls-client-key-file", str(pki.client_key),
    )  # fmt: skip


@dataclass
class TlsRedisNode(RedisServer):
    """A ``RedisServer`` that serves TLS only on ``port``."""

    pki: Pki | None = None

    def start(self) -> None:
        assert self.pki is not None
        argv = [
            "redis-server", *tls_args(self.pki, self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(self.dir), "--loglevel", "warning", *self.args,
        ]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            client = self.client(socket_timeout=0.5)
            try:
                client.ping()
                return
            except redis.AuthenticationError:
                return
            except (redis.ConnectionError, OSError):
                time.sleep(0.02)
            finally:
                client.close()
        raise RuntimeError(f"TLS redis-server did not start on port {self.port}")

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(port=self.port, **tls_options(self.pki), **kwargs)


@dataclass
class SentinelDeployment:
    """A master, a replica and three sentinels; use as a context manager."""

    extra_args: Sequence[str] = ()
    #: ``requirepass`` of the master and the replica (and the sentinels' ``auth-pass``)
    master_password: str | None = None
    #: ``requirepass`` of the sentinels (and their ``sentinel-pass`` to one another)
    sentinel_password: str | None = None
    #: TLS everywhere (``rediss+sentinel://``) with this PKI
    pki: Pki | None = None
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="relayd-sentinel-")))
    master: RedisServer | None = None
    replica: RedisServer | None = None
    sentinels: list[Sentinel] = field(default_factory=list)

    def __enter__(self) -> SentinelDeployment:
        try:
            self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()

    @property
    def sentinel_nodes(self) -> str:
        """``127.0.0.1:P1,127.0.0.1:P2,...`` for a ``redis+sentinel://`` URL."""
        return ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)

    def url(self, db: int = 0, *, service: str = SERVICE, credentials: str = "") -> str:
        """``redis+sentinel://[credentials@]sentinels/service/db``."""
        userinfo = f"{credentials}@" if credentials else ""
        scheme = "rediss+sentinel" if self.pki is not None else "redis+sentinel"
        return f"{scheme}://{userinfo}{self.sentinel_nodes}/{service}/{db}"

    def master_client(self, **kwargs: Any) -> redis.Redis:
        """A direct client of the current master (with its password)."""
        assert self.master is not None
        return self.master.client(password=self.master_password, **kwargs)

    def start(self) -> None:
        require_binaries("redis-server")
        ports = pick_ports(2 + SENTINELS, random.Random())
        args: tuple[str, ...] = ("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
        if self.master_password is not None:
            args += ("--requirepass", self.master_password, "--masterauth", self.master_password)
        args += tuple(self.extra_args)
        if self.pki is not None:
            self.master = TlsRedisNode(port=ports[0], dir=self.dir / "master", args=args, pki=self.pki)
            replica_args = (*args, "--replicaof", "127.0.0.1", str(ports[0]))
            self.replica = TlsRedisNode(
                port=ports[1], dir=self.dir / "replica", args=replica_args, pki=self.pki
            )
        else:
            self.master = RedisServer(port=ports[0], dir=self.dir / "master", args=args)
            self.replica = RedisServer(
                port=ports[1],
                dir=self.dir / "replica",
                args=(*args, "--replicaof", "127.0.0.1", str(ports[0])),
            )
        for server in (self.master, self.replica):
            server.dir.mkdir(parents=True)
            server.start()
        for port in ports[2:]:
            conf = self.dir / f"sentinel-{port}.conf"
            listen = f"port {port}\n"
            if self.pki is not None:
                options = iter(tls_args(self.pki, port))
                listen = "".join(
                    f"{name.removeprefix('--')} {value}\n"
                    for name, value in zip(options, options, strict=False)
                )
            conf.write_text(
                f"{listen}bind 127.0.0.1\ndir {self.dir}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {ports[0]} {QUORUM}\n"
                f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
                + (f"sentinel auth-pass {SERVICE} {self.master_password}\n" if self.master_password else "")
                + (
                    f"requirepass {self.sentinel_password}\nsentinel sentinel-pass {self.sentinel_password}\n"
                    if self.sentinel_password
                    else ""
                )
            )
            sentinel = Sentinel(port, conf, password=self.sentinel_password, pki=self.pki)
            sentinel.start()
            self.sentinels.append(sentinel)
        self._wait_formed(timeout_s=30)

    def _wait_formed(self, timeout_s: float) -> None:
        """Until every sentinel knows the replica and the other sentinels (hello messages)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if all(self._formed(s) for s in self.sentinels):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the sentinels did not discover each other and the replica in time")
            time.sleep(0.1)

    @staticmethod
    def _formed(sentinel: Sentinel) -> bool:
        client = sentinel.client()
        try:
            state = client.sentinel_master(SERVICE)
        except redis.RedisError:
            return False
        finally:
            client.close()
        return int(state["num-other-sentinels"]) == SENTINELS - 1 and int(state["num-slaves"]) >= 1

    def master_port(self) -> int | None:
        """The master's port as the first sentinel that answers names it (None: none answers)."""
        for sentinel in self.sentinels:
            client = sentinel.client()
            try:
                _host, port = client.sentinel_get_master_addr_by_name(SERVICE)  # type: ignore[misc]
                return int(port)
            except (redis.RedisError, TypeError):
                continue
            finally:
                client.close()
        return None

    def kill_master(self) -> RedisServer:
        """SIGKILL the master (no shutdown, no last replication); return it."""
        assert self.master is not None
        victim = self.master
        end_process(victim.proc, signal.SIGKILL)
        victim.proc = None
        return victim

    def wait_promoted(self, timeout_s: float = 30.0) -> RedisServer:
        """Until the sentinels name the replica master and it answers as one; return it."""
        assert self.replica is not None
        assert self.master is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.master_port() == self.replica.port:
                client = self.replica.client(socket_timeout=1.0, password=self.master_password)
                try:
                    if client.role()[0] in (b"master", "master"):
                        self.master, self.replica = self.replica, self.master
                        return self.master
                except redis.RedisError:
                    pass
                finally:
                    client.close()
            time.sleep(0.02)
        raise AssertionError(f"the sentinels did not promote the replica within {timeout_s:.0f}s")

    def cleanup(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        for server in (self.master, self.replica):
            if server is not None:
                server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
