"""A real moto server (``moto.server``, through ``moto_main.py``) speaking SQS, SNS and Kinesis.

moto keeps everything in memory: ``stop()`` then ``start()`` (same port) comes back empty, so a
test that restarts it recreates its queues and counts what arrived before and after. It slows
down as a queue grows, so tests keep to about a hundred messages. ``AWS_ENV`` holds the fake
credentials and region a client (or a relayd process) takes through the standard AWS chain.

Reading back: ``receive_all`` empties an SQS queue (with message attributes); an SNS topic is
read through an SQS queue subscribed to it with raw message delivery, so the queue holds the
published message bodies and attributes as they were published; ``kinesis_records`` reads a
stream's shard from its start.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.ports import port_free
from support.processes import end_process

#: What the standard AWS chain finds in a client's environment (moto accepts any credentials).
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}
REGION = "us-east-1"
BOOT_TIMEOUT_S = 60.0


def _free_port() -> int:
    rng = random.Random()
    while True:
        port = rng.randrange(22000, 32000)
        if port_free(port):
            return port


def apply_aws_env() -> None:
    """Put ``AWS_ENV`` into this process's environment (tests use monkeypatch instead)."""
    os.environ.update(AWS_ENV)


@dataclass
class MotoServer:
    """``moto_server`` on a fixed loopback port; stoppable and restartable (state is lost)."""

    port: int = field(default_factory=_free_port)
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        # -P: the script's folder (this one, with its ``moto.py``) is not put on the path.
        main = str(Path(__file__).with_name("moto_main.py"))
        self.proc = subprocess.Popen(
            [sys.executable, "-P", main, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while not self.answers():
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.proc.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto_server did not answer on {self.port}")
            time.sleep(0.05)

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/moto-api/", timeout=1):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        end_process(self.proc)
        self.proc = None

    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(
            service,
            region_name=REGION,
            endpoint_url=self.url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def spec(self, scheme: str, name: str) -> str:
        """The sink spec for ``name`` (a queue URL, topic ARN or stream name) on this server."""
        return f"{scheme}:{name}?region={REGION}&endpoint_url={self.url}"

    # -- the bench script's helpers --------------------------------------------------------------

    def bench_spec(self, scheme: str) -> str:
        apply_aws_env()
        return self.spec(scheme, self.create(scheme, "bench"))

    def create(self, scheme: str, name: str, *, fifo: bool = False) -> str:
        """Create a queue, topic or one-shard stream; return its URL, ARN or name."""
        suffix = ".fifo" if fifo else ""
        if scheme == "sqs":
            attributes = {"FifoQueue": "true"} if fifo else {}
            return str(
                self.client("sqs").create_queue(QueueName=name + suffix, Attributes=attributes)["QueueUrl"]
            )
        if scheme == "sns":
            attributes = {"FifoTopic": "true"} if fifo else {}
            return str(self.client("sns").create_topic(Name=name + suffix, Attributes=attributes)["TopicArn"])
        self.client("kinesis").create_stream(StreamName=name, ShardCount=1)
        return name

    def reset(self, scheme: str) -> None:
        """Empty everything (moto's reset) and create the bench destination again."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/moto-api/reset", data=b"", timeout=10):
            pass  # a POST (it has a body): moto forgets every resource
        self.create(scheme, "bench")


def start_moto() -> MotoServer:
    """Start moto on a free loopback port (the caller stops it)."""
    server = MotoServer()
    server.start()
    return server


@dataclass(frozen=True, slots=True)
class Message:
    """One message as an SQS consumer got it."""

    body: str
    attributes: dict[str, str]
    group_id: str | None = None
    dedup_id: str | None = None


def receive_all(
    sqs: Any, queue_url: str, *, empty_polls: int = 2, max_polls: int | None = None
) -> list[Message]:
    """Receive (and delete) every message now in the queue, in the order SQS hands them out.

    Stops after ``empty_polls`` empty receives, or after ``max_polls`` receives (a consumer
    running beside a producer hands on what it has instead of waiting for a quiet queue).
    """
    got: list[Message] = []
    empty = polls = 0
    while empty < empty_polls and (max_polls is None or polls < max_polls):
        polls += 1
        reply = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            WaitTimeSeconds=0,
        )
        messages = reply.get("Messages", [])
        if not messages:
            empty += 1
            continue
        for message in messages:
            system = message.get("Attributes", {})
            got.append(
                Message(
                    body=message["Body"],
                    attributes={k: v["StringValue"] for k, v in message.get("MessageAttributes", {}).items()},
                    group_id=system.get("MessageGroupId"),
                    dedup_id=system.get("MessageDeduplicationId"),
                )
            )
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(messages)],
        )
    return got


def subscribe_queue(server: MotoServer, topic_arn: str, queue_name: str, *, fifo: bool = False) -> str:
    """An SQS queue subscribed to ``topic_arn`` with raw delivery; returns its URL."""
    queue_url = server.create("sqs", queue_name, fifo=fifo)
    sqs = server.client("sqs")
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    server.client("sns").subscribe(
        TopicArn=topic_arn, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"}
    )
    return queue_url


def kinesis_records(server: MotoServer, stream: str) -> list[tuple[str, bytes]]:
    """Every record of the stream's shards from the start: ``(partition key, data)`` in shard order."""
    kinesis = server.client("kinesis")
    records: list[tuple[str, bytes]] = []
    for shard in kinesis.describe_stream(StreamName=stream)["StreamDescription"]["Shards"]:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            reply = kinesis.get_records(ShardIterator=iterator, Limit=1000)
            records += [(r["PartitionKey"], r["Data"]) for r in reply["Records"]]
            if not reply["Records"]:
                break
            iterator = reply.get("NextShardIterator")
    return records
