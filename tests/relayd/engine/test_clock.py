"""``sleep_until``: a timeout, events that end it early, and a cancel that is never swallowed."""

from __future__ import annotations

import asyncio

import pytest

from relayd.engine.clock import sleep_until


@pytest.mark.parametrize("count", [1, 2])
async def test_an_event_set_while_sleeping_ends_the_sleep(count):
    events = [asyncio.Event() for _ in range(count)]
    sleeping = asyncio.create_task(sleep_until(60.0, *events))
    await asyncio.sleep(0)
    events[-1].set()

    await asyncio.wait_for(sleeping, 5.0)


@pytest.mark.parametrize("count", [0, 1, 2])
async def test_without_an_event_set_the_sleep_ends_at_its_timeout(count):
    await asyncio.wait_for(sleep_until(0.01, *(asyncio.Event() for _ in range(count))), 5.0)


@pytest.mark.parametrize("count", [0, 1, 2])
async def test_a_cancel_while_sleeping_propagates(count):
    events = [asyncio.Event() for _ in range(count)]
    sleeping = asyncio.create_task(sleep_until(60.0, *events))
    await asyncio.sleep(0)
    sleeping.cancel()

    with pytest.raises(asyncio.CancelledError):
        await sleeping


async def test_a_cancel_racing_the_timeout_still_propagates():
    """The timeout and a cancel land in the same turn of the event loop: the cancel wins."""
    event = asyncio.Event()
    sleeping = asyncio.create_task(sleep_until(0.0, event))
    asyncio.get_running_loop().call_soon(sleeping.cancel)

    with pytest.raises(asyncio.CancelledError):
        await sleeping


async def test_one_event_needs_no_task_of_its_own(monkeypatch):
    created: list[object] = []
    real = asyncio.create_task

    def counting(coro, **kwargs):
        created.append(coro)
        return real(coro, **kwargs)

    monkeypatch.setattr(asyncio, "create_task", counting)
    event = asyncio.Event()
    event.set()

    await sleep_until(60.0, event)
    await sleep_until(0.0)

    assert created == []
