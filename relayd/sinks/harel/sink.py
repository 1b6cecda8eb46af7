"""The ``harel`` sink: write harel 0.9's transport wire format, one script call per batch.

``harel:REDIS_URL[?store=STORE_URL&max_connections=N]``. REDIS_URL is harel's transport Redis
(``HAREL_REDIS_URL``); STORE_URL is its store Redis (``HAREL_STORE_REDIS_URL``) and defaults to
REDIS_URL, as harel's own worker does. The transport and store prefix is the envelope's
``prefix`` (harel uses one prefix for both, so relayd runs with ``--prefix harel`` or the
deployment's own). harel itself is not needed at run time: the transport's keys and values are a
wire contract (``relayd.sinks.harel.wire`` and ``scripts/harel_publish.lua``), and the store's
are relayd's own ``store`` package's.

What each kind becomes (what harel 0.9's relay and worker do, ``TransportDriverLogic._flush_flow``
and ``WorkerLogic.fire_due_timers_flow``):

- outbox with a target → its event, as harel's ``Event`` JSON, queued in the target's group at
  the target execution's priority (0 when it has no record), as harel's publish queues it.
- outbox without a target → Delivered without publishing: harel's relay acks such an entry
  unpublished. Counted in ``untargeted_total`` and logged at debug (``untargeted_outbox``).
- timer → harel's ``timeout_event(execution_id, path, fire_at)`` (id and payload exact) in the
  execution's group at its priority.
- spawn → harel's relay creates the child and runs its start inline, which needs the machine
  definitions a relay does not have. This sink does what harel's distributed ``create`` does
  instead: it commits the child Execution (PENDING, the parent's definition and priority, the
  spawn's ``root_path``, ``parent_id``, ``child_id`` and ``context``; an ``invoke`` child's
  ``__invoke_fqn__`` becomes its ``definition_fqn``) together with its ``Start`` event in harel's
  outbox, in one atomic create-if-absent commit through the store. The next relay pass publishes
  that Start like any outbox event, and the worker that claims it starts the child. Idempotent:
  a child that already exists is left alone (Delivered). Limitation: context defaults of an
  invoked machine's schema are not filled in (that needs its definition).

Outbox entries and timers go out as one ``harel_publish.lua`` call per batch and prefix (the
round-trip per entry is what bounded the sink: ``tests/benchmarks/bench_harel_sink.py``). The
script reads each new group's priority from its execution record itself when the store is the
transport's Redis; with a separate store, one MGET on the store reads them first. A group the
script cannot publish to is Retry for its own entries only; an entry harel's ``Event`` refuses is
Permanent and holds back the later entries of its target. Spawns go one by one, in order per
child, concurrently across children over a bounded pool (``max_connections``, default 64).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from importlib.resources import files
from typing import Any, Final

import orjson
import redis.asyncio as aioredis
import structlog
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from relayd.batch import Batch
from relayd.envelope import Envelope
from relayd.errors import ConfigError, SinkError
from relayd.sinks.base import DELIVERED, Outcome, Permanent, ReadyByReason, Retry, SinkOptions
from relayd.sinks.harel.wire import (
    HIGHEST_PRIORITY,
    LOWEST_PRIORITY,
    PublishPlan,
    apply_replies,
    event_json,
    timeout_event_json,
)
from relayd.sinks.per_key import HELD_BACK, deliver_per_key
from relayd.sinks.redis_stream.client import open_destination
from relayd.sinks.spec import SinkSpec, check_redis_url
from store import AsyncRedisStore, Event, Execution, StoreConflict, StoreUnavailable

log = structlog.get_logger(__name__)

DEFAULT_MAX_CONNECTIONS: Final = 64
#: How long a command waits for a free pooled connection before it counts as a Retry.
POOL_WAIT_S: Final = 10.0
SOCKET_TIMEOUT_S: Final = 5.0
PUBLISH_SCRIPT: Final = files(__package__).joinpath("scripts/harel_publish.lua").read_text(encoding="utf-8")
_UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError, StoreUnavailable)


class HarelSink(ReadyByReason):
    """Publish envelopes into harel's Redis transport in harel's own wire format."""

    name = "harel"

    def __init__(
        self,
        spec: SinkSpec,
        options: SinkOptions,
        *,
        clock: Callable[[], float] = time.time,
        client: aioredis.Redis | None = None,
    ) -> None:
        """``client``, when given, serves as both transport and store Redis (tests inject fakeredis)."""
        if not spec.target or "+cluster" in spec.target.partition("://")[0]:
            raise ConfigError("sink 'harel' needs a redis:// or rediss:// URL (harel has no cluster mode)")
        self._transport_url = spec.target
        self._store_url = spec.params.get("store", spec.target)
        for url in {self._transport_url, self._store_url}:
            check_redis_url(url, "harel", allow_plaintext=options.allow_plaintext)
        self._max_connections = int(spec.params.get("max_connections", DEFAULT_MAX_CONNECTIONS))
        self._options = options
        self._clock = clock
        self._transport_client: aioredis.Redis | None = client
        self._store_client: aioredis.Redis | None = client
        self._owns_clients = client is None
        self._publish: Any = None
        self._stores: dict[str, AsyncRedisStore[Execution, Event]] = {}
        self._not_ready: str | None = None
        #: outbox entries without a target, acked unpublished (as harel's relay does)
        self.untargeted_total = 0

    async def start(self) -> None:
        if self._owns_clients:
            self._transport_client = self._connect(self._transport_url)
            same = self._store_url == self._transport_url
            self._store_client = self._transport_client if same else self._connect(self._store_url)
        assert self._transport_client is not None
        self._publish = self._transport_client.register_script(PUBLISH_SCRIPT)

    def _connect(self, url: str) -> aioredis.Redis:
        return open_destination(
            url,
            self._options,
            sink="harel",
            socket_timeout_s=SOCKET_TIMEOUT_S,
            max_connections=self._max_connections,
            pool_wait_s=POOL_WAIT_S,
        )

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        if self._transport_client is None:
            raise SinkError("sink 'harel' delivered to before start()")
        envelopes = list(batch)  # the one read of the batch: envelopes of one kind
        if not envelopes:
            return []
        if envelopes[0].kind == "spawn":
            return await self._spawn_all(envelopes)
        outcomes: list[Outcome] = [Retry(error=HELD_BACK)] * len(envelopes)
        plans = self._plan(envelopes, outcomes)
        try:
            for plan in plans:
                await self._run(plan, outcomes)
        except _UNREACHABLE as exc:
            self._not_ready = f"harel redis unreachable ({type(exc).__name__})"
            return self._unpublished(plans, outcomes, self._not_ready)
        except RedisError as exc:
            self._not_ready = None
            return self._unpublished(plans, outcomes, f"harel redis error ({type(exc).__name__})")
        self._not_ready = None
        return outcomes

    def _plan(self, envelopes: list[Envelope], outcomes: list[Outcome]) -> list[PublishPlan]:
        """One plan per prefix; entries that are not published get their outcome here."""
        plans: dict[str, PublishPlan] = {}
        for index, envelope in enumerate(envelopes):
            plan = plans.get(envelope.prefix)
            if plan is None:
                plan = plans[envelope.prefix] = PublishPlan(envelope.prefix)
            group = envelope.ordering_key
            if group is None:  # an outbox entry without a target (a timer always has one)
                outcomes[index] = self._untargeted(envelope)
                continue
            try:
                payload = _payload(envelope)
            except (KeyError, TypeError, ValueError) as exc:
                # pydantic's ValidationError is a ValueError: harel's Event refuses it as well
                outcomes[index] = Permanent(reason=f"harel rejected the entry ({type(exc).__name__})")
                plan.stop(group)
                continue
            plan.add(index, group, payload)
        return list(plans.values())

    def _untargeted(self, envelope: Envelope) -> Outcome:
        self.untargeted_total += 1
        log.debug("untargeted_outbox", prefix=envelope.prefix, id=envelope.id, count=self.untargeted_total)
        return DELIVERED

    async def _run(self, plan: PublishPlan, outcomes: list[Outcome]) -> None:
        """Run the publish script for ``plan`` and set its entries' outcomes from the replies."""
        priorities = None
        if self._store_client is not self._transport_client:
            priorities = await self._priorities(plan, outcomes)
        if plan.groups:
            replies = await self._publish(keys=[], args=plan.script_args(priorities))
            apply_replies(plan, replies, outcomes)

    async def _priorities(self, plan: PublishPlan, outcomes: list[Outcome]) -> dict[str, int]:
        """The groups' priorities from a store on another Redis (one MGET), as the script reads them.

        A group whose execution record has no usable priority is taken out of the plan: Retry.
        """
        assert self._store_client is not None
        groups = list(plan.groups)
        records = await self._store_client.mget([f"{plan.prefix}:exe:{group}" for group in groups])
        priorities = {}
        for group, record in zip(groups, records, strict=True):
            priority = _priority(record)
            if priority is None:
                plan.refuse(group, "the execution record has no integer priority", outcomes)
            else:
                priorities[group] = priority
        return priorities

    @staticmethod
    def _unpublished(plans: list[PublishPlan], outcomes: list[Outcome], error: str) -> list[Outcome]:
        """Retry for every planned entry without an outcome from a script reply."""
        failure = Retry(error=error)
        for plan in plans:
            for publish in plan.groups.values():
                for index in publish.indexes:
                    if outcomes[index] is not DELIVERED:
                        outcomes[index] = failure
        return outcomes

    # --- spawns -----------------------------------------------------------------------------
    async def _spawn_all(self, envelopes: list[Envelope]) -> Sequence[Outcome]:
        unreachable = 0

        async def spawn_one(envelope: Envelope) -> Outcome:
            nonlocal unreachable
            try:
                return await self._spawn(envelope)
            except _UNREACHABLE as exc:
                unreachable += 1
                return Retry(error=f"harel redis unreachable ({type(exc).__name__})")
            except RedisError as exc:
                return Retry(error=f"harel redis error ({type(exc).__name__})")
            except (KeyError, TypeError, ValueError) as exc:
                return Permanent(reason=f"harel rejected the entry ({type(exc).__name__})")

        outcomes = await deliver_per_key(envelopes, spawn_one)
        self._not_ready = "harel redis unreachable" if unreachable == len(envelopes) else None
        return outcomes

    async def _spawn(self, envelope: Envelope) -> Outcome:
        body = envelope.body
        store = self._store(envelope.prefix)
        child_id, parent_id = str(body["child_id"]), body["parent_id"]
        if await store.load(child_id) is not None:
            return DELIVERED  # created on an earlier attempt (or by harel itself): keep its progress
        parent = await store.load(str(parent_id)) if parent_id is not None else None
        if parent is None:
            return Permanent(reason="harel spawn: parent execution not found")
        context = body["context"]
        if not isinstance(context, dict):
            return Permanent(reason="harel rejected the entry (context is not an object)")
        context = dict(context)
        fqn = context.pop("__invoke_fqn__", None)
        now = self._clock()
        child = Execution(
            id=child_id,
            definition_id=fqn if fqn is not None else parent.definition_id,
            definition_fqn=fqn,
            root_path=body["root_path"],
            context=context,
            parent_id=parent_id,
            child_id=child_id,
            priority=parent.priority,
            created_at=now,
            updated_at=now,
        )
        try:
            await store.commit(child, [(child_id, Event(kind="Start", data={}))])
        except StoreConflict:
            return DELIVERED  # created concurrently: the commit is create-if-absent
        return DELIVERED

    def _store(self, prefix: str) -> AsyncRedisStore[Execution, Event]:
        if prefix not in self._stores:
            self._stores[prefix] = AsyncRedisStore(self._store_client, prefix=prefix)
        return self._stores[prefix]

    def not_ready_reason(self) -> str | None:
        return self._not_ready

    async def close(self) -> None:
        clients = {id(c): c for c in (self._transport_client, self._store_client) if c is not None}
        self._transport_client = self._store_client = None
        if not self._owns_clients:
            return
        for client in clients.values():
            await client.aclose()
            await client.connection_pool.disconnect()


def _payload(envelope: Envelope) -> bytes:
    """The JSON harel's transport queues for an outbox entry's event or a timer."""
    body = envelope.body
    if envelope.kind == "timer":
        fire_at = body["fire_at"]
        if type(fire_at) is not float and type(fire_at) is not int:
            raise TypeError("fire_at is not a number")
        return timeout_event_json(str(body["execution_id"]), str(body["path"]), float(fire_at))
    return event_json(body["event"])


def _priority(record: bytes | str | None) -> int | None:
    """An execution record's priority, clamped as harel's publish clamps it (no record: 0).

    None when the record is not a JSON object or its priority is not an integer.
    """
    if record is None:
        return 0
    try:
        execution = orjson.loads(record)
    except orjson.JSONDecodeError:
        return None
    priority = execution.get("priority", 0) if type(execution) is dict else None
    if type(priority) is not int:
        return None
    return min(max(priority, LOWEST_PRIORITY), HIGHEST_PRIORITY)
