"""The engine's epoch clock: Redis ``TIME`` tracked against the host's monotonic clock."""

from __future__ import annotations

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from structlog.testing import capture_logs

from relayd.engine.redis_time import RedisClock, parse_time_reply


class Mono:
    def __init__(self) -> None:
        self.t = 50.0

    def __call__(self) -> float:
        return self.t


class TimeServer:
    """Answers TIME with a Redis clock at ``epoch_s``; the round-trip moves ``mono`` by ``rtt_s``."""

    def __init__(self, mono: Mono, epoch_s: float, rtt_s: float = 0.0) -> None:
        self.mono, self.epoch_s, self.rtt_s = mono, epoch_s, rtt_s
        self.fail = False

    async def time(self) -> tuple[int, int]:
        if self.fail:
            raise RedisConnectionError("gone")
        self.mono.t += self.rtt_s / 2
        seconds, fraction = divmod(self.epoch_s + (self.mono.t - 50.0), 1)
        self.mono.t += self.rtt_s / 2
        return int(seconds), round(fraction * 1_000_000)


async def test_now_follows_redis_time_not_the_hosts_wall_clock():
    mono = Mono()
    clock = RedisClock(monotonic=mono, wall=lambda: 9_999_999.0)  # the host's clock is far off
    server = TimeServer(mono, epoch_s=1_000.0, rtt_s=0.2)

    await clock.sync(server)
    mono.t += 10.0

    assert clock.now() == pytest.approx(1_000.0 + 0.1 + 10.0 + 0.1, abs=1e-5)
    assert clock.monotonic() == mono.t


async def test_before_the_first_sync_and_after_a_failed_one_the_last_offset_holds():
    mono = Mono()
    clock = RedisClock(monotonic=mono, wall=lambda: 500.0)
    server = TimeServer(mono, epoch_s=1_000.0)
    unsynced = clock.now()
    server.fail = True

    with capture_logs() as logs:
        synced = await clock.try_sync(server)

    assert (unsynced, synced, clock.now()) == (500.0, False, 500.0)
    assert [line["event"] for line in logs] == ["clock_sync_failed"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [((1_700_000_000, 250_000), 1_700_000_000.25), ({"node-a:7000": (5, 500_000)}, 5.5)],
    ids=["single-node", "cluster-per-node"],
)
def test_time_replies_parse_to_epoch_seconds(reply, expected):
    assert parse_time_reply(reply) == expected


async def test_a_measure_with_a_slow_round_trip_does_not_replace_a_tighter_one():
    """A reply that waited on a busy event loop is imprecise: the earlier, quicker measure stays
    until drift makes it the less precise one."""
    mono = Mono()
    clock = RedisClock(monotonic=mono, wall=lambda: 0.0)
    await clock.sync(TimeServer(mono, epoch_s=1_000.0, rtt_s=0.002))
    good = clock.offset_s

    await clock.sync(TimeServer(mono, epoch_s=1_000.3, rtt_s=0.6))  # a busy loop held the reply
    kept = clock.offset_s
    mono.t += 100_000.0  # long enough for drift to outweigh the slow round-trip
    await clock.sync(TimeServer(mono, epoch_s=1_000.3, rtt_s=0.6))

    assert kept == good
    assert clock.offset_s != good


async def test_case_8_a_step_of_redis_s_clock_is_taken_at_the_next_measure_and_logged():
    """A tight measure (1 ms round-trip), then Redis's clock steps 300 s ahead: the next measure,
    though looser (40 ms), cannot agree with the first and replaces it at once."""
    mono = Mono()
    clock = RedisClock(monotonic=mono)
    server = TimeServer(mono, epoch_s=1_000.0, rtt_s=0.001)
    await clock.sync(server)
    server.epoch_s += 300.0
    server.rtt_s = 0.04
    mono.t += 1.0

    with capture_logs() as logs:
        await clock.sync(server)

    assert clock.now() == pytest.approx(1_000.0 + 300.0 + (mono.t - 50.0), abs=0.03)
    assert [(line["event"], round(line["step_s"])) for line in logs] == [("redis_clock_stepped", 300)]


async def test_case_8_a_looser_measure_within_the_bounds_is_no_step():
    mono = Mono()
    clock = RedisClock(monotonic=mono)
    server = TimeServer(mono, epoch_s=1_000.0, rtt_s=0.001)
    await clock.sync(server)
    before = clock.offset_s
    server.rtt_s = 0.04
    mono.t += 1.0

    with capture_logs() as logs:
        await clock.sync(server)

    assert clock.offset_s == before
    assert logs == []
