"""The AWS sinks: ``sqs:QUEUE_URL``, ``sns:TOPIC_ARN`` and ``kinesis:STREAM_NAME`` on aiobotocore.

Optional extra: ``pip install 'relayd[aws]'``. The spec grammar and its checks are in
``relayd.sinks.aws.target``; lanes, chunks, request entries and per-entry outcomes in
``relayd.sinks.aws.entries`` (pure). What each sends:

- ``sqs``: SendMessageBatch of up to 10; the body is the ``relayd/1`` JSON, message attributes
  ``relayd-id``, ``relayd-kind`` and the envelope's ``traceparent``/``tracestate``
  (``trace_context``); on a FIFO queue ``MessageGroupId`` = the ordering key and
  ``MessageDeduplicationId`` = the envelope id (hashed when too long).
- ``sns``: PublishBatch of up to 10, the same fields (FIFO topics as FIFO queues).
- ``kinesis``: PutRecords of up to 500, ``PartitionKey`` = the ordering key (or the id).

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
from collections.abc import Sequence
from typing import Any, ClassVar, Final

from relayd.batch import Batch
from relayd.errors import ConfigError, SinkError
from relayd.extras import import_extra
from relayd.inflight import progressed
from relayd.sinks import cloud_event, trace_context
from relayd.sinks.aws.entries import (
    KINESIS_MAX_BYTES,
    KINESIS_MAX_ENTRIES,
    KINESIS_MAX_RECORD_BYTES,
    QUEUE_MAX_BYTES,
    QUEUE_MAX_ENTRIES,
    THROTTLED_AFTER_S,
    Columns,
    batch_reply_outcomes,
    chunks,
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
from relayd.sinks.base import Delivered, Outcome, ReadyByReason, Retry, SinkOptions
from relayd.sinks.per_key import HELD_BACK
from relayd.sinks.spec import SinkSpec

#: Requests in flight at once per batch (each lane sends its requests one after another).
LANES: Final = 8
CONNECT_TIMEOUT_S: Final = 5.0
READ_TIMEOUT_S: Final = 30.0
#: Longest ``after_s`` a throttled entry gets while throttling goes on, in seconds.
THROTTLED_CAP_S: Final = 20.0
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
        self._render = cloud_event.structured_renderer(options.output_format, options.cloudevents_source)
        self._target: AwsTarget = parse_aws_target(
            self.service, spec.target, allow_plaintext=options.allow_plaintext
        )
        self._stack: contextlib.AsyncExitStack | None = None
        self._client: Any = None
        self._not_ready: str | None = None
        self._throttled_s = 0.0
        #: why requests of the current batch failed as a whole (the first one becomes the reason)
        self._call_errors: list[str] = []
        #: the longest one request waits (``relayd.inflight``; each request that ends reports it)
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
        try:
            self._client = await stack.enter_async_context(
                session.create_client(
                    self.service,
                    region_name=self._target.region,
                    endpoint_url=self._target.endpoint_url,
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
        stack, self._stack, self._client = self._stack, None, None
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
        sizes = [self._size(columns, index) for index in range(len(ids))]
        sendable = []
        too_large_keys: set[str] = set()
        for index, size in enumerate(sizes):
            key = keys[index]
            if size > self.max_message_bytes:
                outcomes[index] = too_large(self.service, size, self.max_message_bytes)
                if key is not None:
                    too_large_keys.add(key)
            elif key is None or key not in too_large_keys:  # else not sent: held back behind it
                sendable.append(index)
        self._call_errors = []
        lanes = lanes_of([keys[i] for i in sendable], LANES)
        await asyncio.gather(
            *(self._send_lane([sendable[i] for i in lane], columns, sizes, outcomes) for lane in lanes)
        )
        self._not_ready = self._call_errors[0] if self._call_errors else None
        return outcomes

    async def _send_lane(
        self, lane: list[int], columns: Columns, sizes: list[int], outcomes: list[Outcome]
    ) -> None:
        """Send one lane's chunks in order; entries of a key that failed earlier are held back."""
        failed: set[str] = set()
        for chunk in chunks(lane, sizes, max_entries=self.max_entries, max_bytes=self.max_bytes):
            keys = columns.keys
            sending = [i for i in chunk if keys[i] is None or keys[i] not in failed]
            if not sending:
                continue
            results = await self._request(columns, sending)
            for index, outcome in zip(sending, results, strict=True):
                outcomes[index] = outcome
                key = keys[index]
                if key is not None and not isinstance(outcome, Delivered):
                    failed.add(key)

    async def _request(self, columns: Columns, chunk: list[int]) -> list[Outcome]:
        """One request for ``chunk``; its entries' outcomes (all Retry when it failed as a whole)."""
        errors = self._errors
        try:
            results = await self._call(columns, chunk)
        except errors.ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", "unknown"))[:80]
            if is_throttling(code):
                self._throttled_s = min(max(self._throttled_s * 2, THROTTLED_AFTER_S), THROTTLED_CAP_S)
                return [Retry(error=f"{self.service} throttled ({code})", after_s=self._throttled_s)] * len(
                    chunk
                )
            self._call_errors.append(f"{self.service} refused the request ({code})")
            return [Retry(error=self._call_errors[-1])] * len(chunk)
        except (errors.NoCredentialsError, errors.PartialCredentialsError, errors.CredentialRetrievalError):
            self._call_errors.append(f"{self.service}: no usable AWS credentials from the standard chain")
            return [Retry(error=self._call_errors[-1])] * len(chunk)
        except (errors.BotoCoreError, OSError, TimeoutError) as exc:
            # the exception text names the endpoint: only its type is kept
            self._call_errors.append(f"{self.service} endpoint unreachable ({type(exc).__name__})")
            return [Retry(error=self._call_errors[-1])] * len(chunk)
        finally:
            progressed()  # this request ended: the call's liveness deadline starts again
        self._throttled_s = 0.0
        return results

    def _size(self, columns: Columns, index: int) -> int:
        return queue_size(columns, index)

    async def _call(self, columns: Columns, chunk: list[int]) -> list[Outcome]:
        raise NotImplementedError


class SqsSink(_AwsSink):
    """SendMessageBatch to one SQS queue (standard or FIFO)."""

    name = "sqs"
    service = "sqs"
    max_entries = QUEUE_MAX_ENTRIES
    max_bytes = QUEUE_MAX_BYTES
    max_message_bytes = QUEUE_MAX_BYTES

    async def _call(self, columns: Columns, chunk: list[int]) -> list[Outcome]:
        entries = sqs_entries(columns, chunk, fifo=self._target.fifo)
        reply = await self._client.send_message_batch(QueueUrl=self._target.name, Entries=entries)
        return batch_reply_outcomes("sqs", reply, len(chunk))


class SnsSink(_AwsSink):
    """PublishBatch to one SNS topic (standard or FIFO)."""

    name = "sns"
    service = "sns"
    max_entries = QUEUE_MAX_ENTRIES
    max_bytes = QUEUE_MAX_BYTES
    max_message_bytes = QUEUE_MAX_BYTES

    async def _call(self, columns: Columns, chunk: list[int]) -> list[Outcome]:
        entries = sns_entries(columns, chunk, fifo=self._target.fifo)
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

    async def _call(self, columns: Columns, chunk: list[int]) -> list[Outcome]:
        stream = self._target.name
        where = {"StreamARN": stream} if stream.startswith("arn:") else {"StreamName": stream}
        reply = await self._client.put_records(Records=kinesis_records(columns, chunk), **where)
        return kinesis_reply_outcomes(reply, len(chunk))
