"""The AWS sinks: ``sqs:QUEUE_URL``, ``sns:TOPIC_ARN`` and ``kinesis:STREAM_NAME`` on aiobotocore.

Optional extra: ``pip install 'relayd[aws]'``. The spec grammar and its checks are in
``relayd.sinks.aws.target``; lanes, chunks, request entries and per-entry outcomes in
``relayd.sinks.aws.entries`` (pure). What each sends:

- ``sqs``: SendMessageBatch of up to 10 and 1 MiB; an entry up to the queue's own
  ``MaximumMessageSize`` (read from the queue, kept ``LIMIT_TTL_S``; 1 MiB when it cannot be
  read); the body is the ``relayd/1`` JSON, message attributes
  ``relayd-id``, ``relayd-kind`` and the envelope's ``traceparent``/``tracestate``
  (``trace_context``); on a FIFO queue ``MessageGroupId`` = the ordering key and
  ``MessageDeduplicationId`` = the envelope id (hashed when too long).
- ``sns``: PublishBatch of up to 10, the same fields (FIFO topics as FIFO queues).
- ``kinesis``: PutRecords of up to 500, ``PartitionKey`` = the ordering key (or the id).

With a claim check (``?claim_check_bucket=``, SQS and SNS), a body over the threshold goes to
S3 first (PutObject under ``entries.claim_key``, so a redelivery overwrites it) and the message
carries the extended clients' pointer instead (``relayd.sinks.aws.entries``); an entry whose
PutObject failed is Retry and is not sent, nor are the later entries of its key.

A batch is spread over lanes by ordering key (``LANES`` requests in flight, never two of one
key), and an entry is Delivered only when its request's reply lists it as successful. A failed
entry is Retry, or Permanent with the error code when AWS blames the sender (too large,
invalid); later entries of its key are held back (Retry). A throttled request or record is
Retry no sooner than a delay that doubles while throttling lasts. A request that fails as a
whole (unreachable endpoint, missing credentials, access denied, no such queue) is Retry for
its entries and makes the sink not ready with the reason until a request succeeds again.
botocore's own retries are off: the relay's backoff and attempt counts own the retrying.

Credentials come only from the standard AWS chain (environment, shared files, web identity for
Kubernetes service accounts, instance roles); a CA bundle through ``AWS_CA_BUNDLE``; TLS is
always verified. Neither the credentials nor the endpoint appear in a log line or an error:
errors name the exception type or the AWS error code only.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, Final

from relayd.envelope.batch import Batch
from relayd.errors import ConfigError, SinkError
from relayd.extras import import_extra
from relayd.observability.inflight import progressed
from relayd.sinks import cloudevents, trace_context
from relayd.sinks.aws.entries import (
    KINESIS_MAX_BYTES,
    KINESIS_MAX_ENTRIES,
    KINESIS_MAX_RECORD_BYTES,
    QUEUE_MAX_BYTES,
    QUEUE_MAX_ENTRIES,
    SQS_MAX_MESSAGE_BYTES,
    THROTTLED_AFTER_S,
    Claim,
    Columns,
    batch_reply_outcomes,
    claim_key,
    claimed_size,
    is_throttling,
    kinesis_records,
    kinesis_reply_outcomes,
    kinesis_size,
    lanes_of,
    queue_size,
    sns_entries,
    sqs_entries,
    too_large,
)
from relayd.sinks.aws.target import AwsTarget, Service, parse_aws_target
from relayd.sinks.base import DELIVERED, Delivered, Outcome, ReadyByReason, Retry, SinkOptions
from relayd.sinks.per_key import HELD_BACK
from relayd.sinks.request_chunks import chunks
from relayd.sinks.spec import SinkSpec

#: Requests in flight at once per batch (each lane sends its requests one after another).
LANES: Final = 8
CONNECT_TIMEOUT_S: Final = 5.0
READ_TIMEOUT_S: Final = 30.0
#: Longest ``after_s`` a throttled entry gets while throttling goes on, in seconds.
THROTTLED_CAP_S: Final = 20.0
#: How long a queue's MaximumMessageSize is kept once read, and how soon a failed read is tried
#: again (meanwhile the last value read, at first 1 MiB), in seconds.
LIMIT_TTL_S: Final = 300.0
LIMIT_RETRY_S: Final = 30.0
_HELD: Final = Retry(error=HELD_BACK)


class _AwsSink(ReadyByReason):
    """What the three AWS sinks share: the client, lanes, chunking and error handling."""

    name: ClassVar[str]
    service: ClassVar[Service]
    max_entries: ClassVar[int]
    max_bytes: ClassVar[int]
    max_message_bytes: ClassVar[int]

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        self._session_module, self._errors = import_extra(
            self.name, "aws", "aiobotocore.session", "botocore.exceptions", needs="aiobotocore"
        )
        self._render = cloudevents.structured_renderer(options.output_format, options.cloudevents_source)
        self._target: AwsTarget = parse_aws_target(
            self.service, spec.target, allow_plaintext=options.allow_plaintext
        )
        self._stack: contextlib.AsyncExitStack | None = None
        self._client: Any = None
        self._s3: Any = None  # the claim check's S3 client (None: no claim check)
        #: the largest message the destination takes now (SQS: the queue's MaximumMessageSize)
        self._max_message_bytes = self.max_message_bytes
        self._not_ready: str | None = None
        self._throttled_s = 0.0
        #: why requests of the current batch failed as a whole (the first one becomes the reason)
        self._call_errors: list[str] = []
        #: the longest one request waits (``relayd.observability.inflight``; each request that ends
        #: reports it)
        self.timeout_s = CONNECT_TIMEOUT_S + READ_TIMEOUT_S

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        from aiobotocore.config import AioConfig

        config = AioConfig(
            retries={"total_max_attempts": 1},
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
            max_pool_connections=LANES,
        )
        session = self._session_module.get_session()
        stack = contextlib.AsyncExitStack()
        target = self._target
        try:
            self._client = await stack.enter_async_context(
                session.create_client(
                    self.service, region_name=target.region, endpoint_url=target.endpoint_url, config=config
                )
            )
            if target.claim_check_bucket is not None:
                self._s3 = await stack.enter_async_context(
                    session.create_client(
                        "s3",
                        region_name=target.region,
                        endpoint_url=target.s3_endpoint_url or target.endpoint_url,
                        config=config,
                    )
                )
        except self._errors.NoRegionError:
            await stack.aclose()
            raise ConfigError(
                f"sink {self.name!r} needs a region: '?region=' in the spec, or AWS_REGION"
            ) from None
        except self._errors.BotoCoreError as exc:
            await stack.aclose()
            raise SinkError(f"sink {self.name!r} could not start ({type(exc).__name__})") from None
        self._stack = stack

    async def close(self) -> None:
        stack, self._stack, self._client, self._s3 = self._stack, None, None, None
        if stack is not None:
            await stack.aclose()

    def not_ready_reason(self) -> str | None:
        """Why ``ready()`` is False (one line: never the endpoint or a credential)."""
        return self._not_ready

    # -- delivery ------------------------------------------------------------------------------

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        if self._client is None:
            raise SinkError(f"sink {self.name!r} delivered to before start()")
        if not batch:
            return []
        bodies, ids, keys, kind = self._render(batch), batch.ids(), batch.keys(), batch.kind
        columns = Columns(bodies=bodies, ids=ids, kind=kind, keys=keys, traces=trace_context.of_batch(batch))
        outcomes: list[Outcome] = [_HELD] * len(ids)
        await self._read_limit()
        limit = self._max_message_bytes
        sizes = [self._size(columns, index) for index in range(len(ids))]
        claims = self._claims(columns, sizes)
        sendable = []
        too_large_keys: set[str] = set()
        for index, size in enumerate(sizes):
            key = keys[index]
            if size > limit:
                outcomes[index] = too_large(self.service, size, limit)
                if key is not None:
                    too_large_keys.add(key)
            elif key is None or key not in too_large_keys:  # else not sent: held back behind it
                sendable.append(index)
        self._call_errors = []
        lanes = lanes_of([keys[i] for i in sendable], LANES)
        await asyncio.gather(
            *(
                self._send_lane([sendable[i] for i in lane], columns, sizes, claims, outcomes)
                for lane in lanes
            )
        )
        self._not_ready = self._call_errors[0] if self._call_errors else None
        return outcomes

    def _claims(self, columns: Columns, sizes: list[int]) -> dict[int, Claim]:
        """The entries whose bodies go to S3 (by batch index); their ``sizes`` become the pointer's."""
        bucket = self._target.claim_check_bucket
        if bucket is None:
            return {}
        threshold = self._target.claim_check_threshold
        if threshold is None or threshold > self._max_message_bytes:
            threshold = self._max_message_bytes  # only what would not fit goes to S3
        claims = {}
        for index, size in enumerate(sizes):
            if size > threshold:
                claim = Claim(bucket, claim_key(columns.ids[index]), len(columns.bodies[index]))
                claims[index] = claim
                sizes[index] = claimed_size(columns, index, claim)
        return claims

    async def _send_lane(
        self,
        lane: list[int],
        columns: Columns,
        sizes: list[int],
        claims: Mapping[int, Claim],
        outcomes: list[Outcome],
    ) -> None:
        """Send one lane's chunks in order; entries of a key that failed earlier are held back.

        The bodies a chunk's claims name are put in S3 before the chunk is sent; an entry whose
        body could not be put is not sent (Retry), nor are the later entries of its key.
        """
        failed: set[str] = set()
        keys = columns.keys
        for chunk in chunks(lane, sizes, max_entries=self.max_entries, max_bytes=self.max_bytes):
            sending = [i for i in chunk if keys[i] is None or keys[i] not in failed]
            stored = await self._store_claims(columns, [i for i in sending if i in claims], claims)
            unsent: set[int] = set()
            for index, outcome in stored.items():
                if not isinstance(outcome, Delivered):
                    outcomes[index] = outcome
                    unsent.add(index)
            if unsent:
                kept = []
                for index in sending:
                    key = keys[index]
                    if index in unsent:
                        if key is not None:
                            failed.add(key)
                    elif key is None or key not in failed:
                        kept.append(index)
                sending = kept
            if not sending:
                continue
            results = await self._request(columns, sending, claims)
            for index, outcome in zip(sending, results, strict=True):
                outcomes[index] = outcome
                key = keys[index]
                if key is not None and not isinstance(outcome, Delivered):
                    failed.add(key)

    async def _store_claims(
        self, columns: Columns, indexes: list[int], claims: Mapping[int, Claim]
    ) -> dict[int, Outcome]:
        """Put the bodies of ``indexes`` in S3 at once; Delivered for each body stored."""

        async def put(index: int) -> list[Outcome]:
            claim = claims[index]
            await self._s3.put_object(Bucket=claim.bucket, Key=claim.key, Body=columns.bodies[index])
            return [DELIVERED]

        results = await asyncio.gather(
            *(self._guarded("s3", 1, functools.partial(put, index)) for index in indexes)
        )
        return {index: result[0] for index, result in zip(indexes, results, strict=True)}

    async def _request(
        self, columns: Columns, chunk: list[int], claims: Mapping[int, Claim]
    ) -> list[Outcome]:
        """One request for ``chunk``; its entries' outcomes (all Retry when it failed as a whole)."""
        return await self._guarded(self.service, len(chunk), lambda: self._call(columns, chunk, claims))

    async def _guarded(
        self, service: str, count: int, call: Callable[[], Awaitable[list[Outcome]]]
    ) -> list[Outcome]:
        """``call()``'s outcomes, or ``count`` times Retry when the request failed as a whole."""
        errors = self._errors
        try:
            results = await call()
        except errors.ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", "unknown"))[:80]
            if is_throttling(code):
                self._throttled_s = min(max(self._throttled_s * 2, THROTTLED_AFTER_S), THROTTLED_CAP_S)
                return [Retry(error=f"{service} throttled ({code})", after_s=self._throttled_s)] * count
            self._call_errors.append(f"{service} refused the request ({code})")
            return [Retry(error=self._call_errors[-1])] * count
        except (errors.NoCredentialsError, errors.PartialCredentialsError, errors.CredentialRetrievalError):
            self._call_errors.append(f"{service}: no usable AWS credentials from the standard chain")
            return [Retry(error=self._call_errors[-1])] * count
        except (errors.BotoCoreError, OSError, TimeoutError) as exc:
            # the exception text names the endpoint: only its type is kept
            self._call_errors.append(f"{service} endpoint unreachable ({type(exc).__name__})")
            return [Retry(error=self._call_errors[-1])] * count
        finally:
            progressed()  # this request ended: the call's liveness deadline starts again
        self._throttled_s = 0.0
        return results

    async def _read_limit(self) -> None:
        """Learn the destination's largest message when the service says it (SQS)."""

    def _size(self, columns: Columns, index: int) -> int:
        return queue_size(columns, index)

    async def _call(self, columns: Columns, chunk: list[int], claims: Mapping[int, Claim]) -> list[Outcome]:
        raise NotImplementedError


class SqsSink(_AwsSink):
    """SendMessageBatch to one SQS queue (standard or FIFO)."""

    name = "sqs"
    service = "sqs"
    max_entries = QUEUE_MAX_ENTRIES
    max_bytes = SQS_MAX_MESSAGE_BYTES
    max_message_bytes = SQS_MAX_MESSAGE_BYTES
    _limit_read_after = 0.0  # monotonic time from which the queue's limit is read again

    async def _read_limit(self) -> None:
        """The queue's MaximumMessageSize, read again after ``LIMIT_TTL_S`` (after a failure, sooner).

        A failed read (no ``sqs:GetQueueAttributes`` permission, an outage) keeps the last value:
        the send itself reports an outage, and SQS refuses a message over the queue's limit.
        """
        now = time.monotonic()
        if now < self._limit_read_after:
            return
        errors = self._errors
        try:
            reply = await self._client.get_queue_attributes(
                QueueUrl=self._target.name, AttributeNames=["MaximumMessageSize"]
            )
            limit = int(reply["Attributes"]["MaximumMessageSize"])
        except (errors.ClientError, errors.BotoCoreError, OSError, TimeoutError, KeyError, ValueError):
            self._limit_read_after = now + LIMIT_RETRY_S
            return
        finally:
            progressed()
        self._max_message_bytes = max(1, min(limit, SQS_MAX_MESSAGE_BYTES))
        self._limit_read_after = now + LIMIT_TTL_S

    async def _call(self, columns: Columns, chunk: list[int], claims: Mapping[int, Claim]) -> list[Outcome]:
        entries = sqs_entries(columns, chunk, fifo=self._target.fifo, claims=claims)
        reply = await self._client.send_message_batch(QueueUrl=self._target.name, Entries=entries)
        return batch_reply_outcomes("sqs", reply, len(chunk))


class SnsSink(_AwsSink):
    """PublishBatch to one SNS topic (standard or FIFO)."""

    name = "sns"
    service = "sns"
    max_entries = QUEUE_MAX_ENTRIES
    max_bytes = QUEUE_MAX_BYTES
    max_message_bytes = QUEUE_MAX_BYTES

    async def _call(self, columns: Columns, chunk: list[int], claims: Mapping[int, Claim]) -> list[Outcome]:
        entries = sns_entries(columns, chunk, fifo=self._target.fifo, claims=claims)
        reply = await self._client.publish_batch(
            TopicArn=self._target.name, PublishBatchRequestEntries=entries
        )
        return batch_reply_outcomes("sns", reply, len(chunk))


class KinesisSink(_AwsSink):
    """PutRecords to one Kinesis data stream (by name or ARN)."""

    name = "kinesis"
    service = "kinesis"
    max_entries = KINESIS_MAX_ENTRIES
    max_bytes = KINESIS_MAX_BYTES
    max_message_bytes = KINESIS_MAX_RECORD_BYTES

    def _size(self, columns: Columns, index: int) -> int:
        return kinesis_size(columns, index)

    async def _call(self, columns: Columns, chunk: list[int], claims: Mapping[int, Claim]) -> list[Outcome]:
        stream = self._target.name
        where = {"StreamARN": stream} if stream.startswith("arn:") else {"StreamName": stream}
        reply = await self._client.put_records(Records=kinesis_records(columns, chunk), **where)
        return kinesis_reply_outcomes(reply, len(chunk))
