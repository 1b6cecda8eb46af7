"""The Google Cloud Pub/Sub emulator (google-cloud-cli's ``cloud-pubsub-emulator``, Java) for the pubsub sink.

``start_pubsub()`` runs it on a free loopback port, in memory; a client reaches it when
``PUBSUB_EMULATOR_HOST`` is set (``PubSubEmulator.env``), as every Google client does. It is the
emulator ``gcloud beta emulators pubsub start`` runs, called directly (no gcloud configuration,
no project). It keeps nothing across a restart. Ordering keys and ordered subscriptions work.

The emulator is found at ``RELAYD_PUBSUB_EMULATOR``, else under the Cloud SDK that ``gcloud`` on
PATH belongs to, else at Debian's ``/usr/lib/google-cloud-sdk``; without one the tests skip (a
failure under ``CI``).
"""

from __future__ import annotations

import os
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

#: Seconds the emulator may take to listen (about 3 s on an idle machine: it is a JVM).
START_TIMEOUT_S = 60.0
_RELATIVE = Path("platform/pubsub-emulator/bin/cloud-pubsub-emulator")
PROJECT = "relayd-tests"
#: Seconds a pull waits for messages before it counts as empty.
EMPTY_PULL_S = 0.5


def emulator_path() -> str:
    """The emulator's launcher; skip when there is none."""
    candidates = []
    if os.environ.get("RELAYD_PUBSUB_EMULATOR"):
        candidates.append(Path(os.environ["RELAYD_PUBSUB_EMULATOR"]))
    gcloud = shutil.which("gcloud")
    if gcloud:
        candidates.append(Path(gcloud).resolve().parents[1] / _RELATIVE)
    candidates.append(Path("/usr/lib/google-cloud-sdk") / _RELATIVE)
    for path in candidates:
        if path.is_file():
            return str(path)
    pytest.skip("the Pub/Sub emulator is not installed (google-cloud-cli-pubsub-emulator)")


@dataclass
class PubSubEmulator:
    """The emulator on 127.0.0.1:``port``."""

    port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """What makes a Google client (or a relayd process) talk to this emulator."""
        return {"PUBSUB_EMULATOR_HOST": self.host}

    def start(self) -> None:
        argv = [emulator_path(), "--host=127.0.0.1", f"--port={self.port}"]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Pub/Sub emulator exited: {self.log_path.read_text()[-500:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"the Pub/Sub emulator did not listen on {self.port}")

    def stop(self) -> None:
        end_process(self.proc)
        self.proc = None

    def _clients(self) -> tuple[Any, Any]:
        import grpc
        from google.pubsub_v1 import PublisherClient, SubscriberClient
        from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport
        from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

        return (
            PublisherClient(transport=PublisherGrpcTransport(channel=grpc.insecure_channel(self.host))),
            SubscriberClient(transport=SubscriberGrpcTransport(channel=grpc.insecure_channel(self.host))),
        )

    def topic(self, name: str, *, ordered_subscription: bool = True) -> str:
        """Create topic ``name`` and a subscription ``name-sub`` to it (with message ordering)."""
        publisher, subscriber = self._clients()
        topic = f"projects/{PROJECT}/topics/{name}"
        publisher.create_topic(name=topic)
        subscriber.create_subscription(
            request={
                "name": f"projects/{PROJECT}/subscriptions/{name}-sub",
                "topic": topic,
                "enable_message_ordering": ordered_subscription,
            }
        )
        return topic

    def pull(self, name: str, count: int, timeout_s: float = 30.0) -> list[Any]:
        """Pull (and ack) the messages of ``name``'s subscription until ``count`` arrived and a
        pull comes back empty, or ``timeout_s``; in the order the emulator handed them out."""
        from google.api_core.exceptions import DeadlineExceeded

        _, subscriber = self._clients()
        subscription = f"projects/{PROJECT}/subscriptions/{name}-sub"
        got: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:  # the emulator holds an empty pull open until its deadline
                reply = subscriber.pull(
                    request={"subscription": subscription, "max_messages": 1000}, timeout=EMPTY_PULL_S
                )
            except DeadlineExceeded:
                reply = None
            received = list(reply.received_messages) if reply is not None else []
            if received:
                subscriber.acknowledge(
                    request={"subscription": subscription, "ack_ids": [m.ack_id for m in received]}
                )
                got += [m.message for m in received]
            elif len(got) >= count:
                break
        return got


def start_pubsub() -> PubSubEmulator:
    """Start the emulator on a free loopback port (the caller stops it)."""
    log_dir = Path(tempfile.mkdtemp(prefix="relayd-pubsub-"))
    emulator = PubSubEmulator(port=free_port(), log_path=log_dir / "emulator.log")
    try:
        emulator.start()
    except BaseException:
        emulator.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
        raise
    return emulator
