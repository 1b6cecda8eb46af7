"""The timer re-arm race on a real Redis: a sweeper deleting while the engine re-arms.

A re-arm is *lost* when the sweeper removes a timer armed at ``k`` that it never saw (it
compared against ``k - 1``, the engine re-armed in between, then the delete removed ``k``).
The compare-and-delete script loses none; the specified two-call ZSCORE + ZREM loses some.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import redis
from support.redis_server import start_redis_server

from store import RedisStore

ITERATIONS = 4000
MEMBER = "exe-1\x00state/wait"


def _race(server, prefix: str, delete: Callable[[redis.Redis, float], bool]) -> int:
    """Run the writer against the sweeper; return how many armed timers vanished unseen."""
    writer_client, sweeper_client = server.client(), server.client()
    key = f"{prefix}:timers"
    fired: set[float] = set()
    vanished: list[float] = []
    done = threading.Event()

    def writer() -> None:
        for k in range(1, ITERATIONS + 1):
            # ZADD answers 1 when the member was absent: the previous arming was removed
            if writer_client.zadd(key, {MEMBER: float(k)}) == 1 and k > 1:
                vanished.append(float(k - 1))
        done.set()

    def sweeper() -> None:
        while not done.is_set():
            for _member, fire_at in sweeper_client.zrangebyscore(key, "-inf", "+inf", withscores=True):
                if delete(sweeper_client, fire_at):
                    fired.add(fire_at)

    threads = [threading.Thread(target=writer), threading.Thread(target=sweeper)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    last = sweeper_client.zscore(key, MEMBER)
    if last is not None and delete(sweeper_client, last):
        fired.add(last)
    writer_client.close()
    sweeper_client.close()
    return len([k for k in vanished if k not in fired])


@pytest.mark.slow
def test_compare_and_delete_loses_no_re_armed_timer(redis_server, prefix) -> None:
    stores: dict[int, RedisStore] = {}

    def ours(client: redis.Redis, fire_at: float) -> bool:
        store = stores.setdefault(id(client), RedisStore(client, prefix=prefix))
        return store.delete_timer("exe-1", "state/wait", fire_at)

    lost = _race(redis_server, prefix, ours)

    assert lost == 0


@pytest.mark.slow
def test_the_two_call_delete_loses_re_armed_timers(redis_server, prefix, record_property) -> None:
    """The specification's ZSCORE-then-ZREM, for the record: it loses timers under the race."""
    key = f"{prefix}:timers"

    def two_call(client: redis.Redis, fire_at: float) -> bool:
        score = client.zscore(key, MEMBER)
        if score is not None and float(score) == fire_at:
            client.zrem(key, MEMBER)
            return True
        return False

    lost = _race(redis_server, prefix, two_call)

    record_property("two_call_lost", lost)
    print(f"two-call ZSCORE+ZREM lost {lost} re-armed timers in {ITERATIONS} iterations")
    assert lost > 0


def test_compare_and_delete_asks_per_member_where_zmscore_is_unknown(prefix) -> None:
    """Before Redis 6.2 there is no ZMSCORE: the script falls back to one ZSCORE per member."""
    server = start_redis_server("--rename-command", "ZMSCORE", "ZMSCORE_UNKNOWN_HERE")
    try:
        client = server.client()
        store = RedisStore(client, prefix=prefix)
        client.zadd(f"{prefix}:timers", {"a\x00p": 1.5, "b\x00p": 2.5, "c\x00p": 3.5})

        removed = store.delete_timers_many([(b"a\x00p", 1.5), ("b\x00p", 9.0), ("c\x00p", 3.5)])

        assert removed == 2
        assert client.zrange(f"{prefix}:timers", 0, -1) == [b"b\x00p"]
        with pytest.raises(redis.ResponseError):
            client.execute_command("ZMSCORE", f"{prefix}:timers", "b\x00p")
        client.close()
    finally:
        server.cleanup()
