"""The console's bounded reads and its actions, on fakeredis and a real redis-server."""

from __future__ import annotations

import pytest
import redis

from relayd.console.actions import ActionRunner, count_matching
from relayd.console.filters import DeadLetterFilter
from relayd.console.poller import OverviewPoller
from relayd.console.reads import SCAN_STEPS_PER_PAGE, read_dead_letter_page, read_timers
from relayd.state.audit import read_actions
from relayd.state.keys import RelayKeys
from store.keys import Keyspace, timer_member
from tests.relayd.console.parked import park_outbox, park_timers


@pytest.fixture
def sync(async_client, backend, request) -> redis.Redis:
    return request.getfixturevalue("sync_client")


async def test_pages_walk_every_dead_letter_of_every_kind(async_client, sync, prefix) -> None:
    ids = set(park_outbox(sync, prefix, range(130)) + park_timers(sync, prefix, 20))
    seen: list[str] = []
    token: str | None = None
    pages = 0

    while True:
        page = await read_dead_letter_page(
            async_client, Keyspace(prefix), DeadLetterFilter(), token, page_size=25
        )
        seen += [d.id for d in page.letters]
        pages += 1
        token = page.next_token
        if token is None:
            break

    assert set(seen) == ids
    assert pages >= 150 // 25 - 1
    assert page.totals == {"outbox": 130, "spawn": 0, "timer": 20}


async def test_a_narrow_filter_stops_after_a_bounded_scan_and_resumes(async_client, sync, prefix) -> None:
    park_outbox(sync, prefix, range(3000))
    wanted = DeadLetterFilter(kind="outbox", target="order-2999")

    page = await read_dead_letter_page(async_client, Keyspace(prefix), wanted, None, page_size=10)
    found = [d.id for d in page.letters]
    while page.next_token is not None:
        assert page.scanned <= SCAN_STEPS_PER_PAGE * 10 * 2  # HSCAN's COUNT is a hint
        page = await read_dead_letter_page(
            async_client, Keyspace(prefix), wanted, page.next_token, page_size=10
        )
        found += [d.id for d in page.letters]

    assert found == [f"{prefix}:outbox:2999"]


async def test_an_exact_id_is_one_lookup(async_client, sync, prefix) -> None:
    park_outbox(sync, prefix, range(50))
    wanted = DeadLetterFilter(id=f"{prefix}:outbox:7", exact_id=True)

    page = await read_dead_letter_page(async_client, Keyspace(prefix), wanted, None, page_size=10)

    assert [d.id for d in page.letters] == [f"{prefix}:outbox:7"]
    assert page.next_token is None


async def test_timers_show_lag_and_are_found_by_execution(async_client, sync, prefix) -> None:
    keyspace = Keyspace(prefix)
    sync.zadd(
        keyspace.timers,
        {
            timer_member("exe*[1]", "a"): 90.0,
            timer_member("exe-2", "b"): 200.0,
            timer_member("exe*[1]", "c"): 300.0,
        },
    )

    upcoming = await read_timers(async_client, keyspace, now=100.0, limit=10)
    found = await read_timers(async_client, keyspace, now=100.0, limit=10, execution="exe*[1]")

    assert [(t.execution_id, t.lag_s) for t in upcoming.rows] == [
        ("exe*[1]", 10.0),
        ("exe-2", None),
        ("exe*[1]", None),
    ]
    assert (upcoming.total, upcoming.due) == (3, 1)
    assert [t.path for t in found.rows] == ["a", "c"]


async def test_a_filtered_replay_goes_at_the_rate_and_is_audited(async_client, sync, prefix) -> None:
    keyspace = Keyspace(prefix)
    park_outbox(sync, prefix, range(5), reason_code="max_attempts")
    park_outbox(sync, prefix, range(5, 8), reason_code="permanent")
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    runner = ActionRunner(
        async_client, rate_per_s=2, sleep=sleep, monotonic=lambda: 0.0, clock=lambda: 1234.0
    )
    wanted = DeadLetterFilter(reason_code="max_attempts")
    planned = await count_matching(async_client, keyspace, wanted)
    runner.start_replay(prefix, wanted, [], planned=planned, source="127.0.0.1")
    await runner.wait_idle()

    assert planned == 5
    assert pauses == [1.0, 1.0]  # two full chunks of 2 paced a second apart; the last one not
    assert sorted(int(f) for f in sync.hkeys(keyspace.outbox)) == [1, 2, 3, 4, 5]  # as new seqs
    assert sync.hlen(RelayKeys(keyspace).dead("outbox")) == 3
    [record] = await read_actions(async_client, keyspace)
    assert (record.action, record.count, record.at, record.filter) == (
        "replay",
        5,
        1234.0,
        {"reason_code": "max_attempts"},
    )
    assert record.command.startswith(f"relayd dlq replay --prefix {prefix} {prefix}:outbox:")


async def test_the_audit_of_a_replay_names_only_the_letters_put_back(async_client, sync, prefix) -> None:
    keyspace = Keyspace(prefix)
    ids = park_timers(sync, prefix, 3)
    sync.zadd(keyspace.timers, {b"exe-1wait": 99.0})  # the engine armed that member again: kept
    runner = ActionRunner(async_client, rate_per_s=100, clock=lambda: 1234.0)

    runner.start_replay(prefix, DeadLetterFilter(kind="timer"), [], planned=3, source="127.0.0.1")
    await runner.wait_idle()

    [record] = await read_actions(async_client, keyspace)
    assert (record.count, sorted(record.ids)) == (2, sorted([ids[0], ids[2]]))
    assert sync.hkeys(RelayKeys(keyspace).dead("timer")) == [ids[1].encode()]


async def test_a_purge_deletes_one_kind_and_is_audited(async_client, sync, prefix) -> None:
    keyspace = Keyspace(prefix)
    park_outbox(sync, prefix, range(4))
    park_timers(sync, prefix, 2)
    runner = ActionRunner(async_client, rate_per_s=100)

    count = await runner.purge(prefix, DeadLetterFilter(kind="timer"), source="127.0.0.1")

    assert count == 2
    assert sync.hlen(RelayKeys(keyspace).dead("outbox")) == 4
    [record] = await read_actions(async_client, keyspace)
    assert (record.action, record.count, record.command) == (
        "purge",
        2,
        f"relayd dlq purge --prefix {prefix} --kind timer --yes",
    )


async def test_the_poller_reads_once_per_interval_for_every_page(async_client, prefix) -> None:
    clock = [0.0]
    poller = OverviewPoller(async_client, [prefix], interval_s=0.1, monotonic=lambda: clock[0])

    first = await poller.current()
    second = await poller.current()
    clock[0] += 1.0
    third = await poller.current()

    assert poller.interval_s == 1.0  # never faster than once a second
    assert first is second
    assert third.version == 2
    assert poller.reads == 2


async def test_subscribers_share_the_poller_and_leave_it_idle(async_client, prefix) -> None:
    poller = OverviewPoller(async_client, [prefix])
    a, b = poller.subscribe(), poller.subscribe()

    first_a = await anext(a)
    first_b = await anext(b)
    await a.aclose()
    await b.aclose()
    await poller.close()

    assert first_a is first_b
    assert poller.reads == 1
    assert poller.subscribers == 0
