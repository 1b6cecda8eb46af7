"""The ``redis-stream`` sink: XADD every envelope to a Redis stream, one pipelined round-trip per batch.

``redis-stream:REDIS_URL?stream=NAME[&maxlen=N]``. Each envelope becomes one stream entry with
the fields ``envelope`` (the ``relayd/1`` JSON, or with ``--format cloudevents`` the envelope as a
structured CloudEvent: ``relayd.sinks.cloudevents``), ``id`` and ``kind``, and ``traceparent``
(and ``tracestate``) when the envelope carries a trace context (``trace_context``). The
destination may be the relay's own Redis or any other.

- ``{target}`` in NAME is replaced by the envelope's ``ordering_key`` (the outbox target, the
  spawned child, the timer's execution), or by ``_`` when it has none, so
  ``stream=events:{target}`` gives every target its own stream.
- ``maxlen=N`` trims approximately (``MAXLEN ~ N``), which Redis does cheaply per node: by the
  last XADD to each stream in a script call (so a stream may hold a call's entries more until
  then), by every XADD on the pipeline fallback.
- A batch goes out as calls of a small Lua script (``XADD_BATCH``, ``CALL_SIZE`` entries each)
  that add every entry in batch order and answer the positions of the entries refused (none, as
  a rule): one short reply per call instead of one per entry, far less client CPU to read
  (``tests/benchmarks/profile_drain.py``). The calls are pipelined on one connection, each
  packed just before it is sent, so Redis runs one while the next is prepared. It is not a
  transaction: an entry that fails (wrong key type, out of memory) is Retry, the others are
  delivered. Where scripts are refused (``EVAL`` disabled or not permitted by an ACL) the sink
  falls back to a non-transactional pipeline of XADDs, which keeps the batch order as well.
- ``rediss://`` verifies the server certificate (``options.redis_ca_file`` replaces the system
  store); plaintext to a non-loopback host needs ``options.allow_plaintext``.
- A connection error or timeout makes the whole batch Retry (some entries may already be in
  the stream: delivery is at-least-once; consumers dedupe on ``id``). ``ready()`` follows the
  last batch.
- ``redis+sentinel://`` destinations follow their master through a failover
  (``relayd.sinks.redis_destination``); a batch in flight then is Retry.
- Redis Cluster destinations (``redis+cluster://``) are not supported for streams yet.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from relayd.envelope.batch import Batch
from relayd.errors import ConfigError, SinkError
from relayd.runtime.packing import use_hiredis_packing
from relayd.sinks import cloudevents, trace_context
from relayd.sinks.base import DELIVERED, Outcome, ReadyByReason, Retry, SinkOptions
from relayd.sinks.redis_destination import open_destination
from relayd.sinks.routing import NO_TARGET
from relayd.sinks.spec import SinkSpec, check_redis_url

SOCKET_TIMEOUT_S: Final = 5.0
#: Replies that mean "this server runs no scripts for us": use the pipeline from then on.
_SCRIPTS_REFUSED: Final = ("unknown command", "noperm", "no permissions", "disabled")
#: Entries per script call: a batch goes out as several calls, pipelined on one connection.
CALL_SIZE: Final = 200
#: XADD every entry of a call.
XADD_BATCH: Final = """
-- KEYS     the distinct streams of the batch
-- ARGV[1]  MAXLEN for approximate trimming, or '' for none
-- ARGV[2]  the kind of every entry (a batch is one kind)
-- ARGV[3]  '1' when each entry carries its stream's index into KEYS, '' when all go to KEYS[1];
--          then 't' when each entry carries its traceparent and tracestate ('' for none)
-- ARGV     then per entry, in batch order: [index], envelope JSON, id, [traceparent, tracestate]
-- Returns the positions in the call (from 1) of the entries refused (wrong key type, out of
-- memory, ...): empty when every entry was added.
local maxlen, kind = ARGV[1], ARGV[2]
local routed, traced = string.sub(ARGV[3], 1, 1) == '1', string.find(ARGV[3], 't', 1, true) ~= nil
local stride = 2 + (routed and 1 or 0) + (traced and 2 or 0)
-- Each stream is trimmed once per call, by its last XADD, not by every XADD: less Redis CPU
-- per entry (relayd bench, "Redis CPU s") and no extra command.
-- last[k]: where the last entry for KEYS[k] starts.
local last = {}
if maxlen ~= '' then
  if routed then
    for j = 4, #ARGV, stride do
      last[tonumber(ARGV[j])] = j
    end
  else
    last[1] = #ARGV - stride + 1
  end
end
local refused = {}
local position = 0
local i = 4
while i <= #ARGV do
  position = position + 1
  local at, k = i, 1
  if routed then
    k = tonumber(ARGV[i])
    i = i + 1
  end
  local key = KEYS[k]
  local envelope, id = ARGV[i], ARGV[i + 1]
  i = i + 2
  local reply
  local parent, state = '', ''
  if traced then
    parent, state = ARGV[i], ARGV[i + 1]
    i = i + 2
  end
  -- One call per layout, no table built per entry: the untraced ones first, as they were.
  local trim = last[k] == at
  if parent == '' and trim then
    reply = redis.pcall('XADD', key, 'MAXLEN', '~', maxlen, '*',
      'envelope', envelope, 'id', id, 'kind', kind)
  elseif parent == '' then
    reply = redis.pcall('XADD', key, '*', 'envelope', envelope, 'id', id, 'kind', kind)
  elseif state == '' and trim then
    reply = redis.pcall('XADD', key, 'MAXLEN', '~', maxlen, '*',
      'envelope', envelope, 'id', id, 'kind', kind, 'traceparent', parent)
  elseif state == '' then
    reply = redis.pcall('XADD', key, '*', 'envelope', envelope, 'id', id, 'kind', kind, 'traceparent', parent)
  elseif trim then
    reply = redis.pcall('XADD', key, 'MAXLEN', '~', maxlen, '*',
      'envelope', envelope, 'id', id, 'kind', kind, 'traceparent', parent, 'tracestate', state)
  else
    reply = redis.pcall('XADD', key, '*',
      'envelope', envelope, 'id', id, 'kind', kind, 'traceparent', parent, 'tracestate', state)
  end
  if type(reply) == 'table' and reply.err then
    refused[#refused + 1] = position
  end
end
return refused
"""
_FAILED: Final = Retry(error="redis-stream XADD failed (ResponseError)")


def _refused(error: ResponseError) -> bool:
    return any(text in str(error).lower() for text in _SCRIPTS_REFUSED)


def stream_name(template: str, ordering_key: str | None) -> str:
    """The stream an envelope with ``ordering_key`` goes to: ``template`` with ``{target}`` filled in."""
    return template.replace("{target}", ordering_key or NO_TARGET)


class RedisStreamSink(ReadyByReason):
    """XADD envelopes to a stream (or one stream per target)."""

    name = "redis-stream"

    def __init__(self, spec: SinkSpec, options: SinkOptions, *, client: aioredis.Redis | None = None) -> None:
        if "+cluster" in spec.target.partition("://")[0]:
            raise ConfigError("sink 'redis-stream': Redis Cluster destinations are not supported for streams")
        self._stream = spec.params.get("stream", "")
        self._routed = "{target}" in self._stream  # one stream per ordering key
        if not self._stream:
            raise ConfigError("sink 'redis-stream' needs a stream name: 'redis-stream:REDIS_URL?stream=NAME'")
        maxlen = spec.params.get("maxlen")
        self._maxlen = int(maxlen) if maxlen else None
        if client is None:
            check_redis_url(spec.target, "redis-stream", allow_plaintext=options.allow_plaintext)
        self._url = spec.target
        self._options = options
        self._render = cloudevents.structured_renderer(options.output_format, options.cloudevents_source)
        self._client = client
        self._owns_client = client is None
        self._not_ready: str | None = None
        self._scripted = True
        # the digest SCRIPT LOAD answers: EVALSHA needs no load until the server says NOSCRIPT
        self._sha = hashlib.sha1(XADD_BATCH.encode(), usedforsecurity=False).hexdigest()

    async def start(self) -> None:
        if self._client is None:
            self._client = open_destination(
                self._url, self._options, sink="redis-stream", socket_timeout_s=SOCKET_TIMEOUT_S
            )
        use_hiredis_packing(self._client)

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        if self._client is None:
            raise SinkError("sink 'redis-stream' delivered to before start()")
        if not batch:
            return []
        try:
            outcomes = await (self._deliver_scripted(batch) if self._scripted else self._deliver_piped(batch))
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            self._not_ready = f"redis-stream unreachable ({type(exc).__name__})"
            return [Retry(error=self._not_ready)] * len(batch)
        self._not_ready = None
        return outcomes

    async def _deliver_scripted(self, batch: Batch) -> Sequence[Outcome]:
        calls = [batch[i : i + CALL_SIZE] for i in range(0, len(batch), CALL_SIZE)]
        replies = await self._send_calls(calls)
        if any(isinstance(r, NoScriptError) for r in replies):
            # First use, or the server lost its script cache (a restart): the calls answered
            # NOSCRIPT did nothing. When all did, the batch goes again at once in its order;
            # otherwise (a flush mid-batch) those entries are Retry and go next attempt.
            refused = await self._load_script()
            if refused is not None:
                replies = [refused]
            elif all(isinstance(r, NoScriptError) for r in replies):
                replies = await self._send_calls(calls)
        if any(isinstance(r, ResponseError) and _refused(r) for r in replies):
            self._scripted = False  # this server runs no scripts for us: one XADD per entry from now on
            return await self._deliver_piped(batch)
        outcomes: list[Outcome] = []
        for call, reply in zip(calls, replies, strict=True):
            if isinstance(reply, ResponseError):
                outcomes += [Retry(error=f"redis-stream script failed ({type(reply).__name__})")] * len(call)
            elif not reply:
                outcomes += [DELIVERED] * len(call)
            else:
                not_added = set(reply)
                outcomes += [_FAILED if at in not_added else DELIVERED for at in range(1, len(call) + 1)]
        return outcomes

    async def _load_script(self) -> ResponseError | None:
        """SCRIPT LOAD ``XADD_BATCH``; the refusal when this server permits us no scripts."""
        try:
            await self._client.script_load(XADD_BATCH)  # type: ignore[union-attr]
        except ResponseError as exc:
            if not _refused(exc):
                raise
            return exc
        return None

    async def _send_calls(self, calls: list[Batch]) -> list[Any]:
        """Send every call of a batch on one connection, then read the replies (in order).

        Each call is serialised and packed just before it is sent, so Redis runs the first
        while the relay prepares the next (packing a whole batch first leaves Redis idle for
        part of each delivery: ``tests/benchmarks/profile_drain.py``). One connection answers
        in order, so the stream keeps the batch order. A connection left with unread replies is
        dropped, never reused.
        """
        assert self._client is not None
        pool = self._client.connection_pool
        conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            for call in calls:
                keys, args = self._call_args(call)
                packed = conn.pack_command("EVALSHA", self._sha, len(keys), *keys, *args)
                await conn.send_packed_command(packed, check_health=False)
            replies: list[Any] = []
            for _ in calls:
                try:
                    replies.append(await conn.read_response())
                except ResponseError as exc:  # an error reply: read in full, the next ones follow
                    replies.append(exc)
            return replies
        except BaseException:
            await conn.disconnect()
            raise
        finally:
            await pool.release(conn)

    def _call_args(self, call: Batch) -> tuple[list[str], list[bytes | str | int]]:
        """KEYS and ARGV of one ``XADD_BATCH`` call."""
        # Only what varies per entry goes per entry: a batch is one kind and, without {target},
        # one stream. Each argument costs client CPU to pack. The per-entry arguments are built
        # a column at a time (an ``OutboxWindow`` renders from its own columns, making no
        # envelope) and interleaved by slice assignment, in C.
        routed = self._routed
        streams: dict[str, int] = {} if routed else {self._stream: 1}
        columns: list[Sequence[bytes | str | int]] = []
        if routed:
            template, keys = self._stream, call.keys()
            columns.append([streams.setdefault(stream_name(template, key), len(streams) + 1) for key in keys])
        columns += (self._render(call), call.ids())
        traces = trace_context.of_batch(call)
        traced = any(traces)
        if traced:  # the stream entries' traceparent and tracestate fields
            columns += ([t.get("traceparent", "") for t in traces], [t.get("tracestate", "") for t in traces])
        per_entry: list[bytes | str | int] = [""] * (len(columns) * len(call))
        for offset, column in enumerate(columns):
            per_entry[offset :: len(columns)] = column
        flags = ("1" if routed else "") + ("t" if traced else "")
        return list(streams), [self._maxlen or "", call.kind, flags, *per_entry]

    async def _deliver_piped(self, batch: Batch) -> Sequence[Outcome]:
        assert self._client is not None
        pipe = self._client.pipeline(transaction=False)
        traces = trace_context.of_batch(batch)
        for envelope, body, trace in zip(batch, self._render(batch), traces, strict=True):
            fields: dict[Any, Any] = {"envelope": body, "id": envelope.id, "kind": envelope.kind, **trace}
            pipe.xadd(
                stream_name(self._stream, envelope.ordering_key),
                fields,
                maxlen=self._maxlen,
                approximate=True,
            )
        results = await pipe.execute(raise_on_error=False)
        return [_FAILED if isinstance(result, RedisError) else DELIVERED for result in results]

    def not_ready_reason(self) -> str | None:
        return self._not_ready

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.aclose()
