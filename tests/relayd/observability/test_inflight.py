"""Sink calls in flight and their deadlines: a call past its sink's timeout plus the grace is
hung, one that reports a finished request starts its deadline again (``relayd.observability.inflight``)."""

from __future__ import annotations

import asyncio

from relayd.observability.health import Health, HealthSnapshot, healthz
from relayd.observability.inflight import (
    UNDECLARED_TIMEOUT_S,
    Call,
    InFlight,
    overrun,
    progressed,
    timeout_of,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Declares:
    name = "webhook"
    timeout_s = 10.0


class DeclaresNothing:
    name = "jsonl"


def test_the_timeout_is_the_sinks_own_else_the_undeclared_bound() -> None:
    class Odd:
        timeout_s = "ten"

    assert timeout_of(Declares()) == 10.0
    assert timeout_of(DeclaresNothing()) == UNDECLARED_TIMEOUT_S
    assert timeout_of(Odd()) == UNDECLARED_TIMEOUT_S


def test_a_call_is_hung_only_past_its_timeout_plus_the_grace() -> None:
    call = Call("webhook", 10.0, started_s=100.0, progressed_s=100.0)
    renewed = Call("webhook", 10.0, started_s=100.0, progressed_s=150.0)

    assert overrun(call, now_s=140.0, grace_s=30.0) is None
    assert overrun(call, now_s=141.5, grace_s=30.0) == (
        "delivery to sink 'webhook' running for 41.5s, past its timeout 10s + grace 30s"
    )
    assert overrun(Call("hook", 1.0, 0.0, 0.0, "stm", "timer"), now_s=5.0, grace_s=0.0) == (
        "delivery to sink 'hook' (prefix 'stm', timer) running for 5.0s, past its timeout 1s + grace 0s"
    )
    assert overrun(renewed, now_s=180.0, grace_s=30.0) is None
    assert overrun(renewed, now_s=191.0, grace_s=30.0) == (
        "delivery to sink 'webhook' running for 91.0s, 41.0s since a request ended,"
        " past its timeout 10s + grace 30s"
    )


async def test_track_counts_the_call_while_it_runs_and_progress_renews_it() -> None:
    clock = Clock()
    inflight = InFlight(clock)

    with inflight.track(Declares()):
        clock.now += 15.0
        within = inflight.overruns(clock.now, grace_s=1.0)
        await asyncio.create_task(_progress_later())  # a task the call started sees the call
        clock.now += 5.0
        renewed = inflight.overruns(clock.now, grace_s=1.0)
        clock.now += 10.0
        overdue = inflight.overruns(clock.now, grace_s=1.0)
    after = inflight.overruns(clock.now + 1000.0, grace_s=1.0)

    assert within == ["delivery to sink 'webhook' running for 15.0s, past its timeout 10s + grace 1s"]
    assert renewed == []
    assert overdue == [
        "delivery to sink 'webhook' running for 30.0s, 15.0s since a request ended,"
        " past its timeout 10s + grace 1s"
    ]
    assert after == []


async def _progress_later() -> None:
    progressed()


def test_progress_outside_a_tracked_call_does_nothing() -> None:
    clock = Clock()
    inflight = InFlight(clock)
    progressed()  # no call in flight: no error, and nothing to renew
    with inflight.track(Declares()):
        clock.now += 15.0
        overdue = inflight.overruns(clock.now, grace_s=1.0)

    assert overdue == ["delivery to sink 'webhook' running for 15.0s, past its timeout 10s + grace 1s"]


def test_healthz_names_a_hung_delivery_while_the_loop_still_beats() -> None:
    hung = HealthSnapshot(last_progress_s=100.0, hung_deliveries=("delivery to sink 'x' running for 9.0s",))
    silent = HealthSnapshot(last_progress_s=10.0, hung_deliveries=("delivery to sink 'x' running for 9.0s",))

    answer = healthz(hung, now_s=101.0, stale_after_s=30.0)

    assert (answer.status, answer.reason) == (503, "delivery to sink 'x' running for 9.0s")
    assert healthz(silent, now_s=101.0, stale_after_s=30.0).reason == "event loop silent for 91.0s"


def test_health_asks_the_deliveries_at_probe_time() -> None:
    clock = Clock()
    inflight = InFlight(clock)
    health = Health(stale_after_s=2 * UNDECLARED_TIMEOUT_S)  # the loop beats; the call is what hangs
    health.watch_deliveries(lambda now_s: inflight.overruns(now_s, grace_s=0.0))
    health.progress(clock.now)

    with inflight.track(DeclaresNothing()):
        live = health.live(clock.now + 1.0)
        hung = health.live(clock.now + UNDECLARED_TIMEOUT_S + 1.0)
    done = health.live(clock.now + 2.0)

    assert (live.status, hung.status, done.status) == (200, 503, 200)
    assert hung.reason.startswith("delivery to sink 'jsonl' running for 301.0s")
