"""harel end to end: a backlog left by harel's own runner, relayed by ``relayd sweep --once
--sink harel:``, then handled by harel's own worker process.

1. Seed, in this process, with harel's ``DistributedRunner`` over harel's own ``RedisStore``
   and ``RedisTransport`` (harel's prefix rules; the prefix is an identifier). The ``flow``
   executions fork two regions whose events are published; then the transport's publish goes
   down (an outage), so when the seeding worker handles the regions' events, each region's
   ``Finished`` (an emit to the parent execution) is committed to harel's outbox and its
   inline relay fails: the outbox keeps it, as it does when a harel worker dies after its
   commit. The ``timed`` executions are started on a clock 100 s in the past, so their
   ``timeout`` timers are already due in the zset.
2. ``relayd sweep --once --prefix P --sink harel:REDIS_URL`` (a subprocess) publishes all of
   it into harel's transport and acks it: the outbox and the timers zset end up empty.
3. ``python -m harel.worker`` (harel's own worker, configured by ``HAREL_*``; the machines come
   from ``tests/e2e/harel_workflow.py``, whose action it imports via ``PYTHONPATH``) consumes
   the transport: every parent joins, waits out its own timeout and finishes; every ``timed``
   execution expires on the Timeout relayd published (its timer was already gone from the zset,
   so the worker could not have fired it itself). The final states record the worker's pid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from harel import definition_from_dsl
from harel.engine.distributed import DistributedRunner
from harel.engine.execution import Status
from harel.engine.store import RedisStore as HarelRedisStore
from harel.engine.transport import RedisTransport as HarelRedisTransport
from harel.spec.states import Event
from support.redis_server import RedisServer

pytestmark = pytest.mark.crash

E2E_DIR = Path(__file__).resolve().parent
FLOWS = 3
TIMED = 3
#: The seeding runner's clock lags real time, so the timers it arms are due at once.
SEED_CLOCK_LAG_S = 100.0


class OutageTransport(HarelRedisTransport):  # type: ignore[misc]  # harel is untyped
    """harel's own Redis transport whose ``publish`` fails while ``down`` is set."""

    down = False

    def publish(self, *args: Any, **kwargs: Any) -> Any:
        if self.down:
            raise redis.ConnectionError("transport publish is down (test outage)")
        return super().publish(*args, **kwargs)


def drain(worker: Any) -> int:
    """Step the seeding worker until nothing is claimable; count the steps that failed."""
    failed = 0
    while True:
        try:
            if not worker.step():
                return failed
        except redis.ConnectionError:
            failed += 1  # committed, inline relay failed: the group's lock expires on its own


def seed_backlog(url: str, prefix: str) -> tuple[list[str], list[str]]:
    """Leave harel's own backlog behind: parents' Finished in the outbox, due timers."""
    import harel_workflow

    definitions = {name: definition_from_dsl(harel_workflow.SOURCE, name) for name in harel_workflow.MACHINES}
    client = redis.Redis.from_url(url)
    clock = lambda: time.time() - SEED_CLOCK_LAG_S  # noqa: E731
    store = HarelRedisStore(client, prefix=prefix)
    transport = OutageTransport(client, clock, prefix=prefix)
    runner = DistributedRunner(store, transport, definitions, clock, execution="inline")
    worker = runner.worker(clock=clock, visibility=1.0)

    flows = [runner.create("flow").id for _ in range(FLOWS)]
    timed = [runner.create("timed").id for _ in range(TIMED)]
    drain(worker)
    for flow in flows:
        runner.send(flow, Event(kind="Go"))
    drain(worker)
    for flow in flows:
        region_a, region_b = sorted(store.load(flow).children, key=lambda c: store.load(c).root_path)
        runner.send(region_a, Event(kind="A"))
        runner.send(region_b, Event(kind="B"))
    transport.down = True
    failed = drain(worker)
    client.close()
    assert failed == 2 * FLOWS, "each region's Finished should have failed its inline relay"
    return flows, timed


def test_harel_backlog_relayed_by_relayd_is_handled_by_a_harel_worker_process(
    redis_server: RedisServer, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Executions advance in a real harel worker on the events relayd published."""
    monkeypatch.syspath_prepend(str(E2E_DIR))
    import harel_workflow

    flows, timed = seed_backlog(redis_server.url, prefix)
    client = redis_server.client()
    store = HarelRedisStore(client, prefix=prefix)
    outbox_before = store.pending_outbox()
    due_before = store.due_timers(time.time())
    seeded = {eid: store.load(eid).active_path for eid in flows + timed}

    harel_workflow.write_definitions(tmp_path)
    # relayd alone on a backlog no harel is relaying: no handoff to wait for
    alone = "handoff_delay=0&timer_grace=0&timer_hold=0"
    argv = [
        sys.executable, "-m", "relayd", "sweep", "--once",
        "--redis-url", redis_server.url,
        "--prefix", prefix,
        "--sink", f"harel:{redis_server.url}?definitions={tmp_path}&{alone}",
        "--log-format", "json",
    ]  # fmt: skip
    env_relay = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
    relay = subprocess.run(argv, capture_output=True, timeout=60, env=env_relay, check=False)
    outbox_after = store.pending_outbox()
    timers_after = client.zcard(f"{prefix}:timers")

    env = {
        **os.environ,
        "HAREL_STORE_BACKEND": "redis",
        "HAREL_REDIS_URL": redis_server.url,
        "HAREL_PREFIX": prefix,
        "HAREL_DEFINITIONS_DIR": str(tmp_path),
        "HAREL_VISIBILITY": "2",
        "HAREL_WORKER_ID": "e2e-worker",
        "PYTHONPATH": os.pathsep.join([str(E2E_DIR), os.environ.get("PYTHONPATH", "")]),
    }
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "harel.worker"], stdout=log, stderr=subprocess.STDOUT, env=env
        )
    try:
        deadline = time.monotonic() + 30
        final: dict[str, Any] = {}
        while time.monotonic() < deadline:
            final = {eid: store.load(eid) for eid in flows + timed}
            if all(exe.status is Status.DONE for exe in final.values()) or worker.poll() is not None:
                break
            time.sleep(0.1)
        took_s = 30 - (deadline - time.monotonic())
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(10)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        client.close()
    print(
        f"harel_e2e outbox_relayed={len(outbox_before)} timers_relayed={len(due_before)} "
        f"worker_finished_all_s={took_s:.2f}"
    )
    worker_log = log_path.read_text(errors="replace")[-3000:]

    assert sorted(e.target_id for e in outbox_before) == sorted(flows * 2)
    assert {e.event.kind for e in outbox_before} == {"Finished"}
    assert sorted(eid for eid, _, _ in due_before) == sorted(timed)
    assert set(seeded.values()) == {"Fork", "Armed"}
    assert relay.returncode == 0, relay.stderr.decode()[-2000:]
    assert outbox_after == []
    assert timers_after == 0, "relayd should have published and acked every due timer"
    assert {eid: (exe.status, exe.active_path) for eid, exe in final.items()} == {
        **dict.fromkeys(flows, (Status.DONE, "Finished")),
        **dict.fromkeys(timed, (Status.DONE, "Expired")),
    }, worker_log
    assert {exe.context.get("done_by_pid") for exe in final.values()} == {worker.pid}
