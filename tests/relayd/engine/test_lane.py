"""A lane between two windows: the window read ahead is taken once; the deferred ack is settled or
abandoned; a carried ack is taken once, and outlives one pass at most."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from relayd.engine.fresh import FreshBatch
from relayd.engine.lane import Lane
from relayd.engine.sink_guard import SinkGuard
from relayd.sinks.memory import MemorySink


def _lane() -> Lane:
    return Lane("outbox", MemorySink(), SinkGuard("memory"), None)


def test_the_window_read_ahead_is_taken_once() -> None:
    fetched: tuple[FreshBatch, list[Any], int, float] = (FreshBatch(), [], 3, 12.5)
    lane = _lane()
    lane.read_ahead = fetched

    assert lane.take_read_ahead() is fetched
    assert lane.take_read_ahead() is None


async def test_settled_waits_for_the_ack_and_says_how_many_it_acked() -> None:
    done = asyncio.Event()

    async def ack() -> None:
        await done.wait()

    lane = _lane()
    lane.defer_ack(asyncio.create_task(ack()), 7)
    settling = asyncio.create_task(lane.settled())
    await asyncio.sleep(0)

    assert not settling.done()  # it waits for the ack in flight
    done.set()
    assert await settling == 7
    assert await lane.settled() is None  # nothing in flight any more


async def test_a_failed_ack_fails_whoever_settles_it() -> None:
    async def ack() -> None:
        raise ConnectionError("gone")

    lane = _lane()
    lane.defer_ack(asyncio.create_task(ack()), 2)

    with pytest.raises(ConnectionError):
        await lane.settled()


async def test_an_abandoned_ack_is_counted_only_when_it_succeeds() -> None:
    counted: list[int] = []

    async def ok() -> None:
        return None

    async def fails() -> None:
        raise ConnectionError("gone")

    for ack, count in ((ok, 3), (fails, 4)):
        lane = _lane()
        task = asyncio.create_task(ack())
        lane.defer_ack(task, count)
        lane.abandon(_never_sent, counted.append)
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)

        assert lane.acking is None

    assert counted == [3]


async def _never_sent(fields: list[str]) -> None:
    raise AssertionError("nothing was carried")


def test_a_carried_ack_is_taken_once() -> None:
    lane = _lane()
    lane.carry(["1", "2"])

    assert lane.take_carried() == ["1", "2"]
    assert lane.take_carried() == []
    assert lane.carried is None


def test_a_carried_ack_left_by_the_last_pass_is_told_from_one_carried_in_this_one() -> None:
    lane = _lane()
    lane.carry(["1"])
    lane.begin_pass()
    assert lane.carried_from_last_pass()  # no read of this pass took it

    lane.take_carried()  # a read took it
    lane.carry(["2"])  # this pass's own
    assert not lane.carried_from_last_pass()


async def test_an_abandoned_lane_sends_its_carried_ack_and_counts_it_when_it_succeeds() -> None:
    sent: list[list[str]] = []
    counted: list[int] = []

    async def send(fields: list[str]) -> None:
        sent.append(fields)

    lane = _lane()
    lane.carry(["4", "5"])
    lane.abandon(send, counted.append)
    for _ in range(3):
        await asyncio.sleep(0)

    assert (sent, counted, lane.carried, lane.acking) == ([["4", "5"]], [2], None, None)
