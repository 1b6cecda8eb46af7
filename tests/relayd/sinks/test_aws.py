"""The sqs, sns and kinesis sinks against a real moto server, and their pure parts."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from botocore.exceptions import ClientError
from support.moto import AWS_ENV, MotoServer, kinesis_records, receive_all, subscribe_queue
from support.redis_server import free_port
from typer.testing import CliRunner

from relayd.cli.app import app
from relayd.envelope.batch import Batch
from relayd.errors import ConfigError
from relayd.observability.inflight import InFlight
from relayd.sinks import DELIVERED, Permanent, Retry, SinkOptions, parse_sink_spec, resolve_sink
from relayd.sinks.aws.entries import (
    batch_reply_outcomes,
    claim_key,
    fifo_token,
    kinesis_reply_outcomes,
    lanes_of,
)
from relayd.sinks.aws.sink import KinesisSink, SnsSink, SqsSink
from relayd.sinks.aws.target import parse_aws_target
from relayd.sinks.per_key import HELD_BACK
from relayd.sinks.request_chunks import chunks

from .conftest import outbox, timer

AnySink = SqsSink | SnsSink | KinesisSink
MakeSink = Callable[[type[AnySink], str], Awaitable[Any]]


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and region through the standard chain's environment variables."""
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def name() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def make_sink(started) -> MakeSink:
    async def make(cls: type[AnySink], spec: str) -> AnySink:
        return await started(cls(parse_sink_spec(spec), SinkOptions()))

    return make


async def test_sqs_standard_queue_gets_every_body_with_its_attributes(
    moto_server: MotoServer, name: str, make_sink: MakeSink
) -> None:
    url = moto_server.create("sqs", name)
    sink = await make_sink(SqsSink, moto_server.spec("sqs", url))
    batch = [outbox("p", seq, f"exe-{seq % 4}") for seq in range(1, 26)]  # three requests

    outcomes = await sink.deliver(Batch.of(batch))

    assert outcomes == [DELIVERED] * 25
    got = receive_all(moto_server.client("sqs"), url)
    assert sorted(m.body for m in got) == sorted(e.to_json().decode() for e in batch)
    assert {m.attributes["relayd-id"]: m.attributes["relayd-kind"] for m in got} == {
        e.id: "outbox" for e in batch
    }
    assert sink.ready()


async def test_sqs_fifo_groups_by_target_in_order_and_dedupes_on_the_id(
    moto_server: MotoServer, name: str, make_sink: MakeSink
) -> None:
    """A long or non-ASCII key or id becomes its sha256 (stable); a keyless entry is its own group."""
    url = moto_server.create("sqs", name, fifo=True)
    sink = await make_sink(SqsSink, moto_server.spec("sqs", url))
    long_key = "x" * 200
    batch = [outbox("p", seq, ["a", "b", long_key, None][seq % 4]) for seq in range(1, 31)]
    timers = [timer("p", "exé", "wait here", 5.0)]

    outcomes = [*await sink.deliver(Batch.of(batch)), *await sink.deliver(Batch.of(timers))]
    batch += timers

    assert outcomes == [DELIVERED] * 31
    got = receive_all(moto_server.client("sqs"), url)
    assert len(got) == 31
    by_id = {m.attributes["relayd-id"]: m for m in got}
    for envelope in batch:
        message = by_id[envelope.id]
        assert message.body == envelope.to_json().decode()
        assert message.group_id == fifo_token(envelope.ordering_key or envelope.id)
        assert message.dedup_id == fifo_token(envelope.id)
    assert by_id[batch[-1].id].dedup_id.startswith("sha256-")
    assert fifo_token(long_key).startswith("sha256-")
    for key in ("a", "b", long_key):
        seqs = [orjson.loads(m.body)["seq"] for m in got if orjson.loads(m.body).get("target_id") == key]
        assert seqs == sorted(seqs)
        assert len(seqs) >= 7


async def test_sns_fifo_topic_publishes_in_order_with_attributes(
    moto_server: MotoServer, name: str, make_sink: MakeSink
) -> None:
    arn = moto_server.create("sns", name, fifo=True)
    queue = subscribe_queue(moto_server, arn, f"{name}-sub", fifo=True)
    sink = await make_sink(SnsSink, moto_server.spec("sns", arn))
    batch = [outbox("p", seq, "ab"[seq % 2]) for seq in range(1, 22)]

    outcomes = await sink.deliver(Batch.of(batch))

    assert outcomes == [DELIVERED] * 21
    got = receive_all(moto_server.client("sqs"), queue)
    assert sorted(m.attributes["relayd-id"] for m in got) == sorted(e.id for e in batch)
    assert {m.attributes["relayd-kind"] for m in got} == {"outbox"}
    for key in "ab":
        seqs = [orjson.loads(m.body)["seq"] for m in got if orjson.loads(m.body)["target_id"] == key]
        assert seqs == sorted(seqs)


async def test_kinesis_records_carry_the_ordering_key_as_partition_key_in_order(
    moto_server: MotoServer, name: str, make_sink: MakeSink
) -> None:
    stream = moto_server.create("kinesis", name)
    sink = await make_sink(KinesisSink, moto_server.spec("kinesis", stream))
    batch = [outbox("p", seq, [None, "a", "b"][seq % 3]) for seq in range(1, 31)]

    outcomes = await sink.deliver(Batch.of(batch))

    assert outcomes == [DELIVERED] * 30
    records = kinesis_records(moto_server, stream)
    assert sorted(data for _, data in records) == sorted(e.to_json() for e in batch)
    assert {key for key, _ in records} >= {"a", "b"}
    for key, data in records:
        envelope = orjson.loads(data)
        assert key == (envelope["target_id"] or envelope["id"])
    for key in "ab":
        seqs = [orjson.loads(data)["seq"] for k, data in records if k == key]
        assert seqs == sorted(seqs)


def padded(seq: int, target: str, pad: int) -> Any:
    """An outbox entry whose event carries ``pad`` bytes of data."""
    return outbox("p", seq, target, {"id": f"e{seq}", "kind": "Big", "data": {"pad": "x" * pad}})


async def test_a_message_over_the_queues_own_limit_is_permanent_and_holds_back_its_target(
    moto_server: MotoServer, name: str, make_sink: MakeSink
) -> None:
    """The limit is the queue's MaximumMessageSize (here set to 256 KiB), read from the queue."""
    url = moto_server.client("sqs").create_queue(QueueName=name, Attributes={"MaximumMessageSize": "262144"})[
        "QueueUrl"
    ]
    sink = await make_sink(SqsSink, moto_server.spec("sqs", url))
    batch = [padded(1, "a", 300_000), outbox("p", 2, "a"), outbox("p", 3, "b")]

    outcomes = await sink.deliver(Batch.of(batch))

    assert isinstance(outcomes[0], Permanent)
    assert "too large" in outcomes[0].reason
    assert "limit 262144" in outcomes[0].reason
    assert outcomes[1] == Retry(error=HELD_BACK)
    assert outcomes[2] == DELIVERED


async def test_sqs_takes_entries_up_to_1_mib_and_refuses_what_is_over(
    moto_server: MotoServer, name: str, make_sink: MakeSink
) -> None:
    """A queue's default limit is 1 MiB: 900 KiB is delivered, 1.1 MiB is too large."""
    url = moto_server.create("sqs", name)
    sink = await make_sink(SqsSink, moto_server.spec("sqs", url))
    batch = [padded(1, "a", 900 * 1024), padded(2, "b", 1_100_000), outbox("p", 3, "c")]

    outcomes = await sink.deliver(Batch.of(batch))

    assert outcomes[0] == DELIVERED
    assert isinstance(outcomes[1], Permanent)
    assert "limit 1048576" in outcomes[1].reason
    assert outcomes[2] == DELIVERED
    got = receive_all(moto_server.client("sqs"), url)
    assert sorted(m.body for m in got) == sorted(batch[i].to_json().decode() for i in (0, 2))


def extended_sqs(moto_server: MotoServer) -> Any:
    """An SQS client of ``amazon-sqs-extended-client``, its S3 client pointed at moto."""
    from sqs_extended_client.client import SQSExtendedClientSession

    sqs = SQSExtendedClientSession(region_name="us-east-1").client("sqs", endpoint_url=moto_server.url)
    sqs.s3_client = moto_server.client("s3")  # it makes its own without an endpoint
    sqs.large_payload_support = "unused-by-receive"  # receiving follows each message's own pointer
    return sqs


async def test_sqs_claim_check_puts_large_bodies_in_s3_for_the_extended_client(
    moto_server: MotoServer, name: str, make_sink: MakeSink
) -> None:
    """Over the queue's limit the body goes to S3; the AWS extended client's own code reads it
    back. The key is the envelope id's, so a redelivery overwrites the one object."""
    url = moto_server.create("sqs", name)
    s3 = moto_server.client("s3")
    s3.create_bucket(Bucket=name)
    sink = await make_sink(SqsSink, moto_server.spec("sqs", url) + f"&claim_check_bucket={name}")
    big, small = padded(1, "a", 2_000_000), outbox("p", 2, "a")

    assert await sink.deliver(Batch.of([big, small])) == [DELIVERED, DELIVERED]
    assert await sink.deliver(Batch.of([big])) == [DELIVERED]  # a redelivery

    objects = s3.list_objects_v2(Bucket=name).get("Contents", [])
    assert [o["Key"] for o in objects] == [claim_key(big.id)]
    sqs = extended_sqs(moto_server)
    bodies = []
    for _ in range(10):  # moto hands out at most 10 per receive, fewer at times
        reply = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
        got = reply.get("Messages", [])
        bodies += [(m["Body"], m["MessageAttributes"]["relayd-id"]["StringValue"]) for m in got]
        if len(bodies) >= 3:
            break
    assert sorted(bodies) == sorted(
        [(big.to_json().decode(), big.id)] * 2 + [(small.to_json().decode(), small.id)]
    )


async def test_a_claim_check_that_cannot_write_s3_sends_nothing_of_that_key(
    moto_server: MotoServer, name: str, make_sink: MakeSink
) -> None:
    """The S3 write comes first: a missing bucket leaves the entry (and its key) unsent, Retry."""
    url = moto_server.create("sqs", name)
    sink = await make_sink(SqsSink, moto_server.spec("sqs", url) + "&claim_check_bucket=no-such-bucket")
    batch = [padded(1, "a", 1_100_000), outbox("p", 2, "a"), outbox("p", 3, "b")]

    outcomes = await sink.deliver(Batch.of(batch))

    assert isinstance(outcomes[0], Retry)
    assert "s3 refused the request (NoSuchBucket)" in outcomes[0].error
    assert outcomes[1] == Retry(error=HELD_BACK)
    assert outcomes[2] == DELIVERED
    assert [m.body for m in receive_all(moto_server.client("sqs"), url)] == [batch[2].to_json().decode()]
    assert "NoSuchBucket" in (sink.not_ready_reason() or "")


async def test_sns_claim_check_with_a_threshold_reaches_an_extended_client_subscriber(
    moto_server: MotoServer, name: str, make_sink: MakeSink
) -> None:
    """SNS (256 KiB) with ``claim_check_threshold=1000``: bodies over 1000 bytes go to S3."""
    topic = moto_server.create("sns", name)
    queue = subscribe_queue(moto_server, topic, f"{name}-sub")
    moto_server.client("s3").create_bucket(Bucket=name)
    spec = moto_server.spec("sns", topic) + f"&claim_check_bucket={name}&claim_check_threshold=1000"
    sink = await make_sink(SnsSink, spec)
    batch = [padded(1, "a", 5_000), outbox("p", 2, "a"), padded(3, "b", 400_000)]

    assert await sink.deliver(Batch.of(batch)) == [DELIVERED] * 3

    objects = moto_server.client("s3").list_objects_v2(Bucket=name)["Contents"]
    assert sorted(o["Key"] for o in objects) == sorted(claim_key(batch[i].id) for i in (0, 2))
    sqs = extended_sqs(moto_server)
    bodies: list[str] = []
    for _ in range(10):
        reply = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=0)
        bodies += [m["Body"] for m in reply.get("Messages", [])]
        if len(bodies) >= 3:
            break
    assert sorted(bodies) == sorted(e.to_json().decode() for e in batch)


async def test_an_unreachable_endpoint_is_retry_and_not_ready_without_naming_it(make_sink: MakeSink) -> None:
    port = free_port()
    sink = await make_sink(
        SqsSink,
        f"sqs:http://127.0.0.1:{port}/123456789012/q?region=us-east-1&endpoint_url=http://127.0.0.1:{port}",
    )

    outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a")]))

    assert isinstance(outcomes[0], Retry)
    assert not sink.ready()
    reason = sink.not_ready_reason() or ""
    assert "unreachable" in reason
    assert str(port) not in reason + outcomes[0].error


async def test_a_missing_queue_is_retry_and_not_ready_with_the_error_code(
    moto_server: MotoServer, name: str, make_sink: MakeSink
) -> None:
    sink = await make_sink(SqsSink, moto_server.spec("sqs", f"{moto_server.url}/123456789012/{name}"))

    outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a")]))

    assert isinstance(outcomes[0], Retry)
    assert "NonExistentQueue" in (sink.not_ready_reason() or "")
    moto_server.create("sqs", name)
    assert await sink.deliver(Batch.of([outbox("p", 1, "a")])) == [DELIVERED]
    assert sink.ready()


async def test_no_credentials_in_the_chain_is_retry_and_not_ready(
    moto_server: MotoServer, name: str, make_sink: MakeSink, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(variable)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    url = moto_server.create("sqs", name)
    sink = await make_sink(SqsSink, moto_server.spec("sqs", url))

    outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a")]))

    assert isinstance(outcomes[0], Retry)
    assert "credentials" in (sink.not_ready_reason() or "")


async def test_throttling_is_retry_after_a_delay_that_grows_while_it_lasts(
    moto_server: MotoServer, name: str, make_sink: MakeSink
) -> None:
    sink = await make_sink(SqsSink, moto_server.spec("sqs", moto_server.create("sqs", name)))
    real = sink._client

    class Throttled:
        async def send_message_batch(self, **_: object) -> dict[str, object]:
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "SendMessageBatch"
            )

    assert await sink.deliver(Batch.of([outbox("p", 1, "a")])) == [DELIVERED]  # the queue's limit read
    sink._client = Throttled()
    first = await sink.deliver(Batch.of([outbox("p", 1, "a")]))
    second = await sink.deliver(Batch.of([outbox("p", 1, "a")]))
    sink._client = real
    third = await sink.deliver(Batch.of([outbox("p", 1, "a")]))

    assert isinstance(first[0], Retry)
    assert isinstance(second[0], Retry)
    assert (first[0].after_s, second[0].after_s) == (1.0, 2.0)
    assert sink.ready()  # throttling is the service asking to slow down, not an outage
    assert third == [DELIVERED]


def test_batch_replies_map_success_sender_faults_and_the_rest() -> None:
    reply = {
        "Successful": [{"Id": "0"}, {"Id": "3"}],
        "Failed": [
            {"Id": "1", "SenderFault": True, "Code": "InvalidMessageContents"},
            {"Id": "2", "SenderFault": False, "Code": "InternalError"},
        ],
    }

    outcomes = batch_reply_outcomes("sqs", reply, 5)

    assert outcomes[0] == DELIVERED
    assert outcomes[1] == Permanent(reason="sqs rejected the message (InvalidMessageContents)")
    assert outcomes[2] == Retry(error="sqs failed the message (InternalError)")
    assert outcomes[3] == DELIVERED
    assert isinstance(outcomes[4], Retry)  # not in the reply: never acked


def test_kinesis_failed_records_alone_are_retried_throttled_ones_after_a_delay() -> None:
    reply = {
        "Records": [
            {"SequenceNumber": "1"},
            {"ErrorCode": "ProvisionedThroughputExceededException"},
            {"ErrorCode": "InternalFailure"},
        ]
    }

    outcomes = kinesis_reply_outcomes(reply, 3)

    assert outcomes[0] == DELIVERED
    assert outcomes[1] == Retry(
        error="kinesis failed the record (ProvisionedThroughputExceededException)", after_s=1.0
    )
    assert outcomes[2] == Retry(error="kinesis failed the record (InternalFailure)")


def test_lanes_keep_a_key_together_in_order_and_chunks_respect_both_limits() -> None:
    keys = ["a", "b", None, "a", "c", None, "b", "a"]

    lanes = lanes_of(keys, 2)

    assert sorted(i for lane in lanes for i in lane) == list(range(8))
    for key in "abc":
        holding = [lane for lane in lanes if any(keys[i] == key for i in lane)]
        assert len(holding) == 1
        assert [i for i in holding[0] if keys[i] == key] == [i for i, k in enumerate(keys) if k == key]
    sizes = [100, 100, 300, 100, 100]
    assert chunks(range(5), sizes, max_entries=2, max_bytes=1000) == [[0, 1], [2, 3], [4]]
    assert chunks(range(5), sizes, max_entries=10, max_bytes=400) == [[0, 1], [2, 3], [4]]


@pytest.mark.parametrize(
    ("service", "text", "message"),
    [
        ("sqs", "not-a-url", "needs a queue URL"),
        ("sqs", "https://sqs.eu-west-1.amazonaws.com/1/q?colour=red", "unknown parameter 'colour'"),
        ("sns", "my-topic", "needs a topic ARN"),
        ("kinesis", "bad name!", "not a stream name"),
        ("kinesis", "s?region=moon", "not an AWS region"),
        ("sqs", "https://h/1/q?endpoint_url=http://vpce.example:80", "--allow-plaintext"),
        ("sqs", "https://h/1/q?endpoint_url=https://user:pw@vpce.example", "no credentials in endpoint_url"),
        ("sqs", "https://h/1/q?claim_check_bucket=Not_A_Bucket", "not an S3 bucket name"),
        (
            "sns",
            "arn:aws:sns:us-east-1:1:t?claim_check_bucket=b-1&claim_check_threshold=2000000",
            "from 0 to",
        ),
        ("sqs", "https://h/1/q?claim_check_threshold=10", "need claim_check_bucket"),
        ("kinesis", "s?claim_check_bucket=b-1", "unknown parameter 'claim_check_bucket'"),
    ],
    ids=[
        "sqs-url",
        "unknown-param",
        "sns-arn",
        "stream-name",
        "region",
        "plaintext-endpoint",
        "endpoint-creds",
        "bucket",
        "threshold",
        "threshold-alone",
        "kinesis-claim-check",
    ],
)
def test_bad_aws_specs_are_one_line_config_errors(service: Any, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_aws_target(service, text)

    assert "pw@" not in str(caught.value)


def test_regions_and_fifo_come_from_the_queue_url_and_topic_arn() -> None:
    sqs = parse_aws_target("sqs", "https://sqs.eu-west-1.amazonaws.com/123/events.fifo")
    sns = parse_aws_target("sns", "arn:aws:sns:ap-south-1:123:events")
    kinesis = parse_aws_target("kinesis", "events?region=us-west-2&endpoint_url=http://127.0.0.1:4566")

    assert (sqs.region, sqs.fifo) == ("eu-west-1", True)
    assert (sns.region, sns.fifo) == ("ap-south-1", False)
    assert (kinesis.region, kinesis.endpoint_url) == ("us-west-2", "http://127.0.0.1:4566")
    assert "4566" not in repr(kinesis)


@pytest.mark.usefixtures("restore_logging")
def test_without_the_extra_naming_an_aws_sink_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiobotocore missing (simulated: a None entry in sys.modules makes its import fail)."""
    monkeypatch.setitem(sys.modules, "aiobotocore.session", None)
    spec = "kinesis:events?region=us-east-1"

    with pytest.raises(ConfigError, match=r"pip install 'relayd\[aws\]'"):
        resolve_sink(spec, SinkOptions())
    result = CliRunner().invoke(
        app,
        ["sweep", "--once", "--sink", spec, "--redis-url", "redis://127.0.0.1:1"],
        env={"RELAYD_LOG_FORMAT": "json"},
    )

    assert result.exit_code == 2
    assert "relayd[aws]" in result.output
    assert len(result.output.strip().splitlines()) == 1


async def test_each_request_that_ends_restarts_the_calls_liveness_deadline(
    moto_server: MotoServer, name: str, make_sink: MakeSink
) -> None:
    """``relayd.observability.inflight``: a batch of many requests reports each that ends, against
    35 s each."""
    url = moto_server.create("sqs", name)
    sink = await make_sink(SqsSink, moto_server.spec("sqs", url))
    ticks = iter(range(1_000))
    inflight = InFlight(clock=lambda: float(next(ticks)))

    with inflight.track(sink) as call:
        outcomes = await sink.deliver(Batch.of([outbox("p", seq, "one-key") for seq in range(1, 26)]))

    assert outcomes == [DELIVERED] * 25
    assert call.timeout_s == 35.0
    # the queue's limit read, then three requests of one lane: one tick each
    assert call.progressed_s == call.started_s + 4
