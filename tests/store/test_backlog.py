"""The gap-tolerant reader: pure ``SeqWindow`` rules, then the readers on Redis."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import redis
from support.seeding import outbox_value

from store import AsyncRedisStore, Execution, Fence, RawEntry, SeqWindow, StoreFenced
from store.backlog import MAX_GAPS_FACTOR, MAX_WINDOW_FACTOR, MIN_HEADROOM
from store.keys import Keyspace
from store.readers import BacklogReader


def _value(n: int) -> bytes:
    return outbox_value("x", f"ev{n}", kind="E")


def _fold(window: SeqWindow, limit: int, present: set[int], counter: int, now: float = 0.0) -> list[RawEntry]:
    read = window.plan(limit)
    values = [_value(int(f)) if int(f) in present else None for f in read.fields]
    return window.apply(read, counter, values, now)


# --- pure -------------------------------------------------------------------------------------


def test_window_doubles_over_an_acked_prefix_and_caps() -> None:
    """Missing seqs below the start counter are resolved; the window grows to skip them."""
    window = SeqWindow()
    sizes = []
    for _ in range(10):
        sizes.append(window.plan(10).window_size)
        assert _fold(window, 10, set(), counter=100_000) == []

    assert sizes == [10, 20, 40, 80, 160, 320, 640, 640, 640, 640]
    assert window.gaps == {}
    assert MAX_WINDOW_FACTOR * 10 == 640


def test_a_read_asks_for_what_the_counter_allocated_plus_a_headroom_not_a_full_window() -> None:
    """Polled often under a light load, a reader asks for the seqs the counter allocated beyond
    its frontier, plus a headroom as large as the counter's last growth (at least the minimum,
    at most the limit), instead of ``limit`` absent fields every time."""
    window = SeqWindow()
    first = window.plan(1000)
    _fold(window, 1000, {1, 2, 3}, counter=3)
    light = window.plan(1000)  # frontier 4, counter 3, grew by 3
    _fold(window, 1000, {4, 5}, counter=5)
    # A burst: the counter grew by 400 while this read asked for the headroom only (6..37).
    taken = _fold(window, 1000, set(range(6, 406)), counter=405)
    burst = window.plan(1000)

    assert first.window_size == 1000  # no counter seen yet
    assert light.window_start == 4
    assert light.window_size == MIN_HEADROOM
    assert len(light.fields) == MIN_HEADROOM
    assert [e.seq for e in taken] == list(range(6, 6 + MIN_HEADROOM))
    assert burst.window_start == 6 + MIN_HEADROOM
    assert burst.window_size == (405 + 1 - burst.window_start) + 400  # allocated + last growth


def test_a_counter_far_ahead_still_gets_the_whole_window() -> None:
    window = SeqWindow()
    _fold(window, 10, {1}, counter=1)
    _fold(window, 10, set(range(2, 12)), counter=5000)

    assert window.plan(10).window_size == 10
    assert _fold(window, 10, set(range(12, 40)), counter=5000) == [
        RawEntry(str(n), n, _value(n)) for n in range(12, 22)
    ]


def test_missing_seqs_after_start_become_gaps_and_fill_late() -> None:
    window = SeqWindow(grace_s=30.0)
    _fold(window, 10, set(), counter=0)  # c_start = 0
    first = _fold(window, 10, {2, 3}, counter=3, now=1.0)

    late = _fold(window, 10, {1}, counter=3, now=5.0)

    assert [e.seq for e in first] == [2, 3]
    assert [e.seq for e in late] == [1]
    assert window.gaps == {}


def test_a_gap_past_the_grace_is_passed_over_and_the_mark_moves_on() -> None:
    window = SeqWindow(grace_s=30.0)
    _fold(window, 10, set(), counter=0)
    _fold(window, 10, {2}, counter=2, now=1.0)
    window.resolve(["2"])
    assert window.low_water_mark == 1

    _fold(window, 10, set(), counter=2, now=40.0)

    assert window.gaps == {}
    assert window.low_water_mark == 3


def test_gaps_are_capped_oldest_first() -> None:
    window = SeqWindow()
    _fold(window, 2, set(), counter=0)
    _fold(window, 2, {20}, counter=20, now=1.0)  # window 2: seqs 1, 2 gaps
    for n in range(10):
        _fold(window, 2, set(), counter=20, now=2.0 + n)

    assert len(window.gaps) <= MAX_GAPS_FACTOR * 2
    assert 1 not in window.gaps


def test_at_most_limit_entries_and_the_rest_waits() -> None:
    window = SeqWindow()
    present = set(range(1, 26))
    got = [e.seq for e in _fold(window, 10, present, counter=25)]
    got += [e.seq for e in _fold(window, 10, present, counter=25)]
    got += [e.seq for e in _fold(window, 10, present, counter=25)]

    assert got == list(range(1, 26))
    assert window.open_count == 25


def test_reconcile_returns_only_what_nobody_else_returns() -> None:
    window = SeqWindow()
    _fold(window, 10, {1, 2}, counter=5)  # 1, 2 open; 3..5 resolved (<= c_start); frontier 6
    window.apply(window.plan(10), 8, [None] * 10, now=0.0)  # the counter moves to 8: 6..8 gaps
    pairs = [("1", b"v"), ("3", b"v"), ("7", b"v"), ("x-1", b"v"), ("007", b"v")]

    found = window.apply_scan(0, pairs, budget=10, now=0.0)

    assert [(e.field, e.seq) for e in found] == [("3", 3), ("x-1", None), ("007", None)]


def test_an_entry_above_the_counter_is_returned_by_the_scan_once() -> None:
    """Written without its INCR (``HSET P:outbox 5001`` while the counter is at 5): no window
    reaches it, so the reconcile scan returns it, and no window returns it again while open."""
    window = SeqWindow()
    _fold(window, 10, {1}, counter=5)

    found = window.apply_scan(0, [("5001", _value(5001))], budget=10, now=0.0)
    again = window.apply_scan(0, [("5001", _value(5001))], budget=10, now=1.0)
    window.frontier = 5000  # the counter catches up while it is still open ...
    by_window = _fold(window, 10, {5001}, counter=5010)
    window.resolve(["5001"])  # ... acked; the engine then commits a new entry at that seq
    window.frontier = 5000
    after = _fold(window, 10, {5001}, counter=5010)

    assert [e.seq for e in found] == [5001]
    assert again == []
    assert by_window == []
    assert [e.seq for e in after] == [5001]


def test_exhausted_needs_a_full_cycle_after_catching_up() -> None:
    window = SeqWindow()
    window.apply_scan(7, [], budget=10, now=0.0)  # the scan is mid-cycle ...
    _fold(window, 10, {1}, counter=1)  # ... when the frontier catches up
    assert not window.exhausted
    _fold(window, 10, set(), counter=1)
    window.apply_scan(0, [], budget=10, now=0.0)  # that cycle ends: it was not a full one
    assert not window.exhausted

    window.apply_scan(5, [], budget=10, now=0.0)
    window.apply_scan(0, [], budget=10, now=0.0)  # a whole cycle

    assert window.exhausted


# --- on Redis ---------------------------------------------------------------------------------


@pytest.fixture
def seed(raw, prefix):
    def put(*seqs: int, counter: int | None = None) -> None:
        pipe = raw.pipeline(transaction=False)
        for s in seqs:
            pipe.hset(f"{prefix}:outbox", str(s), _value(s))
        if counter is not None:
            pipe.set(f"{prefix}:outbox:seq", counter)
        pipe.execute()

    return put


async def test_a_late_commit_below_acked_seqs_is_still_returned(store, seed) -> None:
    """Seq 1 is allocated, 2 and 3 commit, are read and acked; then 1 commits: it comes back."""
    reader = store.backlog("outbox", grace_s=30.0)
    await reader.start()
    await reader.read_new(10, now=0.0)  # the reader exists before the traffic
    seed(2, 3, counter=3)
    first = await reader.read_new(10, now=1.0)
    await store.ack_outbox_many([e.field for e in first])
    reader.resolve(e.field for e in first)

    seed(1)
    late = await reader.read_new(10, now=2.0)

    assert [e.field for e in first] == ["2", "3"]
    assert [(e.seq, e.field) for e in late] == [(1, "1")]
    assert late[0].value == _value(1)


async def test_a_commit_later_than_the_grace_is_found_by_the_reconcile(store, seed) -> None:
    reader = store.backlog("outbox", grace_s=5.0, reconcile_interval_s=1.0)
    await reader.start()
    await reader.read_new(10, now=0.0)
    seed(2, counter=2)
    assert [e.field for e in await reader.read_new(10, now=1.0)] == ["2"]
    await store.ack_outbox(2)
    reader.resolve(["2"])
    assert await reader.read_new(10, now=100.0) == []  # the gap for 1 expires

    seed(1)
    late = await reader.read_new(10, now=101.0)

    assert [e.field for e in late] == ["1"]


async def test_a_read_whose_scan_finds_entries_leaves_no_replies_of_its_then(
    async_client, prefix, seed, monkeypatch
) -> None:
    """The ``then`` commands run in the window's round-trip, before the reconcile scan: their
    replies say nothing of an entry committed in between that the scan returns, so none are
    left; a read whose scan finds nothing keeps them."""
    store = AsyncRedisStore(async_client, prefix=prefix)
    reader = store.backlog("outbox", grace_s=5.0, reconcile_interval_s=1.0)
    then = [("GET", f"{prefix}:outbox:seq")]
    await reader.start()
    await reader.read_new(10, now=0.0)
    seed(2, counter=2)
    await reader.read_new(10, now=1.0)
    await reader.read_new(10, now=1.0, ack=["2"])
    await reader.read_new(10, now=100.0)  # the gap for 1 expires
    await reader.read_new(10, now=101.0, then=then)  # the scan finds nothing
    kept = list(reader.then_replies)
    scan = async_client.hscan

    async def commit_first(*args: Any, **kwargs: Any) -> Any:
        seed(1)  # committed after the round-trip, before the scan
        return await scan(*args, **kwargs)

    monkeypatch.setattr(async_client, "hscan", commit_first)
    scanned = await reader.read_new(10, now=102.0, then=then)

    assert kept == [b"2"]
    assert [e.field for e in scanned] == ["1"]
    assert reader.then_replies == []


async def test_a_read_without_reconcile_scans_nothing(store, seed) -> None:
    """A prefetch (reconcile=False) reads the window only; the late commit waits for a scan."""
    reader = store.backlog("outbox", grace_s=5.0, reconcile_interval_s=1.0)
    await reader.start()
    await reader.read_new(10, now=0.0)
    seed(2, counter=2)
    await reader.read_new(10, now=1.0)
    await store.ack_outbox(2)
    reader.resolve(["2"])
    await reader.read_new(10, now=100.0)  # the gap for 1 expires
    seed(1)

    prefetched = await reader.read_new(10, now=101.0, reconcile=False)
    scanned = await reader.read_new(10, now=102.0)

    assert (prefetched, [e.field for e in scanned]) == ([], ["1"])


async def test_a_burned_seq_never_stalls_later_entries(store, seed) -> None:
    reader = store.backlog("outbox", grace_s=30.0)
    await reader.start()
    await reader.read_new(10, now=0.0)
    seed(2, 3, 4, counter=4)  # seq 1 was burned by an aborted transaction

    got = await reader.read_new(10, now=1.0)
    await store.ack_outbox_many(e.field for e in got)
    reader.resolve(e.field for e in got)
    await reader.read_new(10, now=60.0)

    assert [e.seq for e in got] == [2, 3, 4]
    assert reader.low_water_mark == 5


async def test_malformed_fields_come_back_with_no_seq(store, raw, prefix, seed) -> None:
    seed(1, counter=1)
    raw.hset(f"{prefix}:outbox", "not-a-seq", b"{}")
    reader = store.backlog("outbox")
    await reader.start()

    got = await reader.read_new(10, now=0.0)
    got += await reader.read_new(10, now=0.5)

    assert [(e.field, e.seq) for e in got] == [("1", 1), ("not-a-seq", None)]


async def test_checkpoint_persists_the_low_water_mark_and_start_resumes_there(
    store, raw, prefix, seed
) -> None:
    seed(*range(1, 11), counter=10)
    reader = store.backlog("outbox")
    await reader.start()
    got = await reader.read_new(4, now=0.0)
    raw.hdel(f"{prefix}:outbox", *(e.field for e in got[:3]))  # acked
    reader.resolve(e.field for e in got[:3])
    await reader.checkpoint()

    again = store.backlog("outbox")
    await again.start()
    resumed = await again.read_new(3, now=0.0)

    assert raw.get(f"{prefix}:relay:cursor:outbox") == b"4"
    assert [e.seq for e in resumed] == [4, 5, 6]


async def test_a_long_acked_prefix_is_skipped_in_few_reads(store, seed) -> None:
    """No cursor, counter at 60k, only the last 5 seqs present: found within ~a dozen reads."""
    seed(*range(59_996, 60_001), counter=60_000)
    reader = store.backlog("outbox")
    await reader.start()

    reads = 0
    found: list[Any] = []
    while not found:
        found = await reader.read_new(50, now=0.0)
        reads += 1

    assert [59_996 + n for n in range(5)] == [e.seq for e in found]
    assert reads <= 60_000 // (MAX_WINDOW_FACTOR * 50) + 8


async def test_a_counter_jump_is_crossed_by_the_hash_size_not_walked(store, seed) -> None:
    """Seq 1 read and acked, then the counter jumps by 10^9: the next commit is found within a
    few reads (the hash's size tells there is nothing in between), in seq order with the seqs
    committed just after it."""
    seed(1, counter=1)
    reader = store.backlog("outbox")
    await reader.start()
    first = await reader.read_new(50, now=0.0)
    await store.ack_outbox_many([e.field for e in first])
    reader.resolve(e.field for e in first)
    jumped = 1 + 10**9
    seed(jumped + 1, jumped + 2, counter=jumped + 2)

    reads = 0
    found: list[Any] = []
    while not found and reads < 20:
        found = await reader.read_new(50, now=1.0 + reads)
        reads += 1

    assert [e.seq for e in found] == [jumped + 1, jumped + 2]
    assert reads <= 3


async def _drain(store, reader, *, now: float, reads: int = 10) -> list[int | None]:
    """Read, ack and resolve until a read comes back empty; the seqs in the order returned."""
    got: list[int | None] = []
    for n in range(reads):
        entries = await reader.read_new(4, now=now + n)
        if not entries:
            break
        await store.ack_outbox_many([e.field for e in entries])
        reader.resolve(e.field for e in entries)
        got += [e.seq for e in entries]
    return got


async def test_a_counter_reset_below_the_frontier_is_read_from_its_lowest_seq_in_order(store, seed) -> None:
    """Seqs 1..6 delivered; the counter is reset and 3 entries committed at 1..3 (written to the
    hash out of order, so its scan order is not theirs): the reader moves back to seq 1 and
    returns them in seq order, at its next read."""
    seed(*range(1, 7), counter=6)
    reader = store.backlog("outbox", reconcile_interval_s=1_000.0)
    await reader.start()
    await _drain(store, reader, now=0.0)
    seed(3, 1, 2, counter=3)

    assert await _drain(store, reader, now=0.5) == [1, 2, 3]


async def test_a_reset_refilled_past_the_old_counter_is_still_read_in_seq_order(store, seed) -> None:
    """Seqs 1..6 delivered; the counter is reset and 12 entries committed at 1..12 before the
    next read, which would find 7..12 first: it takes them back and walks from seq 1."""
    seed(*range(1, 7), counter=6)
    reader = store.backlog("outbox", reconcile_interval_s=1_000.0)
    await reader.start()
    await _drain(store, reader, now=0.0)
    seed(*range(1, 13), counter=12)

    assert await _drain(store, reader, now=0.5) == list(range(1, 13))


async def test_a_rewind_skips_the_entries_still_open(store, seed) -> None:
    """Entries 5 and 6 were returned and are not acked yet when the reader walks back over
    them: they are not returned twice, and the new ones come in seq order (written out of it)."""
    seed(*range(1, 7), counter=6)
    reader = store.backlog("outbox", reconcile_interval_s=1_000.0)
    await reader.start()
    first = await reader.read_new(10, now=0.0)
    await store.ack_outbox_many(["1", "2", "3", "4"])
    reader.resolve(["1", "2", "3", "4"])
    seed(2, 1, counter=2)  # reset: two new entries below the open ones

    again = await reader.read_new(10, now=0.5)

    assert [e.seq for e in first] == [1, 2, 3, 4, 5, 6]
    assert [e.seq for e in again] == [1, 2]


async def test_a_listing_that_finds_nothing_below_waits_a_reconcile_interval(
    store, raw, prefix, seed, monkeypatch
) -> None:
    """An entry above the counter (no INCR) makes the hash look larger than the reader knows:
    the fields are listed once, then not again within a reconcile interval."""
    seed(1, counter=1)
    reader = store.backlog("outbox", reconcile_interval_s=10.0)
    await reader.start()
    await _drain(store, reader, now=0.0)
    raw.hset(f"{prefix}:outbox", "900", _value(900))
    calls = _count(monkeypatch, reader.client, "hkeys")

    for n in range(5):
        await reader.read_new(4, now=0.1 * n)

    assert calls == ["hkeys"]


async def test_a_reader_whose_every_read_is_full_still_runs_its_reconcile(store, seed, monkeypatch) -> None:
    """A long backlog keeps every window full: while a reconcile is due by the clock, each read
    still takes one scan step (an eighth of its room is kept for it)."""
    seed(*range(1, 301), counter=300)
    reader = store.backlog("outbox", reconcile_interval_s=1.0)
    await reader.start()
    await reader.read_new(10, now=0.0)
    calls = _count(monkeypatch, reader.client, "hscan")

    for n in range(1, 6):
        await reader.read_new(10, now=1.5 * n)

    assert calls == ["hscan"] * 5


def _count(monkeypatch, client: Any, command: str) -> list[str]:
    """Record each call of ``client.<command>`` (sync or async) in the returned list."""
    calls: list[str] = []
    original = getattr(client, command)
    if inspect.iscoroutinefunction(original):

        async def counted_async(*args: Any, **kwargs: Any) -> Any:
            calls.append(command)
            return await original(*args, **kwargs)

        monkeypatch.setattr(client, command, counted_async)
    else:

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls.append(command)
            return original(*args, **kwargs)

        monkeypatch.setattr(client, command, counted)
    return calls


async def test_a_burned_range_before_more_entries_than_a_widest_window_is_walked(store, seed) -> None:
    """More entries in the hash than a widest window: the reader walks on (listing them would
    cost more than a read) and returns every entry in seq order."""
    seed(*range(5_000, 5_000 + MAX_WINDOW_FACTOR * 2 + 10), counter=5_000 + MAX_WINDOW_FACTOR * 2 + 9)
    reader = store.backlog("outbox")
    await reader.start()

    got: list[Any] = []
    for n in range(300):
        got += await reader.read_new(2, now=float(n))

    assert [e.seq for e in got] == list(range(5_000, 5_000 + MAX_WINDOW_FACTOR * 2 + 10))


async def test_exhausted_after_draining_everything(store, seed) -> None:
    seed(1, 2, 3, counter=3)
    reader = store.backlog("outbox")
    await reader.start()
    seen = []
    for n in range(6):
        got = await reader.read_new(2, now=float(n))
        seen += got
        await store.ack_outbox_many(e.field for e in got)
        reader.resolve(e.field for e in got)
        if reader.exhausted:
            break

    assert [e.seq for e in seen] == [1, 2, 3]
    assert reader.exhausted
    assert reader.open_count == 0


async def test_spawns_reader_reads_the_spawns_hash(store) -> None:
    exe = Execution(definition_id="d")
    await store.commit(exe, [], spawns=(("c1", "r", {}), ("c2", "r", {})))
    reader = store.backlog("spawns")
    await reader.start()

    got = await reader.read_new(10, now=0.0)

    assert [e.seq for e in got] == [1, 2]


def test_a_client_that_decodes_replies_still_gets_the_stored_bytes(raw, prefix, seed) -> None:
    """Replies of a ``decode_responses`` client are str: the reader hands back bytes all the same."""
    seed(1, 3, counter=3)
    decoding = redis.Redis(
        connection_pool=raw.connection_pool.__class__(
            connection_class=raw.connection_pool.connection_class,
            **{**raw.connection_pool.connection_kwargs, "decode_responses": True},
        )
    )
    reader = BacklogReader(decoding, Keyspace(prefix), "outbox", grace_s=30.0, reconcile_interval_s=1.0)
    reader.start()

    got = reader.read_new(10, now=0.0)

    assert [(e.field, e.seq, e.value) for e in got] == [("1", 1, _value(1)), ("3", 3, _value(3))]
    assert all(type(e.value) is bytes for e in got)


# --- a read that carries an ack ----------------------------------------------------------------


async def test_a_read_carrying_an_ack_deletes_those_entries_first_in_the_same_round_trip(
    async_client, raw, prefix, seed, monkeypatch
) -> None:
    reader = AsyncRedisStore(async_client, prefix=prefix).backlog("outbox")
    await reader.start()
    seed(1, 2, 3, counter=3)
    first = await reader.read_new(10, now=0.0)
    seed(4, counter=4)
    outside_pipelines: list[tuple] = []
    real = async_client.execute_command

    async def recording(*args, **kwargs):
        outside_pipelines.append(args)
        return await real(*args, **kwargs)

    monkeypatch.setattr(async_client, "execute_command", recording)

    second = await reader.read_new(10, now=1.0, reconcile=False, ack=[e.field for e in first])

    assert [e.field for e in first] == ["1", "2", "3"]
    assert [e.field for e in second] == ["4"]
    assert outside_pipelines == []
    assert raw.hkeys(f"{prefix}:outbox") == [b"4"]
    assert reader.open_count == 1  # 1-3 resolved: only 4 is waiting for its ack


@pytest.mark.parametrize("holder", ["mine", "theirs"])
async def test_a_fenced_carried_ack_deletes_only_while_the_fence_holds(
    async_client, raw, prefix, seed, holder
) -> None:
    raw.script_flush()  # the first fenced ack on this server loads the script itself
    fence = Fence(key=f"{prefix}:relay:lease", token="mine")
    raw.set(fence.key, holder)
    reader = AsyncRedisStore(async_client, prefix=prefix).backlog("outbox")
    await reader.start()
    seed(1, 2, counter=2)
    first = await reader.read_new(10, now=0.0)

    if holder == "theirs":
        with pytest.raises(StoreFenced):
            await reader.read_new(10, now=1.0, ack=[e.field for e in first], fence=fence)
        assert sorted(raw.hkeys(f"{prefix}:outbox")) == [b"1", b"2"]
        assert reader.open_count == 2
    else:
        assert await reader.read_new(10, now=1.0, ack=[e.field for e in first], fence=fence) == []
        assert raw.hkeys(f"{prefix}:outbox") == []
        assert reader.open_count == 0
