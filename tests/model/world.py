"""The world the model-based test drives: one Redis, an engine, replicas, a receiver and its ledger.

Everything runs in one process on one event loop, against fakeredis with lupa (so the store's and
relayd's Lua scripts run) and a virtual clock, so a schedule of a few dozen steps costs a few
milliseconds and replays exactly from its seed. The code under test is the real engine: each
replica is a real ``PrefixRelay`` (its ``Lease``, its ``Sweeper``s, its sink guards); the test
only decides *when* each replica's keeper turns and each of its passes runs, which the real loop
decides with sleeps. A pass runs as a task: a sink call may hang (``Receiver.hang``) and the pass
stays suspended inside it while other steps run, as a real pass does while its sink is slow.

Redis's own key expiry runs on the host's clock, which never moves here: the lease's expiry on
the virtual clock is kept by the world (``World.advance`` deletes the lease key once its
virtual TTL ran out), which is what Redis does on a real clock.

The ledger records every request the receiver got (``Receipt``), with the step and the virtual
Redis time it arrived at, the replica and the lease term of the pass that sent it.
``tests/model/invariants.py`` checks the ledger and Redis against what the README promises.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import random
from collections import Counter
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import fakeredis
import orjson
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry
from support.seeding import outbox_value, spawn_value

from relayd.engine.breaker import BreakerPolicy
from relayd.engine.fencing import Fenced
from relayd.engine.options import SweepOptions
from relayd.engine.prefix_relay import PrefixRelay
from relayd.engine.redis_errors import REDIS_ERRORS
from relayd.engine.sink_guard import guards_for
from relayd.engine.sweeper import PAUSES_READ_EVERY_S, Sweeper
from relayd.envelope import Envelope, Kind
from relayd.envelope.batch import Batch
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.base import DELIVERED, Delivered, Outcome, Permanent, ReadyByReason, Retry
from relayd.sinks.per_key import HELD_BACK
from relayd.sinks.sending import NOT_SENT
from relayd.sinks.webhook.batches import lanes, send_lane
from relayd.sinks.webhook.http_policy import WHOLESALE_HINTS
from relayd.state.attempts import decode_record
from relayd.state.deadletters import _bytes_from, decode_dead_letter, purge_dead_letters, replay_dead_letters
from relayd.state.keys import RelayKeys
from relayd.state.pauses import Pause, pause, resume
from store import Keyspace, timer_member

T = TypeVar("T")

PREFIX = "m"
#: The lease's TTL on the virtual clock (seconds).
LEASE_TTL_S = 6.0
#: A window: small, so a few entries fill it and read-ahead, held lines and reconcile all run.
BATCH = 4
MAX_ATTEMPTS = 4
#: The replicas' names.
REPLICAS = ("A", "B")

Answer = Literal["ok", "retry", "retry_after", "permanent"]
#: What the engine commits (or an operator does, or a failover loses) while a pass is between two of
#: its round-trips (``World.happens_during``).
MidPass = Literal[
    "spawn_and_child_event", "event", "timer_due", "timer_later", "timer_cancelled", "lease_lost", "replay"
]
#: The replica whose pass is running in this task (its round-trips count toward what is armed).
PASSING: contextvars.ContextVar[str | None] = contextvars.ContextVar("passing", default=None)


@dataclass
class VirtualClock:
    """Redis's epoch clock and the hosts' monotonic clock, moved only by the schedule."""

    epoch_s: float = 1_700_000_000.0
    mono_s: float = 1000.0

    def now(self) -> float:
        return self.epoch_s

    def monotonic(self) -> float:
        return self.mono_s


@dataclass(frozen=True, slots=True)
class Receipt:
    """One entry of one request the receiver got, and what it answered."""

    step: int
    at: float  # Redis time (epoch s)
    replica: str
    term: int  # the lease term of the pass that sent it (0: none)
    holder_term: int  # the term the sending replica held at that moment (0: none)
    kind: Kind
    id: str  # the delivery id; for outbox entries, the event's id
    seq: int | None
    key: str | None
    answer: str


@dataclass
class Committed:
    """What the engine committed: an outbox event or a spawn, in commit order."""

    kind: Kind
    id: str  # event id (outbox) or child id (spawn)
    seq: int
    key: str | None
    step: int


@dataclass
class TimerState:
    """One timer member as the engine left it: its fire_at, and its earlier ids it took back."""

    execution: str
    path: str
    fire_at: float | None  # None: cancelled (or delivered and acked, as the relay saw it)


def timer_id(execution: str, path: str, fire_at: float) -> str:
    """A timer's delivery id (docs/internals.md#key-space)."""
    return f"timeout:{execution}:{path}:{fire_at}"


#: What the sink answers for every entry while it refuses them all (``Receiver.refusing``), as the
#: webhook sink reports a 401: a permanent answer marked as one about the sink itself.
REFUSAL = Permanent("http 401", wholesale=WHOLESALE_HINTS[401])


class Receiver:
    """What every replica's sink talks to: it answers per entry and per request, and keeps the
    ledger. ``down``: every request fails (the whole sink is out). ``refusing``: every entry
    gets the same permanent refusal about the sink (a secret rotated on one side only)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.down = False
        self.refusing = False
        #: ids whose last refusal came in a request that carried several targets (an outage)
        self.refused_together: set[str] = set()
        #: replica -> how many entries its next request sends before its lease may have expired
        #: (the rest come back ``Retry(error=NOT_SENT)``, unsent)
        self.lapse: dict[str, int] = {}
        #: every entry a sink left unsent for the lease: (replica, kind, attempt ref, entry id)
        self.not_sent: list[tuple[str, Kind, str, str]] = []
        #: ids of the entries of every request that failed whole (the sink down): sent, never
        #: answered, so not in the ledger, and each may be charged an attempt
        self.unanswered: list[str] = []
        #: replica -> requests of its sink that failed for the sink's own reasons (down, a retry
        #: answered, a refusal)
        self.failures: dict[str, int] = {}
        #: entry id -> answers still to give it, in order (then ``ok``)
        self.scripted: dict[str, list[Answer]] = {}
        #: replicas whose next request hangs until ``release``
        self.hang: set[str] = set()
        self.hung: list[asyncio.Future[None]] = []
        self.ledger: list[Receipt] = []
        #: 0: every entry answered on its own; N: requests of up to N entries, each taken or
        #: refused whole (``--webhook-batch N`` against an all-or-nothing receiver)
        self.batched = 0

    def answer(self, envelope: Envelope) -> Answer:
        queue = self.scripted.get(self.world.entry_id(envelope))
        return queue.pop(0) if queue else "ok"

    def release(self) -> None:
        """The oldest hung request gets its answer."""
        if self.hung:
            self.hung.pop(0).set_result(None)

    def release_all(self) -> None:
        while self.hung:
            self.release()


_OUTCOMES: dict[Answer, Outcome] = {
    "ok": DELIVERED,
    "retry": Retry("model: retry"),
    "retry_after": Retry("model: retry later", after_s=30.0),
    "permanent": Permanent("model: permanent"),
}


class ModelSink(ReadyByReason):
    """One replica's sink (all kinds): hands each request to the receiver."""

    def __init__(self, replica: Replica, receiver: Receiver) -> None:
        self.name = "model"
        self.replica = replica
        self.receiver = receiver

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def not_ready_reason(self) -> str | None:
        return None

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        receiver, world = self.receiver, self.receiver.world
        name = self.replica.name
        hung = name in receiver.hang
        receiver.hang.discard(name)
        lapse = receiver.lapse.pop(name, None)
        if receiver.down:
            receiver.failures[name] = receiver.failures.get(name, 0) + 1
            receiver.unanswered += [world.entry_id(envelope) for envelope in batch]
            raise ConnectionError("model: the sink is down")
        if receiver.batched > 1 and lapse is None and not receiver.refusing:
            whole = await self._deliver_in_requests(batch, receiver.batched)
            await self._hang(hung)
            return whole
        term, holder_term = self.replica.pass_term(), self.replica.term
        outcomes: list[Outcome] = []
        failed: set[str] = set()
        refused: dict[str, str] = {}  # id -> target, of the entries refused in this request
        for index, envelope in enumerate(batch):
            key = envelope.ordering_key
            if lapse is not None and index >= lapse:  # the lease may have expired: not sent
                outcomes.append(Retry(error=NOT_SENT))
                ref, entry_id = world.attempt_ref(envelope), world.entry_id(envelope)
                receiver.not_sent.append((name, envelope.kind, ref, entry_id))
                continue
            if key is not None and key in failed:  # never past an undelivered entry of its key
                outcomes.append(Retry(error=HELD_BACK))
                continue
            self._check_not_paused(envelope)
            answer: str
            outcome: Outcome
            if receiver.refusing:
                answer, outcome = "refused", REFUSAL
                refused[world.entry_id(envelope)] = key if key is not None else envelope.id
            else:
                answer = receiver.answer(envelope)
                outcome = _OUTCOMES[answer]
            if not isinstance(outcome, Delivered) and key is not None:
                failed.add(key)
            outcomes.append(outcome)
            self._receipt(envelope, answer, term, holder_term)
        if len(set(refused.values())) > 1:
            receiver.refused_together |= set(refused)
        else:
            receiver.refused_together -= set(refused)
        if refused or any(isinstance(o, Retry) and o.error.startswith("model:") for o in outcomes):
            receiver.failures[name] = receiver.failures.get(name, 0) + 1
        await self._hang(hung)
        return outcomes

    async def _hang(self, hung: bool) -> None:
        if hung:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.receiver.hung.append(waiter)
            await waiter

    async def _deliver_in_requests(self, batch: Batch, size: int) -> list[Outcome]:
        """The webhook sink's batching (its real lanes and halving) against a receiver that takes
        or refuses each request whole: one entry answered other than ``ok`` refuses its request,
        for its content (split to find it) unless it asked to retry later (a 429 or a 503)."""
        receiver = self.receiver
        envelopes = list(batch)
        keys = [envelope.ordering_key for envelope in envelopes]
        outcomes: list[Outcome] = [Retry(error=HELD_BACK)] * len(envelopes)
        term, holder_term = self.replica.pass_term(), self.replica.term

        async def send(indexes: list[int]) -> tuple[Outcome, bool]:
            answers = [receiver.answer(envelopes[i]) for i in indexes]
            refusal = next((answer for answer in answers if answer != "ok"), None)
            for index, answer in zip(indexes, answers, strict=True):
                envelope = envelopes[index]
                self._check_not_paused(envelope)
                shown = "in_refused_request" if refusal is not None and answer == "ok" else answer
                self._receipt(envelope, shown, term, holder_term)
            if refusal is None:
                return DELIVERED, False
            receiver.failures[self.replica.name] = receiver.failures.get(self.replica.name, 0) + 1
            return _OUTCOMES[refusal], refusal != "retry_after"

        for lane in lanes(keys, size, max_lanes=2):
            await send_lane(lane, keys, size, send, outcomes)
        return outcomes

    def _receipt(self, envelope: Envelope, answer: str, term: int, holder_term: int) -> None:
        """The ledger's line for one entry of one request."""
        world = self.receiver.world
        self.receiver.ledger.append(
            Receipt(
                step=world.step,
                at=world.clock.now(),
                replica=self.replica.name,
                term=term,
                holder_term=holder_term,
                kind=envelope.kind,
                id=world.entry_id(envelope),
                seq=world.entry_seq(envelope),
                key=envelope.ordering_key,
                answer=answer,
            )
        )

    def _check_not_paused(self, envelope: Envelope) -> None:
        world = self.receiver.world
        held = world.paused(envelope.kind, envelope.ordering_key, since_s=self.replica.pass_started_s)
        if held is not None:
            world.violations.append(
                f"{envelope.kind} {world.entry_id(envelope)} sent at step {world.step}"
                f" while {held.describe()} was paused"
            )


class Replica:
    """One relayd process relaying the prefix: a real ``PrefixRelay``, stepped by the schedule."""

    def __init__(self, world: World, name: str) -> None:
        self.world = world
        self.name = name
        self.sink = ModelSink(self, world.receiver)
        sinks: dict[Kind, ModelSink] = {"spawn": self.sink, "outbox": self.sink, "timer": self.sink}
        metrics = RelayMetrics(CollectorRegistry())
        guards = guards_for(sinks, policy=world.options.breaker, metrics=metrics, clock=world.clock)
        #: The one guard of its sink (every kind's): its breaker.
        self.guard = guards["outbox"]
        self.relay = PrefixRelay(
            PREFIX,
            options=world.options,
            redis=world.relay_client,
            sinks=sinks,
            guards=guards,
            metrics=metrics,
            health=Health(),
            stop=asyncio.Event(),
            clock=world.clock,
            token=f"host/{name}",
        )
        self.relay.keeper.may_acquire = True
        #: The lease term this replica holds as the world saw it (0: none).
        self.term = 0
        #: The term each sweeper was made in.
        self.sweeper_terms: dict[Sweeper, int] = {}
        self.task: asyncio.Task[None] | None = None
        #: When its current (or last) pass started (virtual monotonic s).
        self.pass_started_s = float("-inf")

    def pass_term(self) -> int:
        """The term of the sweeper whose pass is running (0: none)."""
        sweeper = self.relay.sweeper
        return 0 if sweeper is None else self.sweeper_terms.get(sweeper, 0)

    @property
    def busy(self) -> bool:
        return self.task is not None and not self.task.done()

    @property
    def quiet(self) -> bool:
        """No pass in flight and no entry held in memory (read, not yet acked)."""
        sweeper = self.relay.sweeper
        return not self.busy and (sweeper is None or sweeper.held_count() == 0)

    async def keeper_turn(self) -> None:
        """One turn of the real keeper; the world notes a new term when the lease was taken."""
        before = await self.world.client.get(self.world.lease_key)
        await self.relay.keeper.turn(self.relay.lease.ttl_s / 3)
        after = await self.world.client.get(self.world.lease_key)
        if after is not None and after.decode() == self.relay.lease.token:
            if before is None:  # a SET NX took it: a new term
                self.world.terms += 1
                self.term = self.world.terms
            self.world.lease_expires_s = self.relay.lease.sent_s or 0.0
            self.world.lease_expires_s += LEASE_TTL_S
        elif not self.relay.keeper.active:
            self.term = 0

    async def one_pass(self) -> None:
        """What the relay's loop does for one turn: stand by without the lease, else one pass."""
        relay = self.relay
        if not relay.lease.held():
            relay._drop_sweeper()
            relay.keeper.note()
            return
        try:
            sweeper = await relay._started_sweeper()
            self.sweeper_terms.setdefault(sweeper, self.term)
            await relay._pass(sweeper, None)
        except Fenced as fenced:
            relay._fenced(fenced)
        except REDIS_ERRORS:
            relay._drop_sweeper()


class World:
    """One schedule's world: Redis, the engine's writes, the replicas and the receiver."""

    def __init__(self, *, seed: int = 0, batch: int = BATCH, redis_port: int | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.clock = VirtualClock()
        self.rng = random.Random(seed)
        self.step = 0
        self.terms = 0
        self.lease_expires_s = float("-inf")
        self.options = SweepOptions(
            prefixes=(PREFIX,),
            batch=batch,
            max_attempts=MAX_ATTEMPTS,
            backoff_base_s=0.5,
            backoff_cap_s=8.0,
            lease_ttl_s=LEASE_TTL_S,
            gap_grace_s=2.0,
            poll_interval_s=1.0,
            breaker=BreakerPolicy(),
        )
        #: replica -> (round-trips of its pass still to go, what then happens)
        self.mid_pass: dict[str, tuple[int, MidPass]] = {}
        # The engine's client, and the replicas' one: the latter's every round-trip may first let
        # what is armed happen (``happens_during``), as Redis runs other clients between a pass's.
        connection = fakeredis.FakeAsyncRedisConnection if redis_port is None else aioredis.Connection
        hooked = _acting_first(self, connection)
        if redis_port is None:
            server = fakeredis.FakeServer()
            self.client: aioredis.Redis = fakeredis.FakeAsyncRedis(server=server)
            self.relay_client: aioredis.Redis = fakeredis.FakeAsyncRedis(
                server=server, connection_class=hooked
            )
        else:
            self.client = aioredis.Redis(port=redis_port)
            self.relay_client = aioredis.Redis.from_pool(
                aioredis.ConnectionPool(port=redis_port, connection_class=hooked)
            )
            self.run(self.client.flushall())
        self.ks = Keyspace(PREFIX)
        self.relay_keys = RelayKeys(self.ks)
        self.lease_key = self.relay_keys.lease
        self.receiver = Receiver(self)
        self.replicas = {name: Replica(self, name) for name in REPLICAS}
        self.committed: list[Committed] = []
        self.timers: dict[tuple[str, str], TimerState] = {}
        #: timer id -> the step at which the engine cancelled or moved it
        self.retired_timers: dict[str, int] = {}
        #: every timer id the engine ever armed, with its fire_at
        self.armed_timers: dict[str, float] = {}
        #: each execution's version, bumped by every commit of its timers
        self.versions: dict[str, int] = {}
        #: ids ever seen in a dead-letter hash, and ids an operator purged
        self.ever_dead: set[str] = set()
        self.purged: set[str] = set()
        #: outbox events the engine itself overwrote (a seq reused after a counter reset)
        self.overwritten: set[str] = set()
        self.violations: list[str] = []
        #: operator pauses in force: scope -> (the pause, the virtual monotonic time it was made)
        self.pauses: dict[str, tuple[Pause, float]] = {}
        #: a pause is obeyed by every pass started this long after it (the pause watch's period)
        self.pause_read_every_s = min(PAUSES_READ_EVERY_S, self.options.poll_interval_s)
        self._counter = 0

    # --- running ------------------------------------------------------------------------------
    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def settle(self) -> None:
        """Let every runnable task run until all are done or waiting on a hung request."""
        for _ in range(400):
            self.loop.run_until_complete(asyncio.sleep(0))
            if not any(r.busy for r in self.replicas.values()):
                break
        self._reap()

    def _reap(self) -> None:
        for replica in self.replicas.values():
            task = replica.task
            if task is not None and task.done():
                replica.task = None
                if not task.cancelled() and (exc := task.exception()) is not None:
                    raise exc

    def close(self) -> None:
        self.receiver.release_all()
        for replica in self.replicas.values():
            if replica.task is not None:
                replica.task.cancel()
            if replica.relay._stop_waiter is not None:
                replica.relay._stop_waiter.cancel()
        with contextlib.suppress(BaseException):
            self.settle()
        self.run(self.relay_client.aclose())
        self.run(self.client.aclose())
        self.loop.close()

    # --- helpers ------------------------------------------------------------------------------
    def fresh(self, stem: str) -> str:
        self._counter += 1
        return f"{stem}{self._counter}"

    def entry_id(self, envelope: Envelope) -> str:
        if envelope.kind == "outbox":
            event = envelope.body["event"]
            assert isinstance(event, dict)
            return str(event["id"])
        if envelope.kind == "spawn":
            return str(envelope.ordering_key)
        return envelope.id

    def entry_seq(self, envelope: Envelope) -> int | None:
        if envelope.kind == "timer":
            return None
        return int(envelope.id.rsplit(":", 1)[1])

    def attempt_ref(self, envelope: Envelope) -> str:
        """The field of an entry's attempt record: its seq, or a timer's event id."""
        seq = self.entry_seq(envelope)
        return envelope.id if seq is None else str(seq)

    async def attempt_counts(self) -> dict[tuple[str, str], int]:
        """(kind, ref) -> the failed attempts recorded in Redis."""
        counts: dict[tuple[str, str], int] = {}
        for kind in ("spawn", "outbox", "timer"):
            for ref, raw in (await self.client.hgetall(self.relay_keys.attempts(kind))).items():
                record = decode_record(raw)
                counts[(kind, ref.decode())] = record.attempts if record is not None else 0
        return counts

    async def dead_ids(self) -> set[str]:
        """The entry ids parked in the dead-letter hashes now."""
        found: set[str] = set()
        for kind in ("spawn", "outbox", "timer"):
            for raw in (await self.client.hgetall(self.relay_keys.dead(kind))).values():
                letter = decode_dead_letter(raw)
                if kind == "timer":
                    found.add(letter.id)
                    continue
                value = orjson.loads(_bytes_from(letter.document, "value"))
                found.add(str(orjson.loads(value["e"])["id"]) if kind == "outbox" else str(value["c"]))
        return found

    # --- engine actions -----------------------------------------------------------------------
    async def commit_outbox(self, target: str) -> str:
        event = self.fresh("e")
        seq = int(await self.client.incr(self.ks.outbox_seq))
        if (old := await self.client.hget(self.ks.outbox, str(seq))) is not None:
            # A counter reset made the engine overwrite a live entry: its loss is the engine's.
            self.overwritten.add(str(orjson.loads(orjson.loads(old)["e"])["id"]))
        await self.client.hset(self.ks.outbox, str(seq), outbox_value(target, event))
        self.committed.append(Committed("outbox", event, seq, target, self.step))
        return event

    async def commit_spawn(self) -> str:
        child = self.fresh("c")
        seq = int(await self.client.incr(self.ks.spawns_seq))
        await self.client.hset(self.ks.spawns, str(seq), spawn_value("root", child))
        self.committed.append(Committed("spawn", child, seq, child, self.step))
        return child

    def happens_during(self, replica: str, after: int, what: MidPass) -> None:
        """``what`` happens just before the ``after``-th next round-trip of ``replica``'s next
        pass (0: before its first), between two of its round-trips."""
        self.mid_pass[replica] = (after, what)

    async def before_round_trip(self) -> None:
        """A pass is about to send a round-trip: what is armed for it happens first when due."""
        name = PASSING.get()
        if name is None or name not in self.mid_pass:
            return
        left, what = self.mid_pass[name]
        if left > 0:
            self.mid_pass[name] = (left - 1, what)
            return
        del self.mid_pass[name]
        if what == "event":
            await self.commit_outbox("t1")
        elif what == "spawn_and_child_event":  # one commit of the engine: a spawn, an event to it
            await self.commit_outbox(await self.commit_spawn())
        elif what == "timer_cancelled":
            await self.cancel_timer("x1", "p")
        elif what == "lease_lost":
            await self.lose_lease()
        elif what == "replay":
            await self.replay()
        else:  # x1's timer armed (again) due now, or moved 20 s later
            await self.arm_timer("x1", "p", -1.0 if what == "timer_due" else 20.0)

    async def arm_timer(self, execution: str, path: str, in_s: float) -> None:
        """ZADD a timer (new, or re-armed earlier or later: its old id is taken back)."""
        fire_at = round(self.clock.now() + in_s, 3)
        state = self.timers.get((execution, path))
        if state is not None and state.fire_at is not None and state.fire_at != fire_at:
            self.retired_timers.setdefault(timer_id(execution, path, state.fire_at), self.step)
        async with self.client.pipeline(transaction=True) as commit:
            commit.zadd(self.ks.timers, {timer_member(execution, path): fire_at})
            await self._commit_execution(commit, execution)
        self.timers[(execution, path)] = TimerState(execution, path, fire_at)
        self.armed_timers[timer_id(execution, path, fire_at)] = fire_at
        # Armed again at a fire_at it had before: the same id is live again.
        self.retired_timers.pop(timer_id(execution, path, fire_at), None)

    async def cancel_timer(self, execution: str, path: str) -> None:
        state = self.timers.get((execution, path))
        async with self.client.pipeline(transaction=True) as commit:
            commit.zrem(self.ks.timers, timer_member(execution, path))
            removed = (await self._commit_execution(commit, execution))[0]
        if state is not None and state.fire_at is not None and removed:
            self.retired_timers.setdefault(timer_id(execution, path, state.fire_at), self.step)
        self.timers[(execution, path)] = TimerState(execution, path, None)

    async def _commit_execution(self, commit: Any, execution: str) -> list[Any]:
        """Run ``commit`` with the execution's next version, as the engine commits an execution
        and its timers in one step (what a timer's replay compares)."""
        self.versions[execution] = self.versions.get(execution, 0) + 1
        body = orjson.dumps({"id": execution, "version": self.versions[execution]})
        commit.set(self.ks.exe(execution), body)
        return list(await commit.execute())

    async def reset_counter(self) -> None:
        """The engine's counter set back to 0, only with the outbox drained (docs/runbook.md:
        with entries left, the engine's next commits overwrite them at the reused seqs)."""
        if not await self.client.hlen(self.ks.outbox):
            await self.client.set(self.ks.outbox_seq, 0)

    async def jump_counter(self, by: int) -> None:
        await self.client.incrby(self.ks.outbox_seq, by)

    # --- operator actions ---------------------------------------------------------------------
    async def replay(self) -> None:
        await replay_dead_letters(self.client, self.ks)

    async def purge(self) -> None:
        self.purged |= await self.dead_ids()
        await purge_dead_letters(self.client, self.ks)

    async def pause(self, kind: str | None, sink: str | None, target: str | None) -> None:
        """``relayd pause`` of a scope (the real state code); a scope paused already stays paused
        since its first pause."""
        wanted = Pause(kind, sink, target, by="model", reason="model")
        await pause(self.client, self.ks, wanted, command="pause", source="model")
        self.pauses.setdefault(wanted.scope, (wanted, self.clock.monotonic()))

    async def resume(self, scope: str) -> None:
        wanted, _ = self.pauses.pop(scope)
        await resume(self.client, self.ks, wanted, command="resume", source="model")

    def paused(self, kind: str, key: str | None, *, since_s: float) -> Pause | None:
        """The pause in force that every pass started at ``since_s`` (monotonic) obeys and that
        holds an entry of ``kind`` with ordering key ``key``, if any."""
        for wanted, made_s in self.pauses.values():
            if since_s < made_s + self.pause_read_every_s:
                continue
            if wanted.kind not in (None, kind) or wanted.sink not in (None, "model"):
                continue
            if wanted.target is None or wanted.target == key:
                return wanted
        return None

    def replayed(self) -> set[str]:
        """Entries the receiver got under a seq other than their commit's: put back by a replay,
        so parked once, also where no pass boundary saw them parked (parked by a pass and
        replayed before it ended)."""
        committed = {(e.kind, e.id): e.seq for e in self.committed}
        return {
            r.id
            for r in self.receiver.ledger
            if r.seq is not None and committed.get((r.kind, r.id), r.seq) != r.seq
        }

    def scope_of(self, entry_id: str) -> tuple[str, str | None]:
        """The kind and ordering key of an entry by its id (as ``dead_ids`` names it)."""
        if entry_id.startswith("timeout:"):
            return "timer", entry_id.split(":")[1]
        for entry in self.committed:
            if entry.id == entry_id:
                return entry.kind, entry.key
        return "outbox", None

    # --- time and leases ----------------------------------------------------------------------
    async def advance(self, seconds: float) -> None:
        """Both clocks move; a lease whose virtual TTL ran out is gone from Redis."""
        self.clock.epoch_s += seconds
        self.clock.mono_s += seconds
        if self.clock.mono_s >= self.lease_expires_s:
            await self.client.delete(self.lease_key)
            self.lease_expires_s = float("inf")

    def step_redis_clock(self, seconds: float) -> None:
        """Redis's clock steps (an NTP step, a failover to a host whose clock differs)."""
        self.clock.epoch_s += seconds

    async def lose_lease(self) -> None:
        """The lease key is gone (a failover that lost it, an operator's DEL)."""
        await self.client.delete(self.lease_key)
        self.lease_expires_s = float("inf")

    # --- replicas -----------------------------------------------------------------------------
    def start_pass(self, name: str) -> None:
        replica = self.replicas[name]
        if replica.busy:
            return
        replica.task = self.loop.create_task(self._observed_pass(replica))
        self.settle()

    async def _observed_pass(self, replica: Replica) -> None:
        receiver, name, breaker = self.receiver, replica.name, replica.guard.breaker
        before = await self.dead_ids()
        attempts_before = await self.attempt_counts()
        down, refusing = receiver.down, receiver.refusing
        closed, failures = breaker.state == "closed", receiver.failures.get(name, 0)
        ledger_from, not_sent_from = len(receiver.ledger), len(receiver.not_sent)
        unanswered_from = len(receiver.unanswered)
        replica.pass_started_s = started_s = self.clock.monotonic()
        PASSING.set(name)
        try:
            await replica.one_pass()
        finally:
            PASSING.set(None)
            self.mid_pass.pop(name, None)  # not reached in this pass: it does not happen
        after = await self.dead_ids()
        self.ever_dead |= after
        if down and receiver.down and after - before:
            self.violations.append(f"dead letters during a whole-sink outage: {sorted(after - before)}")
        if refusing and receiver.refusing and (after - before) & receiver.refused_together:
            parked = sorted((after - before) & receiver.refused_together)
            self.violations.append(f"dead letters during a whole-sink refusal (several targets): {parked}")
        if closed and breaker.state != "closed" and receiver.failures.get(name, 0) == failures:
            self.violations.append(
                f"{name}'s breaker opened at step {self.step} with no failure of the sink"
                f" (entries not sent for the lease counted): {breaker.reason}"
            )
        # The attempt records are shared: a charge while another replica's pass sent the entry
        # (a hung pass resumed beside it; a request to a sink that is down counts, unanswered)
        # is that replica's, and may be; one send is charged at most once, so more charges than
        # sends in the window include one for the unsent entry.
        sends = Counter(r.id for r in receiver.ledger[ledger_from:])
        sends.update(receiver.unanswered[unanswered_from:])
        attempts_after = await self.attempt_counts()
        for who, unsent, ref, entry_id in receiver.not_sent[not_sent_from:]:
            record = (unsent, ref)
            charges = attempts_after.get(record, 0) - attempts_before.get(record, 0)
            if who == name and charges > sends[entry_id]:
                self.violations.append(
                    f"an attempt charged to {unsent} {entry_id}, not sent for the lease"
                    f" ({charges} charges, {sends[entry_id]} sends)"
                )
        for entry_id in sorted(after - before):
            kind, key = self.scope_of(entry_id)
            if (held := self.paused(kind, key, since_s=started_s)) is not None:
                self.violations.append(f"{kind} {entry_id} dead-lettered while {held.describe()} was paused")

    def keeper(self, name: str) -> None:
        self.run(self.replicas[name].keeper_turn())
        self.settle()

    def drain(self, rounds: int = 60) -> None:
        """A healthy sink, one replica, time moving: everything due is delivered or parked."""
        receiver = self.receiver
        for scope in list(self.pauses):
            self.run(self.resume(scope))
        receiver.down = receiver.refusing = False
        receiver.lapse.clear()
        receiver.scripted.clear()
        receiver.hang.clear()
        quiet = 0
        for _ in range(rounds):
            receiver.release_all()
            self.settle()
            self.run(self.advance(3.0))
            for name in self.replicas:
                self.keeper(name)
                self.start_pass(name)
            quiet = quiet + 1 if self.run(self._quiet()) else 0
            if quiet >= 3:
                break
        receiver.release_all()
        self.settle()

    async def _quiet(self) -> bool:
        """Nothing left in Redis to deliver and nothing held in memory."""
        client, ks = self.client, self.ks
        if await client.hlen(ks.outbox) or await client.hlen(ks.spawns):
            return False
        if await client.zcount(ks.timers, "-inf", self.clock.now()):
            return False
        return not any(
            r.busy or (r.relay.sweeper and r.relay.sweeper.held_count()) for r in self.replicas.values()
        )


def _acting_first(world: World, base: type[Any]) -> type[Any]:
    """A ``base`` connection class whose every send lets ``world`` act first (``before_round_trip``)."""

    class ActingFirst(base):  # type: ignore[misc,valid-type]
        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            await world.before_round_trip()
            await super().send_packed_command(command, check_health)

    return ActingFirst
