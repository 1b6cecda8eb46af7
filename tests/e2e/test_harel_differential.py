"""harel alone against harel plus relayd with the harel sink: the same application, driven the
same way, in the same run, must end the same.

The application is ``support.harel_app``: 12 orders, each forking ``Payment`` (``Paid`` before
its 6 s timeout, or never: that timeout decides the outcome) and ``Shipping`` (an invoked
``courier`` whose context has defaults the order branches on); actions count their side effects
in a file. Each scenario runs two deployments side by side on one real redis-server, under two
prefixes: (a) harel's worker alone, (b) the same plus ``relayd sweep --sink harel:...`` with its
default handoff delay and timer grace. Driving: create the orders and send ``Go`` (harel's
``DistributedRunner``), wait until every ``Payment`` region waits in both, send ``Paid`` to 8,
wait until every order is final in both. Then, in both: the same executions with the same final
states, outcomes and contexts (every child's too), each final action and each courier dispatch
run once (distinct idempotency keys in the ledger), and nothing left (outbox, spawns, timers,
queues, dead letters).

Scenarios: steady state with keyspace notifications on and off, and through the webhook route
(``--sink webhook:`` to ``support.harel_webhook``, which feeds harel through its API) after a
crash; a crash between commit and relay (the worker dies right after the first commit that carries spawns,
restarted 4 s later);
the worker SIGKILLed for 10 s while the orders wait, ``Paid`` sent meanwhile (queued at the
parents) and every unpaid timer coming due during the outage.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from support.harel_app import write_definitions
from support.harel_run import HarelDeployment
from support.harel_webhook import HarelReceiver
from support.http_receiver import serve_in_thread
from support.redis_server import RedisServer
from support.waiting import wait_until

ORDERS = [f"o{n}" for n in range(12)]
PAID = ORDERS[:8]
PAY_TIMEOUT_S = 6
FINAL_TIMEOUT_S = 90.0


@pytest.fixture
def pair(redis_server: RedisServer, tmp_path: Path) -> Iterator[tuple[HarelDeployment, HarelDeployment]]:
    """(harel alone, harel beside relayd) on two fresh prefixes of one redis-server."""
    definitions = write_definitions(tmp_path / "definitions", pay_timeout_s=PAY_TIMEOUT_S)
    run = uuid.uuid4().hex[:8]
    alone = HarelDeployment(
        redis_server.url, f"alone_{run}", tmp_path / "alone", definitions, relayd_sink_params=None
    )
    beside = HarelDeployment(
        redis_server.url, f"beside_{run}", tmp_path / "beside", definitions, relayd_sink_params=""
    )
    yield alone, beside
    alone.stop()
    beside.stop()


def _each(pair: tuple[HarelDeployment, HarelDeployment], what: str, check: str) -> None:
    for deployment in pair:
        wait_until(
            lambda d=deployment: getattr(d, check)(ORDERS),
            FINAL_TIMEOUT_S,
            f"{what} ({deployment.prefix})\n{deployment.logs()}",
            poll_s=0.1,
        )


def _start(pair: tuple[HarelDeployment, HarelDeployment], *, crash_after_spawns: bool = False) -> None:
    for deployment in pair:
        deployment.start_worker(crash_after_spawns=crash_after_spawns)
        deployment.start_relayd()


def _finish_and_compare(pair: tuple[HarelDeployment, HarelDeployment]) -> dict[str, int]:
    """Wait until both are final and drained, assert they are the same; relayd's handoff counts."""
    alone, beside = pair
    _each(pair, "every order final", "all_final")
    for deployment in pair:
        wait_until(
            deployment.drained,
            FINAL_TIMEOUT_S,
            f"nothing left in {deployment.prefix}: {deployment.leftovers()}",
        )
    executions = alone.executions()
    assert beside.executions() == executions
    orders = {order: executions[order]["active_path"] for order in ORDERS}
    assert orders == {order: "Done" if order in PAID else "Failed" for order in ORDERS}
    couriers = [record for record in executions.values() if record["definition_id"] == "courier"]
    assert [record["context"] for record in couriers] == [{"tries": 2, "note": "by-courier"}] * len(ORDERS)
    effects = alone.side_effects()
    assert beside.side_effects() == effects
    assert set(effects.values()) == {1}, "each final action and dispatch ran once"
    assert sorted(what for _, what in effects) == sorted(["dispatch"] * 12 + ["done"] * 8 + ["failed"] * 4)
    return beside.relay_counts()


@pytest.mark.parametrize("notifications", ["KEA", ""], ids=["notifications-on", "notifications-off"])
def test_steady_state_ends_as_harel_alone(
    pair: tuple[HarelDeployment, HarelDeployment], redis_server: RedisServer, notifications: str
) -> None:
    redis_server.client().config_set("notify-keyspace-events", notifications)
    _start(pair)
    for deployment in pair:
        deployment.create_orders(ORDERS)
    _each(pair, "every Payment region waiting", "regions_waiting")
    for deployment in pair:
        deployment.pay(PAID)

    counts = _finish_and_compare(pair)

    print(f"harel_differential steady notifications={notifications or 'off'} relayd_counts={counts}")
    # beside a live harel, relayd leaves every entry to it (the handoff delay is well past its latency)
    assert not any(n for field, n in counts.items() if field.endswith(":relayd")), counts


def test_a_crash_between_commit_and_relay_ends_as_harel_alone(
    pair: tuple[HarelDeployment, HarelDeployment],
) -> None:
    """The worker dies right after committing a fork (its spawns not yet created); restarted
    4 s later. relayd creates those children meanwhile, with harel's code: the same children."""
    _start(pair, crash_after_spawns=True)
    for deployment in pair:
        deployment.create_orders(ORDERS)
    for deployment in pair:
        wait_until(deployment.worker_exited, FINAL_TIMEOUT_S, f"the crash ({deployment.prefix})")
    time.sleep(4.0)
    for deployment in pair:
        deployment.start_worker()
    _each(pair, "every Payment region waiting", "regions_waiting")
    for deployment in pair:
        deployment.pay(PAID)

    counts = _finish_and_compare(pair)

    print(f"harel_differential crash relayd_counts={counts}")
    assert counts.get("spawn:relayd", 0) >= 1, "relayd created the crashed fork's children"


def test_a_worker_killed_for_10_s_ends_as_harel_alone(pair: tuple[HarelDeployment, HarelDeployment]) -> None:
    """SIGKILL while the orders wait; Paid is queued at the parents during the outage and every
    unpaid order's timeout comes due: relayd holds a timer while its workflow has events queued,
    so Paid still wins, as with harel alone."""
    _start(pair)
    for deployment in pair:
        deployment.create_orders(ORDERS)
    for deployment in pair:  # each killed as soon as its own orders wait, long before a timeout
        wait_until(
            lambda d=deployment: d.regions_waiting(ORDERS), FINAL_TIMEOUT_S, "the regions", poll_s=0.05
        )
        deployment.kill_worker()
        deployment.pay(PAID)
    assert not any(d.timeouts_fired() for d in pair), "a timeout fired before the outage"
    time.sleep(10.0)
    for deployment in pair:
        deployment.start_worker()

    counts = _finish_and_compare(pair)

    print(f"harel_differential outage relayd_counts={counts}")


def test_the_webhook_route_ends_as_harel_alone(
    redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """relayd with ``--sink webhook:`` to a receiver feeding harel through its public API (and
    harel's worker logic for spawns), as docs/harel.md shows, beside harel's worker: a crash
    between commit and relay, the receiver creates the children, the same end as harel alone."""
    definitions = write_definitions(tmp_path / "definitions", pay_timeout_s=PAY_TIMEOUT_S)
    run = uuid.uuid4().hex[:8]
    receiver = HarelReceiver(redis_server.url, f"hook_{run}", str(definitions), handoff_s=2.0)
    # the receiver runs the children's start actions in this process: they count here
    monkeypatch.setenv("HAREL_APP_LEDGER", str(tmp_path / "hook" / "ledger.txt"))

    async def handle(request: web.Request) -> web.Response:
        await asyncio.to_thread(receiver.receive, await request.json())
        return web.Response(status=204)

    with serve_in_thread(handle) as url:
        alone = HarelDeployment(
            redis_server.url, f"alone_{run}", tmp_path / "alone", definitions, relayd_sink_params=None
        )
        hooked = HarelDeployment(
            redis_server.url,
            f"hook_{run}",
            tmp_path / "hook",
            definitions,
            relayd_sink_params=None,
            relayd_sink=f"webhook:{url}",
        )
        try:
            pair = (alone, hooked)
            _start(pair, crash_after_spawns=True)
            for deployment in pair:
                deployment.create_orders(ORDERS)
            for deployment in pair:
                wait_until(deployment.worker_exited, FINAL_TIMEOUT_S, f"the crash ({deployment.prefix})")
            time.sleep(4.0)
            for deployment in pair:
                deployment.start_worker()
            _each(pair, "every Payment region waiting", "regions_waiting")
            for deployment in pair:
                deployment.pay(PAID)

            _finish_and_compare(pair)
        finally:
            alone.stop()
            hooked.stop()
    print(f"harel_differential webhook fed={receiver.fed}")
    assert receiver.fed["spawn"] >= 1, "the receiver created the crashed fork's children"
