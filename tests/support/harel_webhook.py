"""A webhook receiver that feeds harel through its public API (docs/harel.md, "The webhook
route for harel users"), for the test that runs the harel application through it.

It gives harel's own relay and worker their chance first: each envelope waits until it is
``handoff_s`` old, then goes to harel only if harel has not handled it (its outbox or spawn field,
or its timer, still there). Outbox events and Timeouts go through ``DistributedRunner.send``; a
spawn through harel's worker logic, the one step harel 0.9 has no public API for.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import redis
from harel.engine.core import timeout_event
from harel.engine.distributed import DistributedRunner
from harel.engine.flow import run_inline
from harel.engine.hosting import WorkerLogic
from harel.engine.store import RedisStore, SpawnEntry, StoreConflict
from harel.engine.transport import RedisTransport
from harel.spec.states import Event
from harel.worker import load_definitions


class HarelReceiver:
    """Feeds harel under ``prefix`` from relayd/1 envelopes (``receive``: one envelope)."""

    def __init__(self, redis_url: str, prefix: str, definitions: str, *, handoff_s: float = 3.0) -> None:
        self.client = redis.Redis.from_url(redis_url)
        self.prefix, self.handoff_s = prefix, handoff_s
        self.store = RedisStore(self.client, prefix=prefix)
        self.transport = RedisTransport(self.client, prefix=prefix)
        self.runner = DistributedRunner(
            self.store, self.transport, load_definitions(definitions), execution="inline"
        )
        self.worker_logic = WorkerLogic(load_definitions(definitions))
        self.fed: dict[str, int] = {"outbox": 0, "spawn": 0, "timer": 0}

    def receive(self, envelope: dict[str, Any]) -> None:
        wait = float(envelope["relayed_at"]) + self.handoff_s - time.time()
        if wait > 0:
            time.sleep(wait)
        kind, p = envelope["kind"], self.prefix
        if kind == "outbox":
            if envelope["target_id"] is None or not self.client.hexists(f"{p}:outbox", str(envelope["seq"])):
                return  # untargeted, or harel's relay published it
            self.runner.send(envelope["target_id"], Event.model_validate(envelope["event"]))
        elif kind == "timer":
            member = f"{envelope['execution_id']}\x00{envelope['path']}"
            if self.client.zscore(f"{p}:timers", member) != envelope["fire_at"]:
                return  # harel's worker fired it, or a transition cancelled it
            event = timeout_event(envelope["execution_id"], envelope["path"], envelope["fire_at"])
            self.runner.send(envelope["execution_id"], event)
        else:
            if not self.client.hexists(f"{p}:spawns", str(envelope["seq"])):
                return  # harel's relay created the child
            self.create_child(envelope)
        self.fed[kind] += 1

    def create_child(self, envelope: dict[str, Any]) -> None:
        parent = self.store.load(envelope["parent_id"])
        if parent is None:
            return
        entry = SpawnEntry(
            seq=envelope["seq"],
            parent_id=envelope["parent_id"],
            child_id=envelope["child_id"],
            root_path=envelope["root_path"],
            context=envelope["context"],
        )
        flow = self.worker_logic._transport_logic(parent)._create_spawn_flow(entry)  # harel's own creation
        with contextlib.suppress(StoreConflict):  # harel's relay created it meanwhile
            run_inline(flow, {"store": self.store, "transport": self.transport})
