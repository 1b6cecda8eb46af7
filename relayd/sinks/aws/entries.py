"""Pure parts of the AWS sinks: lanes, request chunks, request entries and per-entry outcomes.

No I/O and no AWS SDK import. A batch is spread over *lanes* by ordering key (every entry of
one key in one lane, in batch order); lanes send concurrently, each its chunks one after
another, so several requests are in flight while no key ever has two. A chunk holds at most
the service's entry count and bytes per request (SQS: 10 entries and 1 MiB; SNS: 10 and
256 KiB; Kinesis: 500 records and 5 MiB). An entry that can never fit (over the per-message
limit: the queue's ``MaximumMessageSize``, 256 KiB for SNS) is ``Permanent`` before anything is
sent, unless the claim check takes its body.

The claim check writes the format of the AWS extended clients (``amazon-sqs-extended-client``,
the Java SQS and SNS extended client libraries): the body goes to S3 under a key derived from
the envelope id (``claim_key``: a redelivery overwrites the same object), and the message body
becomes the JSON pointer ``["software.amazon.payloadoffloading.PayloadS3Pointer",
{"s3BucketName": ..., "s3Key": ...}]`` with the Number attribute ``ExtendedPayloadSize`` = the
body's size in bytes, from which those clients know to fetch it.

FIFO SQS queues and SNS topics get ``MessageGroupId`` = the ordering key (an entry without one
gets its own id: it has no order to keep) and ``MessageDeduplicationId`` = the envelope id;
both accept at most 128 printable ASCII characters, so a longer or non-ASCII value is replaced
by ``sha256-`` and its hex digest (stable, so a redelivery dedupes). Kinesis gets
``PartitionKey`` = the ordering key (or the id), hashed the same way past 256 characters.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from relayd.sinks.base import DELIVERED, Outcome, Permanent, Retry

#: SQS and SNS: entries per SendMessageBatch / PublishBatch; SNS: bytes per message and per request.
QUEUE_MAX_ENTRIES: Final = 10
QUEUE_MAX_BYTES: Final = 262_144
#: SQS: bytes per request, and the most a queue's MaximumMessageSize can be (its default).
SQS_MAX_MESSAGE_BYTES: Final = 1_048_576
#: The claim check's pointer, as the AWS extended clients write and read it.
POINTER_CLASS: Final = "software.amazon.payloadoffloading.PayloadS3Pointer"
SIZE_ATTRIBUTE: Final = "ExtendedPayloadSize"
CLAIM_KEY_PREFIX: Final = "relayd/"
#: Kinesis: records per PutRecords, bytes per record (data and partition key) and per request.
KINESIS_MAX_ENTRIES: Final = 500
KINESIS_MAX_RECORD_BYTES: Final = 1_048_576
KINESIS_MAX_BYTES: Final = 5_242_880
#: Bytes counted per SQS/SNS message for its two attributes' names, types and fixed overhead.
ATTRIBUTE_OVERHEAD: Final = 64
#: Longest MessageGroupId / MessageDeduplicationId; Kinesis PartitionKey.
TOKEN_MAX: Final = 128
PARTITION_KEY_MAX: Final = 256
#: Least wait before an entry the service throttled is tried again, in seconds.
THROTTLED_AFTER_S: Final = 1.0
_TOKEN: Final = re.compile(r"[!-~]{1,128}")  # printable ASCII without space


@dataclass(frozen=True, slots=True)
class Columns:
    """A batch as the columns an AWS request is built from (bodies as rendered, in bytes), and
    each envelope's trace context (``relayd.sinks.trace_context``; none: an empty column)."""

    bodies: Sequence[bytes]
    ids: Sequence[str]
    kind: str
    keys: Sequence[str | None]
    traces: Sequence[Mapping[str, str]] = ()


@dataclass(frozen=True, slots=True)
class Claim:
    """Where the claim check put one entry's body, and the body's size in bytes."""

    bucket: str
    key: str
    size: int

    def pointer(self) -> str:
        """The message body that stands for the body in S3 (the extended clients' pointer)."""
        return orjson.dumps([POINTER_CLASS, {"s3BucketName": self.bucket, "s3Key": self.key}]).decode()


def claim_key(entry_id: str) -> str:
    """The S3 key of an entry's body: the same for every delivery of the envelope."""
    return CLAIM_KEY_PREFIX + hashlib.sha256(entry_id.encode()).hexdigest()


def claimed_size(columns: Columns, index: int, claim: Claim) -> int:
    """Bytes the message standing for a claimed body counts: the pointer, the attributes, the size."""
    pointer = len(claim.pointer()) - len(columns.bodies[index])
    return (
        queue_size(columns, index) + pointer + len(SIZE_ATTRIBUTE) + len(str(claim.size)) + ATTRIBUTE_OVERHEAD
    )


def fifo_token(value: str) -> str:
    """``value`` when it is a valid MessageGroupId / MessageDeduplicationId, else its hash."""
    if _TOKEN.fullmatch(value):
        return value
    return "sha256-" + hashlib.sha256(value.encode()).hexdigest()


def partition_key(value: str) -> str:
    """A Kinesis partition key (at most 256 characters): ``value`` or its hash."""
    if 0 < len(value) <= PARTITION_KEY_MAX:
        return value
    return "sha256-" + hashlib.sha256(value.encode()).hexdigest()


def lanes_of(keys: Sequence[str | None], lanes: int) -> list[list[int]]:
    """Batch indexes per lane: one key's entries share a lane, in batch order; keyless round-robin."""
    spread: list[list[int]] = [[] for _ in range(lanes)]
    lane_of: dict[str, int] = {}
    turn = 0
    for index, key in enumerate(keys):
        if key is None:
            lane = turn % lanes
            turn += 1
        else:
            lane = lane_of.setdefault(key, len(lane_of) % lanes)
        spread[lane].append(index)
    return [lane for lane in spread if lane]


def queue_size(columns: Columns, index: int) -> int:
    """Bytes an SQS/SNS message counts against its limits: body and attributes."""
    size = len(columns.bodies[index]) + len(columns.ids[index]) + len(columns.kind) + ATTRIBUTE_OVERHEAD
    trace = columns.traces[index] if columns.traces else {}
    return size + sum(len(name) + len(value) + ATTRIBUTE_OVERHEAD for name, value in trace.items())


def kinesis_size(columns: Columns, index: int) -> int:
    """Bytes a Kinesis record counts: data and partition key."""
    key = columns.keys[index] or columns.ids[index]
    return len(columns.bodies[index]) + len(partition_key(key).encode())


def too_large(service: str, size: int, limit: int) -> Permanent:
    return Permanent(reason=f"{service} message too large ({size} bytes, limit {limit})")


def _attributes(entry_id: str, kind: str, trace: Mapping[str, str]) -> dict[str, Any]:
    attributes = {
        "relayd-id": {"DataType": "String", "StringValue": entry_id},
        "relayd-kind": {"DataType": "String", "StringValue": kind},
    }
    for name, value in trace.items():  # traceparent, tracestate
        attributes[name] = {"DataType": "String", "StringValue": value}
    return attributes


def sqs_entries(
    columns: Columns, chunk: Sequence[int], *, fifo: bool, claims: Mapping[int, Claim] | None = None
) -> list[dict[str, Any]]:
    """SendMessageBatch entries of ``chunk``; each entry's ``Id`` is its position in the chunk.

    An entry in ``claims`` (by batch index) is sent as the pointer to its body in S3.
    """
    entries = []
    for position, index in enumerate(chunk):
        attributes = _attributes(
            columns.ids[index], columns.kind, columns.traces[index] if columns.traces else {}
        )
        claim = claims.get(index) if claims else None
        if claim is None:
            body = columns.bodies[index].decode()
        else:
            body = claim.pointer()
            attributes[SIZE_ATTRIBUTE] = {"DataType": "Number", "StringValue": str(claim.size)}
        entry: dict[str, Any] = {"Id": str(position), "MessageBody": body, "MessageAttributes": attributes}
        if fifo:
            entry["MessageGroupId"] = fifo_token(columns.keys[index] or columns.ids[index])
            entry["MessageDeduplicationId"] = fifo_token(columns.ids[index])
        entries.append(entry)
    return entries


def sns_entries(
    columns: Columns, chunk: Sequence[int], *, fifo: bool, claims: Mapping[int, Claim] | None = None
) -> list[dict[str, Any]]:
    """PublishBatch entries of ``chunk`` (``Message`` instead of ``MessageBody``)."""
    entries = sqs_entries(columns, chunk, fifo=fifo, claims=claims)
    for entry in entries:
        entry["Message"] = entry.pop("MessageBody")
    return entries


def kinesis_records(columns: Columns, chunk: Sequence[int]) -> list[dict[str, Any]]:
    """PutRecords records of ``chunk``, in order."""
    return [
        {
            "Data": columns.bodies[index],
            "PartitionKey": partition_key(columns.keys[index] or columns.ids[index]),
        }
        for index in chunk
    ]


def is_throttling(code: str) -> bool:
    """Whether an AWS error code means "slow down" (throttled or over the provisioned rate)."""
    return any(word in code for word in ("Throttl", "ThroughputExceeded", "RequestLimitExceeded", "SlowDown"))


def batch_reply_outcomes(service: str, reply: Mapping[str, Any], count: int) -> list[Outcome]:
    """Outcomes of a SendMessageBatch / PublishBatch reply, by entry ``Id`` (the chunk position).

    Delivered only when the reply lists the entry as successful. A failed entry is Permanent
    when AWS blames the sender (``SenderFault``: too large, invalid characters, ...), with the
    error code as its reason; otherwise Retry. An entry the reply does not mention is Retry.
    """
    outcomes: list[Outcome] = [Retry(error=f"{service}: entry missing from the batch reply")] * count
    for success in reply.get("Successful", ()):
        outcomes[int(success["Id"])] = DELIVERED
    for failure in reply.get("Failed", ()):
        code = str(failure.get("Code", "unknown"))[:80]
        if failure.get("SenderFault"):
            outcomes[int(failure["Id"])] = Permanent(reason=f"{service} rejected the message ({code})")
        else:
            outcomes[int(failure["Id"])] = Retry(error=f"{service} failed the message ({code})")
    return outcomes


def kinesis_reply_outcomes(reply: Mapping[str, Any], count: int) -> list[Outcome]:
    """Outcomes of a PutRecords reply: each record by its position; a failed record is Retry."""
    records = list(reply.get("Records", ()))
    if len(records) != count:
        return [Retry(error="kinesis: reply does not match the request")] * count
    outcomes: list[Outcome] = []
    for record in records:
        code = record.get("ErrorCode")
        if code:
            after_s = THROTTLED_AFTER_S if is_throttling(str(code)) else None
            outcomes.append(Retry(error=f"kinesis failed the record ({str(code)[:80]})", after_s=after_s))
        else:
            outcomes.append(DELIVERED)
    return outcomes
