"""The ``harel`` sink: write harel 0.9's transport wire format, one script call per batch.

``harel:REDIS_URL[?store=STORE_URL&definitions=DIR&handoff_delay=S&timer_grace=S&timer_hold=S
&max_connections=N]``. REDIS_URL is harel's transport Redis (``HAREL_REDIS_URL``); STORE_URL is
its store Redis (``HAREL_STORE_REDIS_URL``) and defaults to REDIS_URL, as harel's own worker
does. The transport and store prefix is the envelope's ``prefix`` (harel uses one prefix for
both). Outbox entries and timers need no harel at run time: the transport's keys and values are
a wire contract (``relayd.sinks.harel.wire`` and ``scripts/harel_publish.lua``). Spawns are
created with harel's own code and the machine definitions in ``definitions`` (the directory
harel's workers read from ``HAREL_DEFINITIONS_DIR``; ``relayd.sinks.harel.spawning``, the
``harel`` extra); without it the sink refuses at start-up to be the spawns' sink.

What each kind becomes (what harel 0.9's relay and worker do, ``TransportDriverLogic._flush_flow``
and ``WorkerLogic.fire_due_timers_flow``):

- outbox with a target → its event, as harel's ``Event`` JSON, queued in the target's group at
  the target execution's priority (0 when it has no record), as harel's publish queues it.
- outbox without a target → Delivered without publishing: harel's relay acks such an entry
  unpublished. Counted in ``untargeted_total`` and logged at debug (``untargeted_outbox``).
- timer → harel's ``timeout_event(execution_id, path, fire_at)`` (id and payload exact) in the
  execution's group at its priority.
- spawn → the child, created and started as harel's relay creates it (idempotent: a child that
  exists already is left alone).

Beside a live harel the sink is a safety net (``relayd.sinks.harel.handoff``): harel's relay
gets ``handoff_delay`` seconds for an outbox or spawn entry and its worker ``timer_grace``
seconds past a timer's due time, and a timer goes out only while its workflow has nothing queued
in harel's transport. What the sink finds harel did is Delivered without publishing again; what
it publishes itself is counted (``handoff.HandoffCounts``: the ``relayd_harel_entries_total``
metric and ``relayd status``).

Outbox entries and timers go out as one ``harel_publish.lua`` call per batch and prefix. The
script reads each new group's priority from its execution record itself when the store is the
transport's Redis; with a separate store, one MGET on the store reads them first. A group the
script cannot publish to is Retry for its own entries only; an entry harel's ``Event`` refuses is
Permanent and holds back the later entries of its target. Spawns go one by one, in order per
child, concurrently across children over a bounded pool (``max_connections``, default 64).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Sequence
from importlib.resources import files
from typing import Any, Final

import orjson
import redis.asyncio as aioredis
import structlog
from prometheus_client import CollectorRegistry, Counter
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from relayd.envelope import Envelope
from relayd.envelope.batch import Batch
from relayd.errors import ConfigError, SinkError
from relayd.observability.inflight import progressed
from relayd.sinks.base import DELIVERED, Outcome, Permanent, ReadyByReason, Retry, SinkOptions
from relayd.sinks.harel import handoff
from relayd.sinks.harel.spawning import HarelSpawner
from relayd.sinks.harel.wire import (
    HIGHEST_PRIORITY,
    LOWEST_PRIORITY,
    PublishPlan,
    apply_replies,
    event_json,
    timeout_event_json,
)
from relayd.sinks.per_key import HELD_BACK, deliver_per_key
from relayd.sinks.redis_destination import open_destination
from relayd.sinks.spec import SinkSpec, check_redis_url
from store import StoreUnavailable

log = structlog.get_logger(__name__)

DEFAULT_MAX_CONNECTIONS: Final = 64
#: How long a command waits for a free pooled connection before it counts as a Retry.
POOL_WAIT_S: Final = 10.0
SOCKET_TIMEOUT_S: Final = 5.0
#: When a timer whose workflow stayed busy past ``timer_hold`` is tried again.
BUSY_RETRY_S: Final = 1.0
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
        clock: Callable[[], float] | None = None,
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
        self.handoff_delay_s = float(spec.params.get("handoff_delay", handoff.DEFAULT_HANDOFF_DELAY_S))
        self.timer_grace_s = float(spec.params.get("timer_grace", handoff.DEFAULT_TIMER_GRACE_S))
        self.timer_hold_s = float(spec.params.get("timer_hold", handoff.DEFAULT_TIMER_HOLD_S))
        definitions = spec.params.get("definitions")
        self._spawner = HarelSpawner(definitions) if definitions is not None else None
        self._options = options
        self._clock = clock or options.clock or time.time  # the relay's: Redis's, as relayed_at
        self._transport_client: aioredis.Redis | None = client
        self._store_client: aioredis.Redis | None = client
        self._owns_clients = client is None
        self._publish: Any = None
        self._not_ready: str | None = None
        #: outbox entries without a target, acked unpublished (as harel's relay does)
        self.untargeted_total = 0
        #: what relayd picked up because harel had not, and what it found harel had done
        self.handoffs = handoff.HandoffCounts()
        self._saved: dict[tuple[str, str, str], int] = {}  # the counts already in the status hashes

    def check_kinds(self, kinds: Collection[str]) -> None:
        """Refuse to be the spawns' sink without machine definitions (children would be wrong).

        Raises:
            ConfigError: spawns come here and the spec has no ``definitions``.
        """
        if "spawn" in kinds and self._spawner is None:
            raise ConfigError(
                "sink 'harel' relays spawns only with harel's machine definitions: add "
                "definitions=DIR (the HAREL_DEFINITIONS_DIR of harel's workers), or send spawns "
                "to another sink with --spawn-sink"
            )

    def register_metrics(self, registry: CollectorRegistry) -> None:
        """Count the handoffs as ``relayd_harel_entries_total{prefix, kind, by}``."""
        counter = Counter(
            "relayd_harel_entries",
            "Entries the harel sink delivered, by who had: relayd (picked up, harel had not) or harel.",
            ["prefix", "kind", "by"],
            registry=registry,
        )
        self.handoffs.listeners.append(lambda prefix, kind, by, n: counter.labels(prefix, kind, by).inc(n))

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
        if self._transport_client is None or self._store_client is None:
            raise SinkError("sink 'harel' delivered to before start()")
        envelopes = list(batch)  # the one read of the batch: envelopes of one kind
        if not envelopes:
            return []
        kind = envelopes[0].kind
        try:
            if kind == "timer" and (self.timer_grace_s > 0 or self.timer_hold_s > 0):
                timed = await self._deliver_timers(envelopes)
                await self._record(kind)
                return timed
            outcomes, todo = await self._hand_off(envelopes)
        except _UNREACHABLE as exc:
            self._not_ready = f"harel redis unreachable ({type(exc).__name__})"
            return [Retry(error=self._not_ready)] * len(envelopes)
        except RedisError as exc:
            return [Retry(error=f"harel redis error ({type(exc).__name__})")] * len(envelopes)
        if todo:
            picked = [envelopes[index] for index in todo]
            sent = await (self._spawn_all(picked) if kind == "spawn" else self._publish_all(picked))
            for index, outcome in zip(todo, sent, strict=True):
                outcomes[index] = outcome
            self._count(picked, sent, handoff.BY_RELAYD)
        await self._record(kind)
        return [outcome if outcome is not None else Retry(error=HELD_BACK) for outcome in outcomes]

    async def _hand_off(self, envelopes: list[Envelope]) -> tuple[list[Outcome | None], list[int]]:
        """What harel's relay has done already (Delivered), and the indexes left to send."""
        assert self._store_client is not None
        outcomes: list[Outcome | None] = [None] * len(envelopes)
        if self.handoff_delay_s == 0:  # no handoff: relayd relays alone
            return outcomes, list(range(len(envelopes)))
        await handoff.wait_for_handoff(envelopes, self.handoff_delay_s, self._clock)
        pending = await handoff.still_pending(self._store_client, envelopes)
        self._done_by_harel([envelope for envelope, live in zip(envelopes, pending, strict=True) if not live])
        for index, live in enumerate(pending):
            if not live:
                outcomes[index] = DELIVERED  # harel's relay did it: not published again
        return outcomes, [index for index, live in enumerate(pending) if live]

    def _done_by_harel(self, envelopes: list[Envelope]) -> None:
        self._count(envelopes, [DELIVERED] * len(envelopes), handoff.BY_HAREL)

    async def _deliver_timers(self, envelopes: list[Envelope]) -> list[Outcome]:
        """Timers once ``timer_grace`` past due, each while its workflow is idle in harel's
        transport, in rounds for at most ``timer_hold``: a timer whose workflow is idle goes out
        at once, a busy one is looked at again; one harel fired or cancelled meanwhile is
        Delivered unpublished; one whose workflow is still busy at the end is Retry."""
        assert self._store_client is not None
        assert self._transport_client is not None
        outcomes: list[Outcome | None] = [None] * len(envelopes)
        due = max(float(envelope.body["fire_at"]) for envelope in envelopes)  # type: ignore[arg-type]
        await handoff.sleep_until(due + self.timer_grace_s, self._clock)
        deadline = time.monotonic() + self.timer_hold_s
        waiting = list(range(len(envelopes)))
        while waiting:
            armed = await handoff.timers_armed(self._store_client, [envelopes[i] for i in waiting])
            self._done_by_harel([envelopes[i] for i, live in zip(waiting, armed, strict=True) if not live])
            for index, live in zip(waiting, armed, strict=True):
                if not live:
                    outcomes[index] = DELIVERED
            live_ones = [index for index, live in zip(waiting, armed, strict=True) if live]
            busy = await self._busy(envelopes, live_ones) if self.timer_hold_s > 0 else set()
            ready = [
                i for i in live_ones if (envelopes[i].prefix, envelopes[i].body["execution_id"]) not in busy
            ]
            if ready:
                sent = await self._publish_all([envelopes[i] for i in ready])
                for index, outcome in zip(ready, sent, strict=True):
                    outcomes[index] = outcome
                self._count([envelopes[i] for i in ready], sent, handoff.BY_RELAYD)
            waiting = [i for i in live_ones if i not in ready]
            if not waiting or time.monotonic() >= deadline:
                break
            await asyncio.sleep(handoff.IDLE_POLL_S)
            progressed()
        busy_retry = Retry(error="harel workflow busy (events queued)", after_s=BUSY_RETRY_S)
        return [busy_retry if outcome is None else outcome for outcome in outcomes]

    async def _busy(self, envelopes: list[Envelope], indexes: list[int]) -> set[tuple[str, object]]:
        """(prefix, execution id) of the timers at ``indexes`` whose workflow is busy in harel."""
        assert self._store_client is not None
        busy: set[tuple[str, object]] = set()
        for prefix in sorted({envelopes[i].prefix for i in indexes}):
            ids = sorted(
                {str(envelopes[i].body["execution_id"]) for i in indexes if envelopes[i].prefix == prefix}
            )
            found = await handoff.busy_workflows(self._store_client, self._transport_client, prefix, ids)
            busy |= {(prefix, execution_id) for execution_id in found}
        return busy

    def _count(self, envelopes: Sequence[Envelope], outcomes: Sequence[Outcome], by: str) -> None:
        delivered: dict[tuple[str, str], int] = {}
        for envelope, outcome in zip(envelopes, outcomes, strict=True):
            if outcome is DELIVERED:
                key = (envelope.prefix, envelope.kind)
                delivered[key] = delivered.get(key, 0) + 1
        for (prefix, kind), n in delivered.items():
            self.handoffs.add(prefix, kind, by, n)

    async def _record(self, kind: str) -> None:
        """Add this batch's counts to each prefix's status hash (``relayd status`` shows them)."""
        pending = {key: n for key, n in self.handoffs.counts.items() if key[1] == kind}
        unsaved = {key: n - self._saved.get(key, 0) for key, n in pending.items()}
        unsaved = {key: n for key, n in unsaved.items() if n}
        if not unsaved or self._store_client is None:
            return
        try:
            async with self._store_client.pipeline(transaction=False) as pipe:
                for (prefix, kind_, by), n in unsaved.items():
                    pipe.hincrby(handoff.status_key(prefix), f"{kind_}:{by}", n)
                await pipe.execute()
        except RedisError:
            return  # the counts are shown again with the next batch's
        for key, n in unsaved.items():
            self._saved[key] = self._saved.get(key, 0) + n

    async def _publish_all(self, envelopes: list[Envelope]) -> Sequence[Outcome]:
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
        if self._spawner is None:  # check_kinds keeps a sweep from getting here
            return Permanent(reason="harel spawn: the sink has no machine definitions (definitions=DIR)")
        why = await self._spawner.create(
            self._store_client, envelope.prefix, envelope.body, int(handoff.entry_seq(envelope))
        )
        return DELIVERED if why is None else Permanent(reason=why)

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
