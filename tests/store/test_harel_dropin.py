"""Drop-in: harel's own runners drive a workflow to completion on our stores.

The workflow forks two orthogonal regions (spawns), each region's ``Finished`` reaches the
parent through the outbox (emits), and the joined state waits on a ``timeout`` (a timer).
Our stores get harel's model classes and harel's conflict error, as an engine would pass.
"""

from __future__ import annotations

import pytest
from harel import definition_from_dsl
from harel.engine.aio.durable import AsyncDurableRunner
from harel.engine.durable import DurableRunner
from harel.engine.execution import Execution as HarelExecution
from harel.engine.execution import Status as HarelStatus
from harel.engine.store import StoreConflict as HarelStoreConflict
from harel.spec.states import Event as HarelEvent

from store import AsyncRedisStore, RedisStore

SOURCE = """
event Go {}
event A {}
event B {}
machine flow {
  initial Idle
  state Idle {}
  orthogonal Fork {
    state RegionA {
      initial WaitA
      state WaitA {}
      final DoneA success
      from WaitA to DoneA on A
    }
    state RegionB {
      initial WaitB
      state WaitB {}
      final DoneB success
      from WaitB to DoneB on B
    }
  }
  state Waiting { timeout 5 }
  final Finished success
  final Failed failed
  from Idle to Fork on Go
  from Fork join all to Waiting else to Failed
  from Waiting to Finished on Timeout
}
"""

HAREL_TYPES = {
    "execution_model": HarelExecution,
    "event_model": HarelEvent,
    "conflict_error": HarelStoreConflict,
}


@pytest.fixture(scope="module")
def definition():
    return definition_from_dsl(SOURCE, "flow")


class Clock:
    def __init__(self) -> None:
        self.now_s = 1_000.0

    def __call__(self) -> float:
        return self.now_s


@pytest.mark.parametrize("execution", ["inline", "background"])
def test_harel_durable_runner_completes_on_our_sync_store(definition, sync_client, prefix, execution) -> None:
    store = RedisStore(sync_client, prefix=prefix, **HAREL_TYPES)
    clock = Clock()
    runner = DurableRunner(store, {definition.id: definition}, clock=clock, execution=execution)

    exe = runner.create(definition.id)
    exe = runner.process(exe.id, HarelEvent(kind="Go"))
    children = list(exe.children)
    runner.process(children[0], HarelEvent(kind="A"))
    runner.process(children[1], HarelEvent(kind="B"))
    joined = store.load(exe.id)
    armed = store.due_timers(clock.now_s + 10)
    clock.now_s += 10
    fired = runner.fire_due_timers()
    done = store.load(exe.id)

    assert len(children) == 2
    assert joined.active_path == "Waiting"
    assert [(exe.id, "Waiting")] == [(i, p) for i, p, _ in armed]
    assert fired == 1
    assert (done.status, done.outcome, done.active_path) == (HarelStatus.DONE, "success", "Finished")
    assert store.pending_outbox() == []
    assert store.pending_spawns() == []
    assert store.due_timers(clock.now_s + 1e6) == []
    # the fork went through the spawns hash and the joins through the outbox
    assert int(sync_client.get(f"{prefix}:spawns:seq")) == 2
    assert int(sync_client.get(f"{prefix}:outbox:seq")) >= 2


async def test_harel_async_runner_completes_on_our_async_store(definition, async_client, prefix) -> None:
    store = AsyncRedisStore(async_client, prefix=prefix, **HAREL_TYPES)
    clock = Clock()
    runner = AsyncDurableRunner(store, {definition.id: definition}, clock)

    exe = await runner.create(definition.id)
    exe = await runner.process(exe.id, HarelEvent(kind="Go"))
    children = list(exe.children)
    await runner.process(children[0], HarelEvent(kind="A"))
    await runner.process(children[1], HarelEvent(kind="B"))
    clock.now_s += 10
    fired = await runner.fire_due_timers()
    done = await store.load(exe.id)

    assert len(children) == 2
    assert fired == 1
    assert (done.status, done.outcome, done.active_path) == (HarelStatus.DONE, "success", "Finished")
    assert await store.pending_outbox() == []
    assert await store.pending_spawns() == []
    assert int(await async_client.get(f"{prefix}:spawns:seq")) == 2
    assert int(await async_client.get(f"{prefix}:outbox:seq")) >= 2


def _drain(worker) -> None:
    while worker.step():
        pass


@pytest.mark.parametrize("execution", ["inline", "background"])
def test_harel_worker_completes_on_our_sync_store(definition, sync_client, prefix, execution) -> None:
    from harel.engine.distributed import DistributedRunner
    from harel.engine.transport import RedisTransport

    store = RedisStore(sync_client, prefix=prefix, **HAREL_TYPES)
    clock = Clock()
    transport = RedisTransport(sync_client, clock, prefix=prefix)
    runner = DistributedRunner(store, transport, {definition.id: definition}, clock, execution=execution)
    worker = runner.worker(clock=clock)

    exe = runner.create(definition.id)
    _drain(worker)
    runner.send(exe.id, HarelEvent(kind="Go"))
    _drain(worker)
    children = list(store.load(exe.id).children)
    runner.send(children[0], HarelEvent(kind="A"))
    runner.send(children[1], HarelEvent(kind="B"))
    _drain(worker)
    clock.now_s += 10
    fired = worker.fire_due_timers()
    _drain(worker)
    done = store.load(exe.id)

    assert len(children) == 2
    assert fired == 1
    assert (done.status, done.outcome, done.active_path) == (HarelStatus.DONE, "success", "Finished")
    assert store.pending_outbox() == []
    assert store.pending_spawns() == []
