"""The ``harel`` sink: publish into harel's own Redis transport, as harel's own relay does.

``harel:REDIS_URL[?store=STORE_URL&max_connections=N]`` (optional extra: ``pip install
'relayd[harel]'``). REDIS_URL is harel's transport Redis (``HAREL_REDIS_URL``); STORE_URL is its
store Redis (``HAREL_STORE_REDIS_URL``) and defaults to REDIS_URL, as harel's own worker does.
The transport and store prefix is the envelope's ``prefix`` (harel uses one prefix for both,
so relayd runs with ``--prefix harel`` or the deployment's own). Everything goes through
harel's own classes: ``AsyncRedisTransport.publish`` and ``AsyncRedisStore``.

What each kind becomes (harel 0.9, ``TransportDriverLogic._flush_flow`` and
``WorkerLogic.fire_due_timers_flow``):

- outbox with a target → the event is published to the target's group at the target
  execution's priority (read from ``P:exe:{target}``; 0 if it does not exist, as harel does).
- outbox without a target → Delivered without publishing: harel's relay acks such an entry
  unpublished. Counted in ``untargeted_total`` and logged at debug (``untargeted_outbox``).
- timer → ``harel.engine.core.timeout_event(execution_id, path, fire_at)`` (id and payload
  exact) to the execution's group at its priority.
- spawn → harel's relay creates the child and runs its start inline, which needs the machine
  definitions a relay does not have. This sink does what harel's distributed ``create`` does
  instead: it commits the child Execution (PENDING, the parent's definition and priority, the
  spawn's ``root_path``, ``parent_id``, ``child_id`` and ``context``; an ``invoke`` child's
  ``__invoke_fqn__`` becomes its ``definition_fqn``) together with its ``Start`` event in harel's
  outbox, in one atomic commit through harel's own store. The next relay pass publishes that
  Start like any outbox event, and the worker that claims it starts the child. Idempotent: a
  child that already exists is left alone (Delivered). Limitation: context defaults of an
  invoked machine's schema are not filled in (that needs its definition).

Per-target order: envelopes of one ordering key are published one by one; a failure holds the
rest of that key back (``relayd.sinks.per_key``). Connections come from a bounded, blocking
pool (``max_connections``, default 64): with redis-py 8 harel's transport on the default async
pool fails past 100 concurrent publishes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any, Final

import redis.asyncio as aioredis
import structlog
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from relayd.envelope import Envelope
from relayd.errors import ConfigError, SinkError
from relayd.sinks.base import DELIVERED, Outcome, Permanent, Retry, SinkOptions
from relayd.sinks.per_key import deliver_per_key
from relayd.sinks.redis_client import open_destination
from relayd.sinks.spec import SinkSpec, check_redis_url

log = structlog.get_logger(__name__)

INSTALL_HINT: Final = "sink 'harel' needs harel: pip install 'relayd[harel]'"
DEFAULT_MAX_CONNECTIONS: Final = 64
#: How long a publish waits for a free pooled connection before it counts as a Retry.
POOL_WAIT_S: Final = 10.0
SOCKET_TIMEOUT_S: Final = 5.0


class HarelSink:
    """Publish envelopes into harel's transport with harel's ``AsyncRedisTransport``."""

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
        self._harel = _import_harel()
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
        self._transports: dict[str, Any] = {}
        self._stores: dict[str, Any] = {}
        self._healthy = True
        #: outbox entries without a target, acked unpublished (as harel's relay does)
        self.untargeted_total = 0

    async def start(self) -> None:
        if not self._owns_clients:
            return
        self._transport_client = self._connect(self._transport_url)
        same = self._store_url == self._transport_url
        self._store_client = self._transport_client if same else self._connect(self._store_url)

    def _connect(self, url: str) -> aioredis.Redis:
        return open_destination(
            url,
            self._options,
            sink="harel",
            socket_timeout_s=SOCKET_TIMEOUT_S,
            max_connections=self._max_connections,
            pool_wait_s=POOL_WAIT_S,
        )

    async def deliver(self, batch: Sequence[Envelope]) -> Sequence[Outcome]:
        if self._transport_client is None:
            raise SinkError("sink 'harel' delivered to before start()")
        unreachable = 0

        async def send_one(envelope: Envelope) -> Outcome:
            nonlocal unreachable
            try:
                return await self._send(envelope)
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                unreachable += 1
                return Retry(error=f"harel redis unreachable ({type(exc).__name__})")
            except RedisError as exc:
                return Retry(error=f"harel redis error ({type(exc).__name__})")
            except (KeyError, TypeError, ValueError) as exc:
                # pydantic's ValidationError is a ValueError: the envelope cannot become a harel event
                return Permanent(reason=f"harel rejected the entry ({type(exc).__name__})")

        outcomes = await deliver_per_key(batch, send_one)
        if batch:
            self._healthy = unreachable < len(batch)
        return outcomes

    async def _send(self, envelope: Envelope) -> Outcome:
        body = envelope.body
        prefix = envelope.prefix
        if envelope.kind == "outbox":
            target = body["target_id"]
            if target is None:
                self.untargeted_total += 1
                log.debug("untargeted_outbox", prefix=prefix, id=envelope.id, count=self.untargeted_total)
                return DELIVERED
            event = self._harel.event.model_validate(body["event"])
            await self._publish(prefix, str(target), event)
            return DELIVERED
        if envelope.kind == "timer":
            execution_id, path = str(body["execution_id"]), str(body["path"])
            fire_at = body["fire_at"]
            if not isinstance(fire_at, int | float):
                return Permanent(reason="harel rejected the entry (fire_at is not a number)")
            # harel's own builder, so the id and payload are exactly what its worker would publish
            event = self._harel.timeout_event(execution_id, path, float(fire_at))
            await self._publish(prefix, execution_id, event)
            return DELIVERED
        return await self._spawn(envelope)

    async def _publish(self, prefix: str, group_id: str, event: Any) -> None:
        target = await self._store(prefix).load(group_id)
        priority = target.priority if target is not None else 0
        await self._transport(prefix).publish(group_id, event, priority=priority)

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
        child = self._harel.execution(
            id=child_id,
            definition_id=fqn if fqn is not None else parent.definition_id,
            definition_fqn=fqn,
            root_path=body["root_path"],
            context=context,
            parent_id=parent_id,
            child_id=child_id,
            priority=parent.priority,
        )
        self._harel.stamp(child, self._clock())
        start = self._harel.event(kind="Start", data={})
        try:
            await store.commit(child, [(child_id, start)])
        except self._harel.StoreConflict:
            return DELIVERED  # created concurrently: the commit is create-if-absent
        return DELIVERED

    def _transport(self, prefix: str) -> Any:
        if prefix not in self._transports:
            self._transports[prefix] = self._harel.transport(self._transport_client, prefix=prefix)
        return self._transports[prefix]

    def _store(self, prefix: str) -> Any:
        if prefix not in self._stores:
            self._stores[prefix] = self._harel.store(self._store_client, prefix=prefix)
        return self._stores[prefix]

    def ready(self) -> bool:
        return self._healthy

    async def close(self) -> None:
        clients = {id(c): c for c in (self._transport_client, self._store_client) if c is not None}
        self._transport_client = self._store_client = None
        if not self._owns_clients:
            return
        for client in clients.values():
            await client.aclose()
            await client.connection_pool.disconnect()


def _import_harel() -> SimpleNamespace:
    """harel's classes and functions, imported on first use (harel is an optional extra)."""
    try:
        from harel.engine.aio_store import AsyncRedisStore
        from harel.engine.aio_transport import AsyncRedisTransport
        from harel.engine.core import timeout_event
        from harel.engine.execution import Execution, stamp
        from harel.engine.store import StoreConflict
        from harel.spec.states import Event
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return SimpleNamespace(
        timeout_event=timeout_event,
        store=AsyncRedisStore,
        transport=AsyncRedisTransport,
        execution=Execution,
        stamp=stamp,
        event=Event,
        StoreConflict=StoreConflict,
    )
