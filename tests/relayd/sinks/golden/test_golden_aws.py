"""Golden bytes of the AWS sinks, read back from a real moto server: each SQS message's body,
message attributes (name, type, value) and FIFO group and deduplication ids; what an SNS topic
delivers to an SQS queue subscribed with raw delivery; each Kinesis record's partition key and
data; and the bodies a claim check puts in S3.

Queues, topics and streams are the test's own (moto is the session's); their names are the
operator's, in the spec, so they are not recorded. The services keep no order across a batch's
lanes (requests go concurrently), so messages are recorded sorted by entry id, then bytes; a
message's attributes are a map, recorded sorted by name. A FIFO queue drops the retried batch
as the duplicate it is (its deduplication id is the entry id), so its file holds each entry once.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

import pytest
from support.moto import AWS_ENV, REGION, MotoServer, subscribe_queue

from .conftest import check, deliver_all, deliveries, open_sink, payload

#: The entries ``deliveries`` hands over, all delivered.
SENT: Final = sum(len(batch) for _, batch in deliveries())
#: The claim check's bucket: in the pointer a message carries, so fixed.
BUCKET: Final = "relayd-golden-claims"
#: Entries counting more bytes than this go to S3 (with these entries: 41, 43 and the spawn).
CLAIM_THRESHOLD: Final = 500


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and region through the standard chain's environment variables."""
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)


def _name() -> str:
    return f"golden-{uuid.uuid4().hex[:10]}"


def received(moto_server: MotoServer, queue_url: str, count: int) -> list[dict[str, Any]]:
    """Every message in the queue, with its attributes, FIFO ids when it has them, sorted."""
    sqs = moto_server.client("sqs")
    got: list[dict[str, Any]] = []
    empty = 0
    while empty < 2:
        reply = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["MessageGroupId", "MessageDeduplicationId"],
            WaitTimeSeconds=0,
        )
        messages = reply.get("Messages", [])
        empty = 0 if messages else empty + 1
        for message in messages:
            got.append(
                {
                    "body": {"text": message["Body"]},
                    "attributes": sorted(
                        [name, value["DataType"], value.get("StringValue")]
                        for name, value in message.get("MessageAttributes", {}).items()
                    ),
                    **dict(sorted(message.get("Attributes", {}).items())),
                }
            )
        if messages:
            sqs.delete_message_batch(
                QueueUrl=queue_url,
                Entries=[{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(messages)],
            )
    assert len(got) == count, got
    return sorted(got, key=lambda m: (_entry_id(m), m["body"]["text"]))


def _entry_id(message: dict[str, Any]) -> str:
    return next(value for name, _, value in message["attributes"] if name == "relayd-id")


SQS_CASES: Final[dict[str, tuple[bool, str, dict[str, Any]]]] = {
    # case: (FIFO, spec parameters beyond region and endpoint, flags)
    "sqs": (False, "", {}),
    "sqs-fifo": (True, "", {}),
    "sqs-claim-check": (False, f"&claim_check_bucket={BUCKET}&claim_check_threshold={CLAIM_THRESHOLD}", {}),
    "sqs-cloudevents": (False, "", {"format": "cloudevents"}),
}


@pytest.mark.parametrize("case", list(SQS_CASES))
async def test_sqs_sends_the_recorded_messages(case: str, moto_server: MotoServer) -> None:
    fifo, params, flags = SQS_CASES[case]
    url = moto_server.create("sqs", _name(), fifo=fifo)
    s3 = moto_server.client("s3")
    if "claim_check" in params:
        s3.create_bucket(Bucket=BUCKET)
    sink = await open_sink(moto_server.spec("sqs", url) + params, **flags)
    try:
        await deliver_all(sink)
    finally:
        await sink.close()

    document: dict[str, Any] = {
        "sink": f"sqs:QUEUE_URL{'.fifo' if fifo else ''}?region={REGION}&endpoint_url=<moto>{params}",
        "flags": flags,
        "messages": received(moto_server, url, 6 if fifo else SENT),
    }
    if "claim_check" in params:
        objects = s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
        document["s3 objects"] = [
            {"key": o["Key"], "body": payload(s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read())}
            for o in sorted(objects, key=lambda o: o["Key"])
        ]
    check(case, document)


async def test_sns_publishes_the_recorded_messages(moto_server: MotoServer) -> None:
    topic = moto_server.create("sns", _name())
    queue = subscribe_queue(moto_server, topic, _name())
    sink = await open_sink(moto_server.spec("sns", topic))
    try:
        await deliver_all(sink)
    finally:
        await sink.close()

    check(
        "sns",
        {
            "sink": f"sns:TOPIC_ARN?region={REGION}&endpoint_url=<moto>",
            "read through": "an SQS queue subscribed with raw message delivery",
            "messages": received(moto_server, queue, SENT),
        },
    )


@pytest.mark.parametrize(
    ("case", "flags"),
    [("kinesis", {}), ("kinesis-cloudevents", {"format": "cloudevents"})],
    ids=["kinesis", "kinesis-cloudevents"],
)
async def test_kinesis_puts_the_recorded_records(
    case: str, flags: dict[str, Any], moto_server: MotoServer
) -> None:
    stream = moto_server.create("kinesis", _name())
    sink = await open_sink(moto_server.spec("kinesis", stream), **flags)
    try:
        await deliver_all(sink)
    finally:
        await sink.close()

    kinesis = moto_server.client("kinesis")
    (shard,) = kinesis.describe_stream(StreamName=stream)["StreamDescription"]["Shards"]
    iterator = kinesis.get_shard_iterator(
        StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = kinesis.get_records(ShardIterator=iterator, Limit=1000)["Records"]
    assert len(records) == SENT
    # sequence numbers and arrival times are the service's: left out
    sent = sorted(
        ({"partition_key": r["PartitionKey"], "data": payload(r["Data"])} for r in records),
        key=lambda r: (r["partition_key"], r["data"].get("text", "")),
    )
    check(
        case, {"sink": f"kinesis:STREAM?region={REGION}&endpoint_url=<moto>", "flags": flags, "records": sent}
    )
