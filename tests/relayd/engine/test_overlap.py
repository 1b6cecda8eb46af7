"""A lane's Overlap: the window read ahead is taken once; the deferred ack is settled or abandoned."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from relayd.engine.fresh import FreshBatch
from relayd.engine.overlap import Overlap


def test_the_window_read_ahead_is_taken_once() -> None:
    fetched: tuple[FreshBatch, list[Any], int, float] = (FreshBatch(), [], 3, 12.5)
    overlap = Overlap(read_ahead=fetched)

    assert overlap.take_read_ahead() is fetched
    assert overlap.take_read_ahead() is None


async def test_settled_waits_for_the_ack_and_says_how_many_it_acked() -> None:
    done = asyncio.Event()

    async def ack() -> None:
        await done.wait()

    overlap = Overlap()
    overlap.defer_ack(asyncio.create_task(ack()), 7)
    settling = asyncio.create_task(overlap.settled())
    await asyncio.sleep(0)

    assert not settling.done()  # it waits for the ack in flight
    done.set()
    assert await settling == 7
    assert await overlap.settled() is None  # nothing in flight any more


async def test_a_failed_ack_fails_whoever_settles_it() -> None:
    async def ack() -> None:
        raise ConnectionError("gone")

    overlap = Overlap()
    overlap.defer_ack(asyncio.create_task(ack()), 2)

    with pytest.raises(ConnectionError):
        await overlap.settled()


async def test_an_abandoned_ack_is_counted_only_when_it_succeeds() -> None:
    counted: list[int] = []

    async def ok() -> None:
        return None

    async def fails() -> None:
        raise ConnectionError("gone")

    for ack, count in ((ok, 3), (fails, 4)):
        overlap = Overlap()
        task = asyncio.create_task(ack())
        overlap.defer_ack(task, count)
        overlap.abandon(counted.append)
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)

        assert overlap.acking is None

    assert counted == [3]
